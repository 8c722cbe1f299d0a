"""A submission carrying script payloads, opened in formgrader (the instructor's `make lab`).

Formgrader renders a submission on the Jupyter server's own origin, in the instructor's
logged-in session. The lab's course directory (conftest.py, payload.py) holds notebook 01 of
two students with the same payloads in their outputs: `RAW` as student code left them,
`INERT` as the grader writes OUT/autograded. Playwright listens for dialogs (the payloads call
alert) and console messages. The raw one runs a script (else these listeners could not tell);
the grader's runs none, and its image still shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.browser.lab import LabServer
from tests.e2e.browser.payload import INERT, MARK, RAW, submission_id

# pytest-timeout: a lab and a graded class start in the first test (setup counts)
pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


def open_in_formgrader(browser, lab: LabServer, course: Path, student: str, shots: Path):
    """The formgrader page of `student`'s notebook 01: (dialogs, console lines, image sizes)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    dialogs: list[str] = []
    console: list[str] = []
    try:
        page = context.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: console.append(m.text))
        page.goto(lab.url(f"formgrader/submissions/{submission_id(course, student)}/"))
        page.get_by_text("bold html").first.wait_for(timeout=30_000)
        page.wait_for_load_state("load")
        page.wait_for_timeout(1000)  # handlers of images that fail to load have run by now
        sizes = page.locator("img").evaluate_all(
            "imgs => imgs.map(i => [i.naturalWidth, i.naturalHeight, i.src.slice(0, 22)])"
        )
        page.screenshot(path=str(shots / f"formgrader-{student}.png"), full_page=True)
        return dialogs, console, sizes
    finally:
        context.close()


def test_the_raw_payload_runs_a_script_in_formgrader(browser, lab, lab_course, screenshots):
    """The control: what the grader would show without sanitising its notebooks."""
    dialogs, _, _ = open_in_formgrader(browser, lab, lab_course, RAW, screenshots)
    assert MARK in dialogs, "the raw payload ran no script: the listeners see nothing"


def test_the_graders_notebook_runs_nothing_and_still_shows_the_image(
    browser, lab, lab_course, screenshots
):
    dialogs, console, sizes = open_in_formgrader(browser, lab, lab_course, INERT, screenshots)
    assert dialogs == [], dialogs
    assert not [line for line in console if MARK in line], console
    shown = [(w, h) for w, h, src in sizes if src.startswith("data:image/png;base64")]
    assert (40, 40) in shown, sizes  # the real image, at its own size
