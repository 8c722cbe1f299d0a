"""The public contract holds for every notebook: files, grade_ids and the names they define."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autograder.checks import all_specs, notebook_specs
from autograder.checks.understanding import Prediction
from autograder.model import contract
from autograder.model.contract import CONTRACT
from autograder.model.notebook_io import (
    answer_cells,
    grade_id,
    is_test,
    nbgrader_meta,
    read,
    source,
)
from autograder.model.paths import NOTEBOOKS, SOLUTIONS


def defined_names(src: str) -> set[str]:
    names = set()
    for node in ast.parse(src).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


@pytest.mark.parametrize("notebook", list(CONTRACT))
def test_solution_defines_every_contract_name(notebook: str) -> None:
    nb = read(SOLUTIONS / notebook)
    answers = answer_cells(nb)
    for gid, names in CONTRACT[notebook].items():
        assert gid in answers, f"{notebook}: no answer cell {gid!r}"
        assert answers[gid].cell_type == "code"
        missing = set(names) - defined_names(source(answers[gid]))
        assert not missing, f"{notebook}:{gid} does not define {sorted(missing)}"


@pytest.mark.parametrize("notebook", list(CONTRACT))
def test_every_answer_has_a_scored_test_cell_matching_its_checks(notebook: str) -> None:
    nb = read(SOLUTIONS / notebook)
    tests = {grade_id(c): c for c in nb.cells if is_test(c)}
    ids = [grade_id(c) for c in nb.cells if grade_id(c)]
    assert len(ids) == len(set(ids)), f"{notebook}: duplicate grade_ids"
    for gid in CONTRACT[notebook]:
        cell = tests.get(contract.test_cell_id(gid))
        assert cell is not None, f"{notebook}: no test cell {contract.test_cell_id(gid)}"
        points = float(nbgrader_meta(cell)["points"])
        spec = all_specs()[gid]
        assert spec.notebook == notebook
        assert points == spec.points, (
            f"{gid}: test cell has {points} points, checks give {spec.points}"
        )
        assert f'grade_in_notebook("{gid}", globals())' in source(cell)


@pytest.mark.parametrize("notebook", list(CONTRACT))
def test_release_keeps_ids_and_drops_solutions(notebook: str) -> None:
    nb = read(NOTEBOOKS / notebook)
    answers = answer_cells(nb)
    assert set(CONTRACT[notebook]) <= set(answers)
    for cell in nb.cells:
        text = source(cell)
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
        assert "grade_in_notebook" not in text
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None


def test_every_master_notebook_is_in_the_contract() -> None:
    masters = {path.name for path in SOLUTIONS.glob("*.ipynb")}
    assert masters == set(CONTRACT), (
        f"masters not in CONTRACT: {sorted(masters - set(CONTRACT))}; "
        f"CONTRACT without a master: {sorted(set(CONTRACT) - masters)}"
    )


@pytest.mark.parametrize("notebook", list(CONTRACT))
def test_every_autograded_code_answer_is_in_the_contract(notebook: str) -> None:
    # A code answer cell left out of CONTRACT would still be graded (the grader asks for the
    # names the master's cell defines), but the contract tests and the release's leak scan
    # would never look at it. Prediction cells are the one kind graded without an entry.
    specs = notebook_specs(notebook)
    code_answers = {
        gid
        for gid, cell in answer_cells(read(SOLUTIONS / notebook)).items()
        if cell.cell_type == "code"
    }
    predictions = {gid for gid, spec in specs.items() if isinstance(spec, Prediction)}
    unlisted = code_answers - set(CONTRACT[notebook]) - predictions
    assert not unlisted, f"{notebook}: answer cells missing from CONTRACT: {sorted(unlisted)}"


@pytest.mark.parametrize("notebook", list(CONTRACT))
def test_every_notebook_has_its_checks_probe_and_corpus_modules(notebook: str) -> None:
    # The checks and corpus modules are found by file name and a missing one reads as "no
    # cells": name the missing file here instead of letting each cell's test fail on its own.
    number = notebook[:2]
    root = Path(__file__).resolve().parents[3]
    expected = [
        root / "autograder" / "checks" / f"nb{number}.py",
        root / "autograder" / "probe" / f"nb{number}.py",
        root / "tests" / "corpus" / f"nb{number}.py",
    ]
    missing = [str(path.relative_to(root)) for path in expected if not path.is_file()]
    assert not missing, f"{notebook}: missing {missing}"
