"""`make lab`: the instructor's JupyterLab (nbgrader, formgrader, widgets; no news prompt) and
the students' (no nbgrader at all, the same settings), each printing the address to open."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from autograder.course import colab, student_release
from autograder.course.pins import pins as course_pins
from autograder.course.release import LAB_OVERRIDES, LAB_OVERRIDES_FILE
from autograder.model.paths import NOTEBOOKS, ROOT
from tests.e2e.test_hand_grading import NOTIFICATION

BIN = Path(sys.executable).parent


def _listing(*args: str) -> str:
    done = subprocess.run(
        [str(BIN / "jupyter"), *args], capture_output=True, text=True, timeout=120, check=True
    )
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def test_nbgrader_and_widget_manager_labextensions_are_enabled() -> None:
    text = _listing("labextension", "list")
    for name in ("@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager"):
        line = next((ln for ln in text.splitlines() if name in ln), "")
        assert "enabled" in line and "OK" in line, f"{name} missing or disabled:\n{text}"


def test_formgrader_server_extension_is_enabled() -> None:
    text = _listing("server", "extension", "list")
    assert re.search(r"nbgrader\.server_extensions\.formgrader\s+enabled", text), text


# ---- `make lab`: instructor mode, and the students' own tree -----------------------------------

# The instructor's `make lab OUT=...` (its address, no news prompt, formgrader) is started once,
# in tests/e2e/test_hand_grading.py::test_make_lab_formgrader_hand_grading_to_export.


@pytest.fixture(scope="module")
def student_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("student") / "tree"
    repo = colab.CourseRepo("teacher/attention-students")
    student_release.build(["01_uniform_averaging.ipynb"], set(), dest, repo, NOTEBOOKS)
    return dest


def test_student_lab_has_no_nbgrader_and_the_same_settings(student_tree: Path) -> None:
    requirements = (student_tree / "requirements.txt").read_text().lower()
    assert "jupyterlab==" in requirements and "torch==" in requirements
    server = f"jupyterlab_server=={metadata.version('jupyterlab_server')}"
    assert server in requirements.replace("-", "_").splitlines(), "the instructor's settings server"
    course = {pin.lower() for pin in course_pins().values()}
    assert {ln for ln in requirements.splitlines() if "==" in ln} - {server} <= set(course)
    assert "nbgrader" not in requirements, "no formgrader or create-assignment menus for students"
    overrides = json.loads((student_tree / ".course" / "jupyterlab-overrides.json").read_text())
    assert overrides == LAB_OVERRIDES and overrides[NOTIFICATION]["fetchNews"] == "false"
    dry = subprocess.run(
        ["make", "-n", "-B", "lab", "PORT=8765"], cwd=student_tree, capture_output=True, text=True
    )
    assert dry.returncode == 0, dry.stderr
    assert f"share/jupyter/lab/settings/overrides.d/{LAB_OVERRIDES_FILE}" in dry.stdout
    assert "http://127.0.0.1:8765/lab/tree/notebooks?token=$token" in dry.stdout
    assert "jupyter lab" in dry.stdout and "--port=8765" in dry.stdout
    assert "nbgrader" not in dry.stdout and "autograder" not in dry.stdout


def test_instructor_lab_target_documents_port_out_and_jobs() -> None:
    dry = subprocess.run(
        ["make", "-n", "lab", "PORT=8766", "OUT=somewhere"], cwd=ROOT, capture_output=True,
        text=True,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "formgrade somewhere" in dry.stdout and "--port=8766" in dry.stdout
    readme = (ROOT / "README.md").read_text()
    for word in ("PORT", "OUT", "JOBS", "token"):
        assert word in readme, f"the README never mentions {word}"
