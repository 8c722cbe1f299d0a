"""What grading gives: a `NotebookGrade` per (student, notebook), a `CellGrade` per graded cell.

These are the one shape of a grade: the worker returns them, the state files store them
(state.py), and feedback, report, the CSVs, the gradebook and the tests read them. A
`CellGrade` of an autograded cell carries the judge's `CellResult` (checks, points, named
mistakes, the problem in words); a manually graded cell (a written answer) carries its points
and its state (`waiting` for the instructor, or `unanswered`). The notebook's score is the sum
of its autograded points; its max_score counts every graded cell, manual ones included.
Statuses, cell states and zero-score reasons are the `StrEnum`s of enums.py (re-exported here);
what they mean in words is said by the pages (wording.py), not by these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autograder.checks.base import CellResult, Scorer
from autograder.model.enums import CellState, Reason, Status

STATUSES = tuple(Status)  # in the order the report and the log count them


def round_points(x: float) -> float:
    return round(float(x), 6)


def zero(grade_id: str, points: float, reason: Reason, problem: str) -> CellResult:
    """A zero for a cell whose answer was never judged: the reason, and the problem in words."""
    return Scorer(grade_id).fail_all(
        [("the answer cell runs and defines its names", points)], problem, reason
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
    state: CellState = CellState.GRADED  # waiting, unanswered: manual cells only

    def __post_init__(self) -> None:
        self.state = CellState(self.state)  # ValueError on a state no grader writes

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
            state=CellState(data.get("state", CellState.GRADED)),
        )


@dataclass
class NotebookGrade:
    """The grade of one student's notebook, with why it is what it is."""

    student: str
    notebook: str
    status: Status
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
        self.status = Status(self.status)

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
        waiting = any(c.manual and c.state == CellState.WAITING for c in self.cells)
        return CellState.WAITING if waiting else ""

    @property
    def submitted(self) -> bool:
        return self.status.submitted and not self.synthetic

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
            status=Status(data["status"]),
            detail=str(data.get("detail", "")),
            file=data.get("file"),
            key=str(data.get("key", "")),
            notes=[str(n) for n in data.get("notes", [])],
            cells=[CellGrade.from_json(c) for c in data.get("cells", [])],
            seconds={str(k): float(v) for k, v in data.get("seconds", {}).items()},
            synthetic=bool(data.get("synthetic", False)),
            unjailed=bool(data.get("unjailed", False)),
        )
