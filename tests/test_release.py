"""notebooks/ is exactly what nbgrader releases from solutions/, and it fails only at the stubs."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from autograder.contract import CONTRACT
from autograder.notebook_io import answer_cells, is_answer, read
from autograder.paths import NOTEBOOKS
from autograder.release import release_into
from tests.stubflow import answer_names, describe, stub_problems


@pytest.fixture(scope="module")
def fresh_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("release")
    release_into(target)
    return target


def _canonical(path: Path) -> str:
    return json.dumps(nbformat.read(str(path), as_version=4), sort_keys=True, indent=1)


def test_release_covers_every_notebook(fresh_release: Path) -> None:
    assert sorted(p.name for p in fresh_release.glob("*.ipynb")) == sorted(CONTRACT)
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(CONTRACT)


@pytest.mark.parametrize("notebook", list(CONTRACT))
def test_committed_release_equals_fresh_release(fresh_release: Path, notebook: str) -> None:
    assert _canonical(NOTEBOOKS / notebook) == _canonical(fresh_release / notebook), (
        f"notebooks/{notebook} differs from a fresh release of solutions/: run `make release`"
    )


@pytest.mark.slow
@pytest.mark.parametrize("notebook", list(CONTRACT))
def test_release_fails_only_at_the_answer_stubs(notebook: str) -> None:
    """nbgrader's Validator, inverted: no test passes; and every error traces to a stub."""
    from nbgrader.validator import Validator
    from traitlets.config import Config

    class RecordingValidator(Validator):
        def _preprocess(self, nb):  # keep the executed notebook to inspect its errors
            self.executed = super()._preprocess(nb)
            return self.executed

    config = Config()
    config.Execute.timeout = 300
    validator = RecordingValidator(config=config, invert=True)
    results = validator.validate(str(NOTEBOOKS / notebook))
    assert not results.get("passed"), f"tests pass on the untouched release: {results['passed']}"
    assert not results.get("changed") and not results.get("type_changed"), results

    contract_names = answer_names(notebook)
    cells = validator.executed.cells
    errors = [[o for o in c.get("outputs", []) if o.output_type == "error"] for c in cells]
    first_answer = next(i for i, c in enumerate(cells) if is_answer(c))
    early = [describe(e) for errs in errors[:first_answer] for e in errs]
    assert not early, f"{notebook} fails before its first answer cell: {early}"
    problems, stubs_hit = stub_problems(cells, errors, contract_names)
    why = "\n".join(problems)
    assert not problems, f"{notebook} fails for reasons other than its stubs:\n{why}"
    assert stubs_hit, f"{notebook}: no answer stub ever raised NotImplementedError"


def test_release_notebooks_read_as_valid_nbformat() -> None:
    for path in NOTEBOOKS.glob("*.ipynb"):
        nbformat.validate(read(path))
        assert answer_cells(read(path)), path
