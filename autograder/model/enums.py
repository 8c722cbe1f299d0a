"""The grade's vocabulary: a notebook's `Status`, a graded cell's `CellState`, and the `Reason`
an autograded cell scored zero without being judged.

Each is a `StrEnum`: its members are the very strings the state files, the CSVs, the gradebook
and the export have always held, so a file written before these types existed reads the same
and every output keeps its bytes. These are data only; the sentences that tell a student what
they mean live with the pages (feedback.py). This module imports nothing of the grader, so the
checks (`CellResult`) and the grades (`NotebookGrade`, `CellGrade`) can both use it.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """How grading one student's notebook went (grades.csv's `status`)."""

    OK = "ok"  # the notebook ran to the end in the kernel
    MISSING = "missing"  # not submitted
    UNANSWERED = "unanswered"  # every answer cell still holds its release stub
    INVALID = "invalid"  # the file could not be read as a notebook
    TIMEOUT = "timeout"  # the kernel ran past a time limit
    ERROR = "error"  # the kernel stopped, or the grader could not grade the file

    @property
    def submitted(self) -> bool:
        """False for a notebook with no answers to read (missing, unreadable)."""
        return self not in (Status.MISSING, Status.INVALID)


class CellState(StrEnum):
    """Where a graded cell stands (cells.csv's `state`, beside `by hand`)."""

    GRADED = "graded"  # the grader scored it (every autograded cell)
    WAITING = "waiting"  # a written answer waiting for the instructor
    UNANSWERED = "unanswered"  # a written answer still holding its stub, or never handed in


class Reason(StrEnum):
    """Why an autograded cell scored zero without its checks judging an answer."""

    RAISED = "raised"  # the answer cell (or the code it calls) raised
    UNANSWERED = "unanswered"  # the cell still holds the stub it was handed out with
    MISSING = "missing"  # the answer cell is not in the notebook
    UNDEFINED = "undefined"  # the cell ran but its graded names are not defined
    IMPORTED = "imported"  # a graded name is imported, not written in the cell
    OUT_OF_TIME = "out-of-time"  # the notebook's budget ran out before the cell was graded
    STOPPED = "stopped"  # the probe's jail was stopped (hung, killed, too much output, ...)
    GRADER_ERROR = "grader-error"  # the checks failed, or none are registered (a course bug)
    NOT_SUBMITTED = "not-submitted"  # a placeholder: the notebook was not handed in
    UNREADABLE = "unreadable"  # the file could not be read as a notebook
    NOT_GRADED = "not-graded"  # a placeholder: no worker graded the file
