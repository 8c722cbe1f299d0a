"""A notebook as a student meets it: JupyterLab in headless Chromium, Run All, the explorer.

The solution of notebook 03 (set COURSE_BROWSER_NOTEBOOK to a notebook path to aim elsewhere)
is copied to build/browser/, opened in a throwaway JupyterLab, run with Run > Run All Cells,
and checked on the page: every code cell executed, no error or stderr output (JupyterLab
renders tracebacks, stderr streams and warnings alike as application/vnd.jupyter.stderr), the
heatmaps are images, each slider of the widget explorer redraws its plot, and every toggle
label of the explorer is shown whole. The untouched release of the same notebook is run the
same way: Run All reaches the last cell, errors come only from cells tagged to allow them (the
unanswered ones and what uses them), and the explorer says that the answer is missing.
Screenshots go to build/screenshots/. The formgrader page lists the course's assignment.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from autograder.model.contract import ASSIGNMENT
from autograder.model.paths import NOTEBOOKS, ROOT, SOLUTIONS
from tests.e2e.browser.lab import LabServer, stage_notebook

# pytest-timeout: a lab starts and runs notebooks (setup counts)
pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

NOTEBOOK = Path(os.environ.get("COURSE_BROWSER_NOTEBOOK", SOLUTIONS / "03_mask_then_softmax.ipynb"))
RELEASE = NOTEBOOKS / NOTEBOOK.name
STAGE = ROOT / "build" / "browser"
VIEWPORT = {"width": 1280, "height": 900}
RUN_TIMEOUT_MS = 120_000
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"

# True once Run All has finished: the kernel is idle and no cell is queued or running; either
# every code cell has an execution count, or an error stopped the run (checked afterwards).
RUN_FINISHED = """([panelSelector, stderrSelector]) => {
  const panel = document.querySelector(panelSelector);
  if (!panel) return false;
  const status = panel.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea .jp-InputPrompt')]
    .map(p => p.textContent.trim());
  if (status !== 'idle' || prompts.length === 0 || prompts.includes('[*]:')) return false;
  const counted = prompts.every(p => /^\\[\\d+\\]:$/.test(p));
  return counted || panel.querySelector(stderrSelector) !== null;
}"""


@dataclass
class Executed:
    page: object  # playwright.sync_api.Page
    saved: nbformat.NotebookNode
    seconds: float


def _menu(page, menu: str, item: str) -> None:
    page.click(f'.lm-MenuBar-itemLabel:text-is("{menu}")')
    page.click(f'.lm-Menu-itemLabel:text-is("{item}")')


def _wait_for_kernel(page, lab: LabServer, staged: Path, timeout: float = 60) -> None:
    """Until the notebook's kernel is started, idle, and the page shows it as connected."""
    path = staged.relative_to(ROOT).as_posix()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = lab.api("api/sessions")
        states = [
            s["kernel"]["execution_state"]
            for s in (json.loads(body) if status == 200 else [])
            if s.get("path") == path and s.get("kernel")
        ]
        shown = page.locator(f"{PANEL} .jp-Toolbar .jp-KernelName").all_inner_texts()
        if states == ["idle"] and shown and "No Kernel" not in shown[0]:
            return
        page.wait_for_timeout(300)
    raise AssertionError(f"the kernel of {path} did not start: sessions {body[:300]!r}")


def _run_all(browser, lab: LabServer, screenshots: Path, notebook: Path, stage: Path) -> Executed:
    """Open a copy of `notebook` in JupyterLab, Run All, save it; the page stays open."""
    assert notebook.is_file(), f"{notebook} does not exist"
    for stale in stage.glob("*.ipynb"):
        stale.unlink()
    staged = stage_notebook(notebook, stage)
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    start = time.monotonic()
    page.goto(lab.url(f"lab/tree/{staged.relative_to(ROOT).as_posix()}"))
    page.wait_for_selector(f"{PANEL} .jp-Notebook .jp-CodeCell", timeout=60_000)
    _wait_for_kernel(page, lab, staged)
    _menu(page, "Run", "Run All Cells")
    page.wait_for_function(RUN_FINISHED, arg=[PANEL, STDERR], timeout=RUN_TIMEOUT_MS, polling=500)
    seconds = time.monotonic() - start
    _menu(page, "File", "Save Notebook")
    page.get_by_text("Saving completed").wait_for(timeout=30_000)  # the status bar says so
    page.evaluate(  # back to the title: the notebook scrolls inside its windowed panel
        "sel => document.querySelectorAll(sel).forEach(n => { n.scrollTop = 0; })",
        f"{PANEL} .jp-WindowedPanel-outer, {PANEL} .jp-Notebook",
    )
    page.wait_for_timeout(300)
    page.screenshot(path=str(screenshots / f"lab-{stage.name}-{notebook.stem}-top.png"))
    return Executed(page, nbformat.read(str(staged), as_version=4), seconds)


@pytest.fixture(scope="module")
def executed(browser, lab: LabServer, screenshots: Path) -> Iterator[Executed]:
    """The solution notebook opened in JupyterLab and run top to bottom through the Run menu."""
    run = _run_all(browser, lab, screenshots, NOTEBOOK, STAGE)
    yield run
    run.page.context.close()


@pytest.fixture(scope="module")
def released(browser, lab: LabServer, screenshots: Path) -> Iterator[Executed]:
    """The student's notebook, nothing answered yet, run top to bottom the same way."""
    run = _run_all(browser, lab, screenshots, RELEASE, STAGE.parent / "release")
    yield run
    run.page.context.close()


def _code_cells(saved: nbformat.NotebookNode) -> list:
    return [c for c in saved.cells if c.cell_type == "code"]


def test_run_all_executes_every_cell_without_errors(executed: Executed) -> None:
    page = executed.page
    stderr = page.locator(f"{PANEL} {STDERR}")
    shown = [stderr.nth(i).inner_text()[:400] for i in range(stderr.count())]
    assert not shown, "error or stderr output on the page:\n" + "\n---\n".join(shown)
    prompts = page.locator(f"{PANEL} .jp-CodeCell .jp-InputArea .jp-InputPrompt").all_inner_texts()
    assert prompts and all(re.fullmatch(r"\[\d+\]:", p.strip()) for p in prompts), prompts
    # The saved file says the same, independently of how the page renders it.
    cells = _code_cells(executed.saved)
    assert len(cells) == len(prompts)
    assert all(isinstance(c.execution_count, int) for c in cells)
    bad = [o for c in cells for o in c.outputs if o.output_type == "error"]
    bad += [o for c in cells for o in c.outputs if o.get("name") == "stderr"]
    assert not bad, f"error outputs in the saved notebook: {bad}"
    print(f"{NOTEBOOK.name}: opened and ran in {executed.seconds:.1f} s")


def test_heatmaps_are_images_on_the_page(executed: Executed) -> None:
    page = executed.page
    images = page.locator(f"{PANEL} .jp-OutputArea-output.jp-RenderedImage img")
    sizes = images.evaluate_all(  # static outputs only: the widget's own plot is not saved
        "imgs => imgs.filter(i => !i.closest('.jupyter-widgets'))"
        ".map(i => [i.naturalWidth, i.naturalHeight])"
    )
    saved = sum(
        "image/png" in o.get("data", {}) for c in _code_cells(executed.saved) for o in c.outputs
    )
    assert saved >= 1, f"{NOTEBOOK.name} saved no image output"
    assert len(sizes) == saved, f"{len(sizes)} images on the page, {saved} in the saved notebook"
    assert all(w > 100 and h > 100 for w, h in sizes), f"images did not load: {sizes}"


def _widget_cells(page):
    return page.locator(f"{PANEL} .jp-CodeCell").filter(has=page.locator(".widget-slider"))


def _plot_sources(cell) -> list[str]:
    return cell.locator(".widget-output img").evaluate_all("imgs => imgs.map(i => i.src)")


def _wait_for_new_plot(page, cell, before: list[str], what: str) -> list[str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = _plot_sources(cell)
        if now and now != before:
            return now
        page.wait_for_timeout(200)
    raise AssertionError(f"moving {what} did not redraw the plot")


def test_widget_explorer_redraws_when_a_slider_moves(executed: Executed, screenshots: Path) -> None:
    page = executed.page
    cells = _widget_cells(page)
    assert cells.count() >= 1, f"no slider widget rendered in {NOTEBOOK.name}"
    cell = cells.first
    cell.scroll_into_view_if_needed()
    before = _plot_sources(cell)
    assert before, "the explorer shows no plot before anything moves"
    page.screenshot(path=str(screenshots / f"lab-{NOTEBOOK.stem}-widget.png"))
    cell.screenshot(path=str(screenshots / f"lab-{NOTEBOOK.stem}-widget-before.png"))

    handles = cell.locator(".widget-slider .noUi-handle")
    labels = cell.locator(".widget-slider .widget-label").all_inner_texts()
    assert handles.count() >= 1
    for i in range(handles.count()):
        handle = handles.nth(i)
        value = float(handle.get_attribute("aria-valuenow"))
        top = float(handle.get_attribute("aria-valuemax"))
        handle.focus()
        page.keyboard.press("ArrowLeft" if value >= top else "ArrowRight")
        page.wait_for_function(
            "([h, v]) => parseFloat(h.getAttribute('aria-valuenow')) !== v",
            arg=[handle.element_handle(), value],
            timeout=10_000,
        )
        before = _wait_for_new_plot(page, cell, before, f"slider {labels[i]!r}")

    cell.screenshot(path=str(screenshots / f"lab-{NOTEBOOK.stem}-widget-after.png"))
    stderr = cell.locator(STDERR)
    assert stderr.count() == 0, stderr.first.inner_text()


def test_formgrader_lists_the_assignment(browser, lab: LabServer, screenshots: Path) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(lab.url("formgrader"))
        row = page.locator("table tr").filter(has=page.locator(f'a:text-is("{ASSIGNMENT}")'))
        row.first.wait_for(timeout=30_000)
        assert page.title() == "nbgrader formgrade"
        page.screenshot(path=str(screenshots / "formgrader.png"))
        # the formgrader reads the project's nbgrader_config.py: the course directory is ours
        status, body = lab.api("formgrader/api/assignments")
        assert status == 200, body[:500]
        names = [a["name"] for a in json.loads(body)]
        assert ASSIGNMENT in names, names
    finally:
        context.close()


def test_toggle_labels_are_shown_whole(executed: Executed, screenshots: Path) -> None:
    cell = _widget_cells(executed.page).first
    cell.scroll_into_view_if_needed()
    groups = cell.locator(".widget-radio")  # order, axis and fill: named groups of radio buttons
    assert groups.count() >= 3, "the explorer's order, axis and fill choices are missing"
    names = [n.strip() for n in groups.locator(".widget-label").all_inner_texts() if n.strip()]
    assert {"Order of steps", "Softmax axis", "Fill value"} <= set(names), names
    buttons = cell.locator(".widget-radio-box label")
    assert buttons.count() >= 7, "the explorer's order, axis and fill options are missing"
    clipped = buttons.evaluate_all(
        "bs => bs.filter(b => b.scrollWidth > b.clientWidth + 1).map(b => b.textContent.trim())"
    )
    cell.screenshot(path=str(screenshots / f"lab-{NOTEBOOK.stem}-toggles.png"))
    assert not clipped, f"toggle labels cut off at {VIEWPORT['width']} px: {clipped}"


def test_run_all_of_the_release_reaches_the_end(released: Executed) -> None:
    cells = _code_cells(released.saved)
    assert all(isinstance(c.execution_count, int) for c in cells), "Run All stopped early"
    failed = [c for c in cells if any(o.output_type == "error" for o in c.outputs)]
    assert failed, "nothing failed in the untouched release: are the answers stubs?"
    untagged = [
        c.source[:80] for c in failed if "raises-exception" not in c.metadata.get("tags", [])
    ]
    assert not untagged, f"cells that fail and stop Run All: {untagged}"
    names = {o.ename for c in failed for o in c.outputs if o.output_type == "error"}
    assert names <= {"NotImplementedError", "NameError", "NotAnswered"}, names


def test_explorer_of_the_release_says_the_answer_is_missing(
    released: Executed, screenshots: Path
) -> None:
    cells = _widget_cells(released.page)
    assert cells.count() >= 1, "the explorer did not render in the release"
    cell = cells.first
    cell.scroll_into_view_if_needed()
    assert _plot_sources(cell), "the explorer shows no plot while the answer is missing"
    cell.screenshot(path=str(screenshots / f"lab-release-{NOTEBOOK.stem}-explorer.png"))
    saved = _code_cells(released.saved)
    explorer_cell = next(c for c in saved if "explorer(" in c.source)
    assert not any(o.output_type == "error" for o in explorer_cell.outputs)
