"""Broken and hostile submissions: each gets its status and its honest points, none hurts another.

One class (the first notebook only), handed in as a .zip with an unsafe member, graded once
with tight limits: invalid JSON, JSON that is no notebook, stripped metadata, a renamed file,
deleted/duplicated/reordered cells, neutralised tests, an endless loop ignoring SIGINT,
os._exit, sys.exit, 100 MB of printing, a memory hog, monkeypatched torch and checks, added
cells; and a bystander who did everything right.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import psutil
import pytest

from autograder.grade import feedback_path
from tests.corpus import hostile

pytestmark = pytest.mark.slow
NOTEBOOK = hostile.course_notebooks()[0]
LIMITS = ("--jobs", "2", "--timeout", "60", "--cell-timeout", "20", "--memory-mb", "1536")


def hostile_class() -> list[hostile.Case]:
    bystander = hostile.Case(
        "bystander",
        "correct",
        {NOTEBOOK: hostile.dump(hostile.correct(NOTEBOOK))},
        {NOTEBOOK: hostile.Expect("ok")},
    )
    return [bystander, *hostile.broken_cases(NOTEBOOK), *hostile.hostile_cases(NOTEBOOK)]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[hostile.Case], str]:
    root = tmp_path_factory.mktemp("hostile")
    cases = hostile_class()
    hostile.write_class(root / "class", cases)
    archive = root / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted((root / "class").rglob("*")):
            zf.write(path, Path("class") / path.relative_to(root / "class"))
        zf.writestr("../escaped.ipynb", "{}")
    scratch = root / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    result = hostile.grade(archive, root / "out", *LIMITS, env=env)
    assert result.returncode == 0, result.stderr
    return root, cases, result.stderr


def test_each_case_gets_its_status_and_points(graded: tuple[Path, list[hostile.Case], str]) -> None:
    root, cases, _ = graded
    problems = hostile.check(root / "out", cases)
    assert not problems, "\n".join(problems)


def test_statuses_cover_the_contract(graded: tuple[Path, list[hostile.Case], str]) -> None:
    root, _, _ = graded
    statuses = {r["status"] for r in hostile.read_csv(root / "out" / "grades.csv")}
    assert statuses == {"ok", "missing", "invalid", "timeout", "error"}


def test_the_zip_was_extracted_safely_and_cleaned_up(
    graded: tuple[Path, list[hostile.Case], str],
) -> None:
    root, _, stderr = graded
    assert "unsafe path" in stderr and "escaped.ipynb" in stderr
    assert not (root / "escaped.ipynb").exists() and not (root / "out" / "escaped.ipynb").exists()
    assert not (root / "out" / ".submissions").exists()


def test_nothing_is_left_running_or_lying_around(
    graded: tuple[Path, list[hostile.Case], str],
) -> None:
    root, _, _ = graded
    scratch = str(root / "tmp")
    stray = []
    for proc in psutil.process_iter(["pid", "cwd", "cmdline"]):
        cwd = proc.info.get("cwd") or ""
        if cwd.startswith(scratch):
            stray.append(proc.info)
    assert not stray
    assert not list((root / "tmp").iterdir())


def test_pages_are_small_and_say_what_happened(
    graded: tuple[Path, list[hostile.Case], str],
) -> None:
    root, _, _ = graded
    out = root / "out"
    page = feedback_path(out, "hostile_print", NOTEBOOK)
    assert page.stat().st_size < 5 * 2**20
    assert "output truncated by the grader" in hostile.page_text(page)
    assert "did not finish in time" in hostile.page_text(
        feedback_path(out, "hostile_loop", NOTEBOOK)
    )
    assert "MiB of memory" in hostile.page_text(feedback_path(out, "hostile_memory", NOTEBOOK))
    assert "could not be read" in hostile.page_text(feedback_path(out, "broken_json", NOTEBOOK))
    renamed = hostile.page_text(feedback_path(out, "renamed", NOTEBOOK))
    assert "matched by its content" in renamed
    text = hostile.page_text(feedback_path(out, "hostile_patch", NOTEBOOK))
    assert "HIDDEN TESTS" not in text
    for line in hostile.hidden_test_lines():
        assert line not in text
