"""The course model: one rule names a notebook, and the grader's version covers the grading path
and the templates, not the exports or the release (autograder/model/course.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.course import helpers, staging
from autograder.model.contract import NOTEBOOKS, notebook_named
from autograder.model.course import GRADING_PATH, InputError, grader_hash, select_notebooks
from autograder.model.paths import ROOT

HEAD = "05_the_head.ipynb"


@pytest.mark.parametrize(
    "key", [HEAD, "05_the_head", "05", "5", f"notebooks/{HEAD}", Path("solutions") / HEAD, " 05 "]
)
def test_one_rule_names_a_notebook_for_every_caller(key: object) -> None:
    assert notebook_named(key) == HEAD
    assert helpers.notebook_of(str(key)) == HEAD
    assert staging.notebook_name(str(key)) == HEAD
    assert select_notebooks(str(key).strip()) == (HEAD,)


@pytest.mark.parametrize("key", ["", "08", "head", "05_the_head.py", "the_head", "0x5"])
def test_what_names_no_notebook_is_refused_by_every_caller(key: str) -> None:
    assert notebook_named(key) is None
    with pytest.raises(ValueError):
        helpers.notebook_of(key)
    with pytest.raises(ValueError):
        staging.notebook_name(key)
    with pytest.raises(InputError):
        select_notebooks(key or ",")


def test_every_notebook_is_named_by_its_number() -> None:
    assert [notebook_named(str(int(nb[:2]))) for nb in NOTEBOOKS] == list(NOTEBOOKS)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("grader") / "autograder"
    shutil.copytree(ROOT / "autograder", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize(
    "rel",
    [
        "worker/judge.py",
        "jail/jail.py",
        "checks/nb05.py",
        "probe/child.py",
        "publish/feedback.py",
        "model/settings.py",
        "course/staging.py",
        "templates/feedback_page.html.j2",
        "templates/feedback.css",
    ],
)
def test_an_edit_on_the_grading_path_or_a_template_regrades(package: Path, rel: str) -> None:
    before = grader_hash(package)
    path = package / rel
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n")
        assert grader_hash(package) != before, rel
    finally:
        path.write_bytes(original)
    assert grader_hash(package) == before


@pytest.mark.parametrize(
    "rel",
    [
        "publish/export.py",
        "publish/gradebook.py",
        "publish/report.py",
        "course/release.py",
        "course/student_release.py",
        "gradescope/build.py",
        "cli.py",
    ],
)
def test_an_edit_off_the_grading_path_does_not_regrade(package: Path, rel: str) -> None:
    before = grader_hash(package)
    path = package / rel
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# edited\n")
        assert grader_hash(package) == before, rel
    finally:
        path.write_bytes(original)


def test_the_grading_path_names_what_exists_and_not_the_examples() -> None:
    for rel in GRADING_PATH:
        assert (ROOT / "autograder" / rel).exists(), f"GRADING_PATH names a missing {rel}"
    assert not (ROOT / "autograder" / "examples.py").exists()
    assert (ROOT / "examples" / "build.py").is_file()
