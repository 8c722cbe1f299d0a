"""notebooks/ is exactly what nbgrader releases from solutions/ (that it fails only at its
stubs, nbgrader's validation inverted, is checked where it runs: test_colab_venv.py)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from autograder import cli
from autograder.course import colab, release
from autograder.course.release import release_into
from autograder.model.contract import CONTRACT
from autograder.model.notebook_io import answer_cells, read
from autograder.model.paths import NOTEBOOKS


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


def test_release_notebooks_read_as_valid_nbformat() -> None:
    for path in NOTEBOOKS.glob("*.ipynb"):
        nbformat.validate(read(path))
        assert answer_cells(read(path)), path


def test_make_release_warns_of_the_placeholder_repository_and_releases(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README, Instructors 1: "While `repository` is still the shipped placeholder, `make
    badges` and `student-release` refuse and `make release` warns": the release is written
    all the same (exit 0), with the placeholder and the fix on stderr; a set address, no word."""
    released: list[Path] = []

    def fake_release(target: Path, **kwargs: object) -> list[Path]:
        released.append(target)
        return []

    monkeypatch.setattr(release, "release_into", fake_release)  # not the real notebooks/
    monkeypatch.setattr(colab, "settings", lambda *a: colab.CourseRepo(colab.PLACEHOLDER))
    assert cli.main(["release"]) == 0
    err = capsys.readouterr().err
    assert f"still the placeholder {colab.PLACEHOLDER!r}" in err, err
    assert released == [NOTEBOOKS], "a warning, not a refusal: the release is still written"

    monkeypatch.setattr(colab, "settings", lambda *a: colab.CourseRepo("your-org/students"))
    assert cli.main(["release"]) == 0
    assert "placeholder" not in capsys.readouterr().err
    assert released == [NOTEBOOKS, NOTEBOOKS]
