"""What grading gives: a `NotebookGrade` per (student, notebook), a `CellGrade` per graded cell.

These are the one shape of a grade: the worker returns them, the state files store them
(state.py), and feedback, report, the CSVs, the gradebook and the tests read them. A
`CellGrade` of an autograded cell carries the judge's `CellResult` (checks, points, named
mistakes, the problem in words); a manually graded cell (a written answer) carries its points
and its state (`waiting` for the instructor, or `unanswered`). The notebook's score is the sum
of its autograded points; its max_score counts every graded cell, manual ones included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autograder.checks.base import CellResult, Scorer

STATUSES = ("ok", "missing", "unanswered", "invalid", "timeout", "error")
MANUAL_STATES = ("waiting", "unanswered")

STATUS_WORDS = {
    "ok": "Your notebook ran to the end{cells}.",
    "unanswered": (
        "Every answer cell still holds the empty stub it was handed out with: nothing was "
        "answered yet, so nothing could earn points."
    ),
    "timeout": (
        "Your notebook did not finish in time ({detail}). Each answer cell was still graded "
        "on its own, so the points below are what your answers earned."
    ),
    "error": (
        "The Python kernel running your notebook stopped ({detail}). Each answer cell was "
        "still graded on its own, so the points below are what your answers earned."
    ),
    "invalid": (
        "This file could not be read as a notebook ({detail}), so nothing in it could be "
        "graded. Open it in Jupyter, save it again and resubmit the .ipynb file itself."
    ),
    "missing": "This notebook was not submitted.",
}


RAISED = "the answer cell raised"  # the start of a problem: the cell ran and raised (checks/)
NOT_ANSWERED = "not answered yet"  # the start of a problem: the cell still holds its stub


def _count(n: int, one: str, many: str) -> str:
    return f"1 answer cell {one}" if n == 1 else f"{n} answer cells {many}"


def round_points(x: float) -> float:
    return round(float(x), 6)


def zero(grade_id: str, points: float, problem: str) -> CellResult:
    """A zero for a cell whose answer was never judged, with the reason in words."""
    return Scorer(grade_id).fail_all(
        [("the answer cell runs and defines its names", points)], problem
    )


@dataclass
class CellGrade:
    """The points of one graded cell."""

    grade_id: str
    max_score: float
    score: float = 0.0
    result: CellResult | None = None  # autograded cells only
    anchor: str = ""  # the cell's id in the graded notebook (a link target on the page)
    manual: bool = False
    state: str = "graded"  # graded | waiting | unanswered (the last two: manual cells)

    @property
    def mistakes(self) -> list[str]:
        return list(self.result.mistakes) if self.result else []

    @property
    def passed(self) -> bool:
        return not self.manual and self.score >= self.max_score

    @classmethod
    def judged(cls, result: CellResult, points: float, anchor: str = "") -> CellGrade:
        score = max(0.0, min(result.score, points))
        return cls(result.grade_id, round_points(points), round_points(score), result, anchor)

    def to_json(self) -> dict[str, Any]:
        return {
            "grade_id": self.grade_id,
            "score": self.score,
            "max_score": self.max_score,
            "anchor": self.anchor,
            "manual": self.manual,
            "state": self.state,
            "result": self.result.to_dict() if self.result else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellGrade:
        result = data.get("result")
        return cls(
            grade_id=str(data["grade_id"]),
            max_score=float(data["max_score"]),
            score=float(data["score"]),
            result=CellResult.from_dict(result) if result else None,
            anchor=str(data.get("anchor", "")),
            manual=bool(data.get("manual", False)),
            state=str(data.get("state", "graded")),
        )


@dataclass
class NotebookGrade:
    """The grade of one student's notebook, with why it is what it is."""

    student: str
    notebook: str
    status: str
    detail: str = ""
    file: str | None = None  # the graded file, relative to the student's folder
    key: str = ""  # digest of the submission, the master and the grading code
    notes: list[str] = field(default_factory=list)
    cells: list[CellGrade] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # where the time went
    synthetic: bool = False  # made up by the class outputs: nothing was graded
    unjailed: bool = False  # student code ran without the jail (--no-jail)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    @property
    def score(self) -> float:
        return round_points(sum(c.score for c in self.cells if not c.manual))

    @property
    def max_score(self) -> float:
        return round_points(sum(c.max_score for c in self.cells))

    @property
    def manual_max(self) -> float:
        return round_points(sum(c.max_score for c in self.cells if c.manual))

    @property
    def manual_state(self) -> str:
        """`waiting` when a written answer awaits hand grading, else "" (none pending)."""
        return "waiting" if any(c.manual and c.state == "waiting" for c in self.cells) else ""

    @property
    def submitted(self) -> bool:
        return self.status not in ("missing", "invalid") and not self.synthetic

    def words(self) -> str:
        """The status in a sentence a student understands."""
        return STATUS_WORDS[self.status].format(
            detail=self.detail or "no detail", cells=self._cells_words()
        )

    def _cells_words(self) -> str:
        """How the answer cells went, when some raised or are not answered yet ("" if none)."""
        problems = [c.result.problem for c in self.cells if c.result and c.result.problem]
        raised = sum(p.startswith(RAISED) for p in problems)
        unanswered = sum(p.startswith(NOT_ANSWERED) for p in problems)
        unanswered += sum(c.manual and c.state == "unanswered" for c in self.cells)
        parts = []
        if raised:
            parts.append(_count(raised, "raised an error", "raised an error"))
        if unanswered:
            parts.append(_count(unanswered, "is not answered yet", "are not answered yet"))
        return f", but {' and '.join(parts)} (see below)" if parts else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "student": self.student,
            "notebook": self.notebook,
            "status": self.status,
            "detail": self.detail,
            "file": self.file,
            "key": self.key,
            "notes": list(self.notes),
            "cells": [c.to_json() for c in self.cells],
            "seconds": dict(self.seconds),
            "synthetic": self.synthetic,
            "unjailed": self.unjailed,
            "score": self.score,
            "max_score": self.max_score,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NotebookGrade:
        """The grade written by `to_json`; ValueError/KeyError/TypeError on anything else."""
        return cls(
            student=str(data["student"]),
            notebook=str(data["notebook"]),
            status=str(data["status"]),
            detail=str(data.get("detail", "")),
            file=data.get("file"),
            key=str(data.get("key", "")),
            notes=[str(n) for n in data.get("notes", [])],
            cells=[CellGrade.from_json(c) for c in data.get("cells", [])],
            seconds={str(k): float(v) for k, v in data.get("seconds", {}).items()},
            synthetic=bool(data.get("synthetic", False)),
            unjailed=bool(data.get("unjailed", False)),
        )
