"""Where each file of OUT lives (the grader's output folder)."""

from __future__ import annotations

from pathlib import Path

from autograder.model.contract import ASSIGNMENT


def feedback_path(out: Path, student: str, notebook: str) -> Path:
    """The page a student reads: OUT/feedback/<student>/<notebook stem>.html."""
    return out / "feedback" / student / f"{Path(notebook).stem}.html"


def autograded_path(out: Path, student: str, notebook: str) -> Path:
    """The executed graded notebook in nbgrader's layout, for the formgrader:
    OUT/autograded/<student>/<assignment>/<notebook stem>.ipynb (`notebook`: file name or stem)."""
    return out / "autograded" / student / ASSIGNMENT / f"{Path(notebook).stem}.ipynb"


def state_folder(out: Path) -> Path:
    return out / ".state"


def state_path(out: Path, student: str, notebook: str) -> Path:
    return state_folder(out) / student / f"{notebook}.json"


def log_path(out: Path) -> Path:
    return out / "grader.log"
