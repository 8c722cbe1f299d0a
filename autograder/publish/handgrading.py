"""What the instructor gave by hand in formgrader, read back from OUT/gradebook.db.

Formgrader saves into nbgrader's gradebook: the points of a written answer (or points that
replace an autograded cell's), extra credit, and a comment per answer cell. `read(path)` gives
them per (student, notebook); `Settled` is one notebook's grade with them applied (each cell's
points and state, the comments, the total), which the feedback page, grades.csv, cells.csv and
the report show. The grade itself (the state file) stays as the grader made it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from autograder.model.contract import ASSIGNMENT, test_cell_id
from autograder.model.enums import CellState
from autograder.model.grades import CellGrade, NotebookGrade, round_points

BY_HAND = "by hand"  # cells.csv's state of a cell whose points the instructor gave
WAITING = CellState.WAITING

TEST_PREFIX = test_cell_id("")


@dataclass(frozen=True)
class CellHand:
    """One answer cell as graded by hand."""

    score: float | None = None  # points given by hand (None: the grader's stand)
    extra: float = 0.0  # extra credit
    comment: str = ""  # the instructor's comment


@dataclass(frozen=True)
class Hand:
    """One notebook's hand grading: answer grade_id -> CellHand."""

    cells: Mapping[str, CellHand] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.cells)


NONE = Hand()

_GRADES = """
SELECT sa.student_id, n.name, bc.name, g.manual_score, g.extra_credit
FROM grade g
JOIN submitted_notebook sn ON g.notebook_id = sn.id
JOIN submitted_assignment sa ON sn.assignment_id = sa.id
JOIN assignment a ON sa.assignment_id = a.id
JOIN notebook n ON sn.notebook_id = n.id
JOIN base_cell bc ON g.cell_id = bc.id
WHERE a.name = ? AND (g.manual_score IS NOT NULL OR g.extra_credit IS NOT NULL)
"""
_COMMENTS = """
SELECT sa.student_id, n.name, bc.name, c.manual_comment
FROM comment c
JOIN submitted_notebook sn ON c.notebook_id = sn.id
JOIN submitted_assignment sa ON sn.assignment_id = sa.id
JOIN assignment a ON sa.assignment_id = a.id
JOIN notebook n ON sn.notebook_id = n.id
JOIN base_cell bc ON c.cell_id = bc.id
WHERE a.name = ? AND c.manual_comment IS NOT NULL AND TRIM(c.manual_comment) != ''
"""


def read(path: Path) -> dict[tuple[str, str], Hand]:
    """(student, notebook file) -> its hand grading, from nbgrader's gradebook at `path`."""
    if not path.is_file():
        return {}
    found: dict[tuple[str, str], dict[str, dict[str, object]]] = {}
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            for student, notebook, cell, score, extra in db.execute(_GRADES, (ASSIGNMENT,)):
                gid = cell.removeprefix(TEST_PREFIX)
                entry = found.setdefault((student, f"{notebook}.ipynb"), {}).setdefault(gid, {})
                entry.update(score=score, extra=extra or 0.0)
            for student, notebook, cell, text in db.execute(_COMMENTS, (ASSIGNMENT,)):
                entry = found.setdefault((student, f"{notebook}.ipynb"), {}).setdefault(cell, {})
                entry["comment"] = str(text).strip()
    except sqlite3.Error:
        return {}
    return {
        key: Hand({gid: CellHand(**values) for gid, values in cells.items()})  # type: ignore[arg-type]
        for key, cells in found.items()
    }


# ---- a grade with the hand grading applied ----------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One graded cell as the student and the instructor now see it."""

    cell: CellGrade
    score: float
    state: str  # a CellState, or BY_HAND
    by_hand: bool  # points given (or replaced) by the instructor
    extra: float
    comment: str


@dataclass(frozen=True)
class Settled:
    """A notebook's grade with the instructor's hand grading applied."""

    grade: NotebookGrade
    hand: Hand = NONE

    @cached_property
    def rows(self) -> list[Row]:
        rows = []
        for cell in self.grade.cells:
            hand = self.hand.cells.get(cell.grade_id, CellHand())
            by_hand = hand.score is not None
            score = float(hand.score) if by_hand else cell.score  # type: ignore[arg-type]
            state = BY_HAND if by_hand else cell.state
            rows.append(Row(cell, round_points(score), state, by_hand, hand.extra, hand.comment))
        return rows

    @property
    def score(self) -> float:
        """Autograded points (or those that replace them), hand-given points and extra credit."""
        return round_points(sum(r.score + r.extra for r in self.rows))

    @property
    def waiting(self) -> list[str]:
        """Written answers still waiting for the instructor."""
        return [r.cell.grade_id for r in self.rows if r.cell.manual and r.state == WAITING]

    @property
    def waiting_max(self) -> float:
        return round_points(sum(r.cell.max_score for r in self.rows if r.state == WAITING))

    @property
    def manual_state(self) -> str:
        return CellState.WAITING if self.waiting else ""

    @property
    def by_hand(self) -> bool:
        return any(r.by_hand or r.extra or r.comment for r in self.rows)


def settle(grades: list[NotebookGrade], hands: Mapping[tuple[str, str], Hand]) -> list[Settled]:
    return [Settled(g, hands.get((g.student, g.notebook), NONE)) for g in grades]
