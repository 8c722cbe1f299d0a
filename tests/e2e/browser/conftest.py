"""Fixtures of the browser tests: Debian's Chromium through Playwright, and a throwaway lab."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.browser.lab import CHROMIUM, CHROMIUM_ARGS, ROOT, SCREENSHOTS, LabServer, start_lab


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture(scope="session")
def browser() -> Iterator:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/install_browser.sh` (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def lab_course() -> Iterator[Path]:
    """The course directory the lab's formgrader shows: a copy of the project's, in build/
    (inside the lab's root), holding a graded class with script payloads (payload.py)."""
    from tests.e2e.browser.payload import course_with_payload

    folder = course_with_payload(ROOT / "build" / f"lab-course-{os.getpid()}")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory, lab_course: Path) -> Iterator[LabServer]:
    """JupyterLab on the project, as `make lab` serves it; its formgrader shows `lab_course`
    (nbgrader_config.py reads $AUTOGRADER_COURSE_DIR), not the project's .nbgrader/."""
    from autograder.course.formgrade import ENV_COURSE_DIR

    before = os.environ.get(ENV_COURSE_DIR)
    os.environ[ENV_COURSE_DIR] = str(lab_course)
    try:
        server = start_lab(tmp_path_factory.mktemp("lab-home"))
    finally:
        if before is None:
            os.environ.pop(ENV_COURSE_DIR, None)
        else:
            os.environ[ENV_COURSE_DIR] = before
    yield server
    server.stop()
    assert server.process.returncode == 0, f"jupyter lab did not stop cleanly:\n{server.log()}"
