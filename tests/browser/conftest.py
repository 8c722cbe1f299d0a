"""Fixtures of the browser tests: Debian's Chromium through Playwright, and a throwaway lab."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.lab import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, LabServer, start_lab


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
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab on the project, as `make lab` serves it: the course directory is filled first."""
    from autograder.release import ensure_course_dir

    ensure_course_dir()  # .nbgrader/ with the assignment, so the formgrader lists it
    server = start_lab(tmp_path_factory.mktemp("lab-home"))
    yield server
    server.stop()
    assert server.process.returncode == 0, f"jupyter lab did not stop cleanly:\n{server.log()}"
