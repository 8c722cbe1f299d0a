"""Feedback and report as the reader sees them, rendered in Chromium with the network cut off.

The class is tests/e2e/browser/graded_class.py's, graded once per session by the command line:
in notebook 01 one student makes the `loop-exclusive` mistake, one answered only the first
cell (the others still hold the stub). On the first screen: the mistake in the catalog's
words, and "not answered yet" for the stubs; the summary box is as wide as the notebook under
it; no hidden test code anywhere; the report has each heading once, its three figures, and
says "k of n who handed it in" (whole numbers on its count axes: test_grader_cli.py).
Screenshots go to build/screenshots/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autograder.checks.catalog import MISTAKES
from tests.e2e.browser.graded_class import MISTAKE, NB01, PARTIAL, WRONG, graded_class

# pytest-timeout: the class is graded in the first test (setup counts)
pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

NB = NB01
FIRST_SCREEN = {"width": 1280, "height": 800}
HIDDEN = ("grade_in_notebook", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "autograder.checks")


@pytest.fixture(scope="module")
def out() -> Path:
    return graded_class().out


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
