"""The public contract holds for every notebook: files, grade_ids and the names they define."""

from __future__ import annotations

import ast

import pytest

from autograder.checks import all_specs
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
