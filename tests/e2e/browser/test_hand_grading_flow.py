"""Hand grading as the instructor does it and as the student then reads it, in Chromium.

A copy of the session's graded class (graded_class.py) is shown by formgrader in a JupyterLab
started as `make lab OUT=...` starts it (a throwaway course directory inside the project,
`formgrade.prepare`). Formgrader's first page says in one line where the graded class is,
linked, and hides nbgrader's own generate, release, collect and feedback buttons, which this
course does not use. The instructor follows the link, scores student-wrong's written answer of
02 and writes a comment in formgrader's own page; `python -m autograder refresh OUT` (the
command line) brings them to the student's feedback page, opened from disk with the network
cut off. Screenshots go to build/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autograder.course import formgrade
from autograder.model.contract import ASSIGNMENT
from autograder.model.paths import ROOT
from tests.e2e.browser.graded_class import NB02, WRONG, graded_class
from tests.e2e.browser.lab import LabServer, start_lab

# pytest-timeout: a lab and a graded class start in the first test (setup counts)
pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

WRITTEN = "why-not-T"
COMMENT = "Right: the same C x head_size matrices act on every token."
VIEWPORT = {"width": 1280, "height": 900}
# formgrade.js has fetched the grades and comments and bound its inputs to them
LOADED = """() => typeof formgrader !== 'undefined' && formgrader.grades && formgrader.grades.loaded
    && formgrader.comments && formgrader.comments.loaded"""


@pytest.fixture(scope="module")
def graded_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LabServer, Path]]:
    """JupyterLab whose formgrader shows a copy of the graded class; (server, OUT)."""
    from autograder.course.release import ensure_course_dir

    base = tmp_path_factory.mktemp("hand-grading")
    out = base / "out"
    shutil.copytree(graded_class().out, out, symlinks=True)
    course = ensure_course_dir(ROOT / "build" / f"formgrade-browser-{os.getpid()}")
    formgrade.prepare(out, course)
    before = os.environ.get(formgrade.ENV_COURSE_DIR)
    os.environ[formgrade.ENV_COURSE_DIR] = str(course)  # the server inherits it, as in make lab
    try:
        server = start_lab(base / "home")
    finally:
        if before is None:
            os.environ.pop(formgrade.ENV_COURSE_DIR, None)
        else:
            os.environ[formgrade.ENV_COURSE_DIR] = before
    yield server, out
    server.stop()
    shutil.rmtree(course, ignore_errors=True)


def _api(lab: LabServer, path: str) -> object:
    status, body = lab.api(path)
    assert status == 200, (path, status, body[:300])
    return json.loads(body)


def test_formgrader_opens_on_the_graded_class_and_hides_what_does_not_apply(
    browser, graded_lab: tuple[LabServer, Path], screenshots: Path
) -> None:
    lab, out = graded_lab
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(lab.url("formgrader"))
        where = page.locator("#autograder-where")
        where.wait_for(timeout=30_000)
        page.locator("#main-table td.name").first.wait_for(timeout=30_000)
        page.screenshot(path=str(screenshots / "formgrader-graded-class.png"))
        text = " ".join(where.inner_text().split())
        assert str(out) in text and f"Manual Grading → {ASSIGNMENT}" in text, text
        for hidden in ("release", "collect", "assign", "generate-feedback", "status"):
            cells = page.locator(f"#main-table td.{hidden}")
            assert cells.count() >= 1 and not cells.first.is_visible(), hidden
        headers = [h.inner_text() for h in page.locator("thead th").all() if h.is_visible()]
        assert "Release" not in headers and "Generate" not in headers, headers
        assert page.locator("#main-table td.preview a").first.is_visible()
        page.get_by_role("link", name=f"Manual Grading → {ASSIGNMENT}").click()
        page.wait_for_url(re.compile(rf".*/formgrader/gradebook/{ASSIGNMENT}/?$"))
        page.get_by_role("link", name=NB02[:-6]).wait_for(timeout=30_000)
    finally:
        context.close()


def test_a_score_and_comment_in_formgrader_reach_the_students_page(
    browser, graded_lab: tuple[LabServer, Path], screenshots: Path
) -> None:
    lab, out = graded_lab
    submitted = _api(lab, f"formgrader/api/submitted_notebooks/{ASSIGNMENT}/{NB02[:-6]}")
    submission = next(s["id"] for s in submitted if s["student"] == WRONG)
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(lab.url("formgrader"))  # the login, as the instructor opens formgrader
        page.locator("#main-table td.name").first.wait_for(timeout=30_000)
        page.goto(f"{lab.base}/formgrader/submissions/{submission}/")
        score = page.locator(f"input.score#{WRITTEN}")
        score.wait_for(timeout=30_000)
        page.wait_for_function(LOADED, timeout=30_000)  # formgrader's inputs are bound
        score.fill("1")
        score.press("Tab")
        comment = page.locator(f"textarea#{WRITTEN}-comment")
        comment.fill(COMMENT)
        comment.press("Tab")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            grades = _api(lab, f"formgrader/api/grades?submission_id={submission}")
            comments = _api(lab, f"formgrader/api/comments?submission_id={submission}")
            graded = next(g for g in grades if g["name"] == WRITTEN)
            said = next(c for c in comments if c["name"] == WRITTEN)
            if graded["manual_score"] == 1 and said["manual_comment"] == COMMENT:
                break
            page.wait_for_timeout(300)
        else:
            raise AssertionError(f"formgrader did not save: {graded} {said}")
        page.screenshot(path=str(screenshots / "formgrader-written-answer-scored.png"))
    finally:
        context.close()

    done = subprocess.run(
        [sys.executable, "-m", "autograder", "refresh", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    feedback = out / "feedback" / WRONG / f"{NB02[:-6]}.html"
    blocked: list[str] = []
    context = browser.new_context(viewport=VIEWPORT)
    context.route(re.compile(r"^https?://"), lambda r: (blocked.append(r.request.url), r.abort()))
    try:
        page = context.new_page()
        page.goto(feedback.as_uri(), wait_until="load")
        page.screenshot(path=str(screenshots / "feedback-graded-by-hand.png"))
        row = page.locator("tr.cell").filter(has=page.get_by_text(WRITTEN, exact=True))
        assert row.locator("th").nth(1).inner_text().strip() == "1 / 1"
        assert page.get_by_text("graded by your instructor").first.is_visible()
        assert page.get_by_text(COMMENT).is_visible()
        summary = " ".join(page.inner_text(".grader-summary").split())
        assert "waiting for your instructor" not in summary
        assert not blocked, blocked
    finally:
        context.close()
