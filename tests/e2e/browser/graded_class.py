"""A small class graded by the command line once per test session, for the tests that read a
real OUT: the feedback pages and the report (in Chromium), and hand grading through to export.

Notebook 01: `student-wrong` makes the `loop-exclusive` mistake (the solution's
`x[b, : t + 1]` turned into `x[b, :t]`), `student-partial` answered only the first cell (the
others still hold the stub). Notebook 02: `student-wrong` hands in every answer, the written
one included (it waits for hand grading), and beside it Colab's `Copy of ...` of the untouched
release (left out: the finished file is graded); `student-partial` the release untouched
(`unanswered`); `student-stripped` (02 only) every answer, the notebook's metadata stripped
(its written answer is found where it stands and waits too). Graded with --no-jail: the pages
and the gradebook are under test here; the hostile corpus runs jailed. Readers must not change
OUT: copy it first.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.model.notebook_io import answer_cells, grade_id
from autograder.model.paths import NOTEBOOKS, ROOT
from examples.build import correct, release, solutions, strip_metadata

NB01, NB02 = "01_uniform_averaging.ipynb", "02_queries_and_keys.ipynb"
WRONG, PARTIAL, STRIPPED = "student-wrong", "student-partial", "student-stripped"
COPY = f"Copy of {NB02}"  # the untouched release beside WRONG's finished 02
MISTAKE = "loop-exclusive"


@dataclass(frozen=True)
class GradedClass:
    submissions: Path
    out: Path


def submission(answers: dict[str, str]) -> nbformat.NotebookNode:
    """The released notebook 01 with its answer cells filled in, as a student hands it in."""
    nb = nbformat.read(str(NOTEBOOKS / NB01), as_version=4)
    cells = answer_cells(nb)
    assert set(answers) <= set(cells), f"unknown answer cells {set(answers) - set(cells)}"
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    return nb


def grade(submissions: Path, out: Path, *options: str) -> subprocess.CompletedProcess:
    """`python -m autograder grade SUBMISSIONS --out OUT --no-jail ...` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
         "--no-jail", *options],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _write(submissions: Path) -> None:
    solved = solutions(NB01)
    wrong_loop = solved["average-loop"].replace("x[b, : t + 1]", "x[b, :t]")
    assert wrong_loop != solved["average-loop"], "the solution's slice changed: update this test"
    first = next(iter(solved))
    handed = {
        WRONG: {NB01: submission({**solved, "average-loop": wrong_loop}), NB02: correct(NB02)},
        PARTIAL: {NB01: submission({first: solved[first]}), NB02: release(NB02)},
        STRIPPED: {NB02: strip_metadata(correct(NB02))},
    }
    for student, files in handed.items():
        (submissions / student).mkdir(parents=True)
        for name, nb in files.items():
            nbformat.write(nb, str(submissions / student / name))
    nbformat.write(release(NB02), str(submissions / WRONG / COPY))  # the newer file, unanswered


@functools.cache
def graded_class() -> GradedClass:
    """The class, graded on first use (about a minute); the same folders afterwards."""
    base = Path(tempfile.mkdtemp(prefix="graded-class-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    klass = GradedClass(base / "submissions", base / "out")
    _write(klass.submissions)
    done = grade(klass.submissions, klass.out, "--notebooks", "01,02")
    assert done.returncode == 0, f"grader failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return klass
