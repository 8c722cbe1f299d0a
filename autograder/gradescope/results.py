"""A submission's grades as Gradescope's `results.json` (see schema.py for the format).

One test per graded cell of each notebook, named `<notebook> · <grade_id>`: an autograded
cell carries its score, its maximum, passed or failed, and in `output` what the feedback page
says of it (each check passed or failed, the problem in words, each likely mistake in the
catalog's words); never a hidden test, a solution or an expected value the page does not show.
A written answer is a test with `max_score` and no `score`, for Gradescope's manual grading
(one still holding its stub scores 0 and waits for nothing, as in `grade`). The top-level
`score` is the autograded points, as `grades.csv` counts them; the top-level `output` says each
notebook's status in the words of the feedback page, and how student code was isolated.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.catalog import describe
from autograder.model.enums import CellState, Reason
from autograder.model.grades import CellGrade, NotebookGrade
from autograder.publish.wording import STUB, status_words


def _fmt(x: float) -> str:
    return f"{x:g}"


def cell_output(cell: CellGrade) -> str:
    """What the feedback page's table says of one graded cell, as plain text."""
    if cell.manual:
        if cell.state == CellState.WAITING:
            return "A written answer: your instructor grades it by hand."
        return "Not answered yet: a written answer that still holds its stub (0 points)."
    lines = [f"{_fmt(cell.score)} / {_fmt(cell.max_score)} points"]
    result = cell.result
    if result is None:
        return lines[0]
    if result.problem:
        if result.reason == Reason.UNANSWERED:
            lines.append(STUB)
        else:
            lines.append(f"Could not grade the answer: {result.problem}")
    else:
        for check in result.checks:
            mark = "passed" if check.passed else "failed"
            lines.append(f"{mark} · {check.name} ({_fmt(check.earned)} / {_fmt(check.points)})")
            if check.detail and not check.passed:
                lines.append(f"    {check.detail}")
    for mistake in result.mistakes:
        lines.append(f"Likely mistake ({mistake}): {describe(mistake, cell.grade_id)}")
    return "\n".join(lines)


def test_entry(grade: NotebookGrade, cell: CellGrade, number: str, visibility: str) -> dict:
    """The Gradescope test of one graded cell."""
    test: dict[str, Any] = {
        "name": f"{grade.notebook.removesuffix('.ipynb')} · {cell.grade_id}",
        "number": number,
        "max_score": cell.max_score,
        "output": cell_output(cell),
        "visibility": visibility,
    }
    if cell.manual:
        test["tags"] = ["written answer", "graded by hand"]
        if cell.state != CellState.WAITING:
            test["score"] = 0.0
    else:
        test["score"] = cell.score
        test["status"] = "passed" if cell.passed else "failed"
    return test


def notebook_output(grade: NotebookGrade) -> str:
    """A notebook's status, score and notes, as the first screen of its feedback page."""
    auto_max = grade.max_score - grade.manual_max
    lines = [
        f"{grade.notebook}: {_fmt(grade.score)} / {_fmt(auto_max)} autograded points "
        f"(status {grade.status}). {status_words(grade)}"
    ]
    if grade.manual_state == CellState.WAITING:
        points = (
            "1 more point is"
            if grade.manual_max == 1
            else f"{_fmt(grade.manual_max)} more points are"
        )
        lines.append(f"{points} for written answers, graded by hand by your instructor.")
    lines += [f"  - {note}" for note in grade.notes]
    return "\n".join(lines)


def results(
    grades: list[NotebookGrade],
    seconds: float,
    isolation: str,
    visibility: str = "visible",
) -> dict[str, Any]:
    """results.json for one submission: `grades` in course order, `isolation` in words."""
    tests = []
    for grade in grades:
        for i, cell in enumerate(grade.cells, start=1):
            tests.append(test_entry(grade, cell, f"{grade.notebook[:2]}.{i}", visibility))
    output = "\n\n".join([*(notebook_output(g) for g in grades), isolation])
    return {
        "score": round(sum(g.score for g in grades), 6),
        "execution_time": round(seconds, 1),
        "output": output,
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "stdout_visibility": "hidden",
        "extra_data": {
            "notebooks": {
                g.notebook: {
                    "status": g.status,
                    "score": g.score,
                    "max_score": g.max_score,
                    "manual_max": g.manual_max,
                }
                for g in grades
            },
        },
        "tests": tests,
    }


def failure(why: str, seconds: float) -> dict[str, Any]:
    """results.json when the grader itself failed: a zero that says it is not a grade."""
    return {
        "score": 0.0,
        "execution_time": round(seconds, 1),
        "output": (
            f"The autograder could not grade this submission ({why}). The 0 shown is not your "
            "grade: your instructor sees the details and will grade it again."
        ),
        "output_format": "text",
        "stdout_visibility": "hidden",
        "extra_data": {"failed": why},
        "tests": [],
    }
