"""The sentences a student reads about a grade: its status in words, and how its answer cells
went. The feedback page and Gradescope's results say them; the grades (grades.py) hold only
data (`Status`, `CellState`, `Reason`), never these sentences.
"""

from __future__ import annotations

from autograder.model.enums import CellState, Reason, Status
from autograder.model.grades import NotebookGrade

STATUS_WORDS = {
    Status.OK: "Your notebook ran to the end{cells}.",
    Status.UNANSWERED: (
        "Every answer cell still holds the empty stub it was handed out with: nothing was "
        "answered yet, so nothing could earn points."
    ),
    Status.TIMEOUT: (
        "Your notebook did not finish in time ({detail}). Each answer cell was still graded "
        "on its own, so the points below are what your answers earned."
    ),
    Status.ERROR: (
        "The Python kernel running your notebook stopped ({detail}). Each answer cell was "
        "still graded on its own, so the points below are what your answers earned."
    ),
    Status.INVALID: (
        "This file could not be read as a notebook ({detail}), so nothing in it could be "
        "graded. Open it in Jupyter, save it again and resubmit the .ipynb file itself."
    ),
    Status.MISSING: "This notebook was not submitted.",
}
STUB = "Not answered yet: the cell still holds the stub it was handed out with."


def status_words(grade: NotebookGrade) -> str:
    """The status in a sentence a student understands."""
    return STATUS_WORDS[grade.status].format(
        detail=grade.detail or "no detail", cells=cells_words(grade)
    )


def _count(n: int, one: str, many: str) -> str:
    return f"1 answer cell {one}" if n == 1 else f"{n} answer cells {many}"


def cells_words(grade: NotebookGrade) -> str:
    """How the answer cells went, when some raised or are not answered yet ("" if none)."""
    reasons = [c.result.reason for c in grade.cells if c.result]
    raised = reasons.count(Reason.RAISED)
    unanswered = reasons.count(Reason.UNANSWERED)
    unanswered += sum(c.manual and c.state == CellState.UNANSWERED for c in grade.cells)
    parts = []
    if raised:
        parts.append(_count(raised, "raised an error", "raised an error"))
    if unanswered:
        parts.append(_count(unanswered, "is not answered yet", "are not answered yet"))
    return f", but {' and '.join(parts)} (see below)" if parts else ""
