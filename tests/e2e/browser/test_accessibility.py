"""The pages students and instructors read, checked with axe-core in Chromium (WCAG 2.1 AA):
every feedback page of the class graded once per session (tests/e2e/browser/graded_class.py: a
wrong, a partly answered, an untouched and a stripped notebook), the class report, and the
student release's README (rendered from Markdown as a code host shows it). No serious or
critical violation; every image has a text alternative that is not nbconvert's placeholder;
every figure of the report says what it shows and links the table with its numbers; every
link within a page leads somewhere on it (an unanswered notebook's page shows no notebook, so
its cell names are not links).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autograder.course import colab, student_release
from autograder.model.paths import NOTEBOOKS
from tests.e2e.browser.graded_class import NB01, NB02, PARTIAL, graded_class

# pytest-timeout: the class is graded in the first test (setup counts)
pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

BLOCKING = ("serious", "critical")
PLACEHOLDER = "No description has been provided for this image"


@pytest.fixture(scope="module")
def out() -> Path:
    return graded_class().out


@pytest.fixture(scope="module")
def axe():
    from axe_playwright_python.sync_playwright import Axe

    return Axe()


def _open(browser, path: Path):
    """The page with the network cut off; its CSP bypassed so that axe's script can run."""
    context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 800})
    context.route(re.compile(r"^https?://"), lambda route: route.abort())
    page = context.new_page()
    page.goto(path.as_uri(), wait_until="load")
    return context, page


def _blocking(axe, page) -> list[str]:
    found = axe.run(page).response["violations"]
    return [
        f"[{v['impact']}] {v['id']} ({len(v['nodes'])}): {v['help']}; first: "
        f"{v['nodes'][0]['target']} {(v['nodes'][0].get('failureSummary') or '')[:300]}"
        for v in found
        if v["impact"] in BLOCKING
    ]


def _broken_anchors(page) -> list[str]:
    """In-page links whose target is missing (as a browser looks: the fragment, then decoded)."""
    return page.evaluate(
        """() => [...document.querySelectorAll('a[href^="#"]')]
            .map(a => a.getAttribute('href').slice(1))
            .filter(id => id && !document.getElementById(id)
                    && !document.getElementById(decodeURIComponent(id)))"""
    )


def _alts(page) -> list[str | None]:
    return page.locator("img").evaluate_all("imgs => imgs.map(i => i.getAttribute('alt'))")


def _pages(out: Path) -> list[Path]:
    pages = sorted((out / "feedback").glob("*/*.html"))
    assert len(pages) >= 4, pages
    return pages


def test_feedback_pages_pass_axe(browser, axe, out: Path) -> None:
    problems = {}
    for path in _pages(out):
        context, page = _open(browser, path)
        try:
            found = _blocking(axe, page)
            found += [f"link to #{a}, which is not on the page" for a in _broken_anchors(page)]
            alts = _alts(page)
            found += [f"an image without a description: {a!r}" for a in alts
                      if not a or not a.strip() or PLACEHOLDER in a]  # fmt: skip
            if found:
                problems[path.relative_to(out).as_posix()] = found
        finally:
            context.close()
    assert not problems, problems


def test_the_figures_of_a_feedback_page_say_what_they_show(browser, out: Path) -> None:
    pages = [p for p in _pages(out) if p.stem == Path(NB01).stem]
    described = []
    for path in pages:
        context, page = _open(browser, path)
        try:
            described += [a for a in _alts(page) if a and a.startswith("Figure: ")]
        finally:
            context.close()
    assert described, "notebook 01 draws the uniform weights with a title: its alt says so"
    assert any("uniform averaging weights" in a for a in described), described


def test_an_unanswered_notebooks_page_links_nowhere_it_cannot(browser, out: Path) -> None:
    path = out / "feedback" / PARTIAL / f"{Path(NB02).stem}.html"
    assert "unanswered" in path.read_text(encoding="utf-8")
    context, page = _open(browser, path)
    try:
        assert page.locator(".jp-Cell").count() == 0, "the summary alone"
        assert page.locator('a[href^="#cell-id="]').count() == 0
        assert page.locator(".grader-summary tr.cell th").count() > 0, "the cells are still named"
    finally:
        context.close()


def test_the_report_passes_axe_and_its_figures_link_their_numbers(browser, axe, out: Path) -> None:
    context, page = _open(browser, out / "report.html")
    try:
        assert _blocking(axe, page) == []
        assert _broken_anchors(page) == []
        figures = page.locator("img")
        assert figures.count() == 3
        for i in range(figures.count()):
            alt = figures.nth(i).get_attribute("alt") or ""
            title = figures.nth(i).evaluate("img => img.previousElementSibling.textContent")
            assert len(alt) > len(title) + 20 and re.search(r"\d", alt), (title, alt)
            link = figures.nth(i).evaluate("img => img.nextElementSibling.querySelector('a').hash")
            assert page.locator(f"table{link}").count() == 1, (title, link)
        assert "Histogram of the 3 students' totals" in page.content().replace("&#39;", "'")
    finally:
        context.close()


def test_the_student_release_readme_passes_axe(browser, axe, tmp_path: Path) -> None:
    from nbconvert.filters.markdown import markdown2html

    chosen = ["01_uniform_averaging.ipynb", "02_queries_and_keys.ipynb"]
    plan = student_release.plan(
        chosen, {chosen[0]}, colab.CourseRepo("teacher/attention-students"), NOTEBOOKS
    )
    body = markdown2html(student_release.readme(plan))
    html = tmp_path / "README.html"
    html.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>README</title>'
        f"</head><body><main>{body}</main></body></html>",
        encoding="utf-8",
    )
    context, page = _open(browser, html)
    try:
        assert _blocking(axe, page) == []
        alts = _alts(page)
        assert len(alts) == len(chosen) and all(a == "Open In Colab" for a in alts), alts
    finally:
        context.close()
