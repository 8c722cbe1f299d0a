"""Feedback and report as the reader sees them, rendered in Chromium with the network cut off.

A class of two hands in notebook 01: one with the `loop-exclusive` mistake (the solution's
`x[b, : t + 1]` turned into `x[b, :t]`), one that answered only the first cell (the others
still hold the stub). The grader's command line writes the pages (--no-jail: the pages, not
the jail, are under test here; the hostile corpus runs jailed). On the first screen: the
mistake in the catalog's words, and "not answered yet" for the stubs; the summary box is as
wide as the notebook under it; no hidden test code anywhere; the report has each heading
once, whole numbers on count axes, and says "k of n who handed it in". Screenshots go to
build/screenshots/.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.catalog import MISTAKES
from autograder.examples import solutions
from autograder.notebook_io import answer_cells, grade_id
from autograder.paths import NOTEBOOKS, ROOT

pytestmark = pytest.mark.browser

NB = "01_uniform_averaging.ipynb"
MISTAKE = "loop-exclusive"
WRONG, PARTIAL = "student-wrong", "student-partial"
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
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    solved = solutions(NB)
    wrong_loop = solved["average-loop"].replace("x[b, : t + 1]", "x[b, :t]")
    assert wrong_loop != solved["average-loop"], "the solution's slice changed: update this test"
    base = tmp_path_factory.mktemp("feedback")
    first = next(iter(solved))
    for student, answers in (
        (WRONG, {**solved, "average-loop": wrong_loop}),
        (PARTIAL, {first: solved[first]}),
    ):
        (base / "submissions" / student).mkdir(parents=True)
        nbformat.write(submission(answers), str(base / "submissions" / student / NB))
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(base / "submissions"),
         "--out", str(base / "out"), "--no-jail", "--notebooks", "01"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"grader failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return base / "out"


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _open(browser, path: Path, blocked: list[str]):
    context = browser.new_context(viewport=FIRST_SCREEN)
    context.route(
        re.compile(r"^https?://"), lambda route: (blocked.append(route.request.url), route.abort())
    )
    page = context.new_page()
    page.goto(path.as_uri(), wait_until="load")
    return context, page


def _on_first_screen(page, text: str) -> bool:
    hits = page.get_by_text(text)
    return any(
        hits.nth(i).is_visible()
        and (box := hits.nth(i).bounding_box())
        and 0 <= box["y"] <= FIRST_SCREEN["height"] - box["height"]
        for i in range(hits.count())
    )


def page_of(out: Path, student: str) -> Path:
    return out / "feedback" / student / f"{Path(NB).stem}.html"


def test_the_mistake_is_on_the_first_screen(browser, out: Path, screenshots) -> None:
    blocked: list[str] = []
    context, page = _open(browser, page_of(out, WRONG), blocked)
    try:
        page.screenshot(path=str(screenshots / f"feedback-{Path(NB).stem}-{MISTAKE}.png"))
        page.screenshot(
            path=str(screenshots / f"feedback-{Path(NB).stem}-{MISTAKE}-full.png"), full_page=True
        )
        words = _words(MISTAKES[MISTAKE])
        assert _on_first_screen(page, words[:60]), f"{MISTAKE!r} is not on the first screen"
        assert words in _words(page.inner_text("body")), "the catalog's words appear cut"
        for hidden in HIDDEN:
            assert hidden not in page.content(), f"hidden test code on the page: {hidden!r}"
            assert hidden not in page_of(out, WRONG).read_text(encoding="utf-8"), hidden
        assert not blocked, blocked
    finally:
        context.close()


def test_a_partly_unanswered_notebook_says_so(browser, out: Path, screenshots) -> None:
    blocked: list[str] = []
    context, page = _open(browser, page_of(out, PARTIAL), blocked)
    try:
        page.screenshot(path=str(screenshots / f"feedback-{Path(NB).stem}-partly-unanswered.png"))
        assert _on_first_screen(page, "Not answered yet")
        assert "NotImplementedError:" not in _words(page.inner_text(".grader-summary"))
        summary = page.locator(".grader-summary").bounding_box()
        cell = page.locator(".jp-Cell").first.bounding_box()
        assert (
            abs(summary["x"] - cell["x"]) <= 12 and abs(summary["width"] - cell["width"]) <= 24
        ), (
            summary,
            cell,
        )
        assert not blocked, blocked
    finally:
        context.close()


def test_the_report_reads_cleanly(browser, out: Path, screenshots) -> None:
    blocked: list[str] = []
    context, page = _open(browser, out / "report.html", blocked)
    try:
        page.screenshot(path=str(screenshots / "report.png"), full_page=True)
        headings = page.locator("h2").all_inner_texts()
        assert len(headings) == len(set(headings)), headings
        assert "Pass rate per graded cell" not in page.inner_text("body")
        assert "1 of 2 who handed it in (50%)" in _words(page.inner_text("body"))
        sizes = page.locator("img").evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
        assert len(sizes) == 3 and all(w > 100 for w in sizes), sizes
        assert not blocked, blocked
    finally:
        context.close()
