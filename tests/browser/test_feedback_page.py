"""Feedback as a student reads it: one wrong submission's page, rendered in Chromium.

A one-student class hands in notebook 01 with the `loop-exclusive` mistake (the solution's
`x[b, : t + 1]` turned into `x[b, :t]`) in the released notebook's answer cell. The grader's
command line writes the feedback page; Chromium opens it at a laptop's size with the network
cut off. The mistake, in the catalog's words, must be on the first screen, and no hidden test
code may appear anywhere in the page, visible or not.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.catalog import MISTAKES
from autograder.notebook_io import answer_cells, grade_id
from autograder.paths import NOTEBOOKS, ROOT
from tests import corpus

pytestmark = pytest.mark.browser

NB = "01_uniform_averaging.ipynb"
MISTAKE = "loop-exclusive"
STUDENT = "student-wrong"
FIRST_SCREEN = {"width": 1280, "height": 800}
HIDDEN = ("grade_in_notebook", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "autograder.checks")


def submission(answers: dict[str, str]) -> nbformat.NotebookNode:
    """The released notebook with its answer cells filled in, as a student hands it in."""
    nb = nbformat.read(str(NOTEBOOKS / NB), as_version=4)
    cells = answer_cells(nb)
    assert set(answers) <= set(cells), f"unknown answer cells {set(answers) - set(cells)}"
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    return nb


@pytest.fixture(scope="module")
def feedback_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (mutation,) = [m for m in corpus.mutations() if m.notebook == NB and m.mistake == MISTAKE]
    base = tmp_path_factory.mktemp("feedback")
    folder = base / "submissions" / STUDENT
    folder.mkdir(parents=True)
    nbformat.write(submission(corpus.mutated_answers(mutation)), str(folder / NB))
    out = base / "out"
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(folder.parent), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"grader failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    page = out / "feedback" / STUDENT / f"{Path(NB).stem}.html"
    assert page.is_file(), f"no feedback page at {page}: {sorted(out.rglob('*'))}"
    return page


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_the_mistake_is_on_the_first_screen(browser, feedback_page: Path, screenshots) -> None:
    context = browser.new_context(viewport=FIRST_SCREEN)
    blocked: list[str] = []
    context.route(
        re.compile(r"^https?://"), lambda route: (blocked.append(route.request.url), route.abort())
    )
    try:
        page = context.new_page()
        page.goto(feedback_page.as_uri(), wait_until="load")
        page.screenshot(path=str(screenshots / f"feedback-{Path(NB).stem}-{MISTAKE}.png"))
        page.screenshot(
            path=str(screenshots / f"feedback-{Path(NB).stem}-{MISTAKE}-full.png"), full_page=True
        )
        words = _words(MISTAKES[MISTAKE])
        hits = page.get_by_text(words[:60])
        assert hits.count() >= 1, f"the page never says: {words!r}"
        on_screen = [
            box
            for i in range(hits.count())
            if hits.nth(i).is_visible()
            and (box := hits.nth(i).bounding_box())
            and box["y"] >= 0
            and box["y"] + box["height"] <= FIRST_SCREEN["height"]
        ]
        assert on_screen, f"{MISTAKE!r} is named only below the first screen"
        assert words in _words(page.inner_text("body")), "the catalog's words appear cut"
        for hidden in HIDDEN:
            assert hidden not in page.content(), f"hidden test code on the page: {hidden!r}"
            assert hidden not in feedback_page.read_text(encoding="utf-8"), hidden
        print(f"feedback page: {len(blocked)} network requests blocked {blocked[:3]}")
    finally:
        context.close()
