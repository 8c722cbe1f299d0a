"""The class's files, from the grades: CSVs, pages of what was not graded, gradebook, report.

grades.csv: `student,notebook,score,max_score,status` (the contract), then `manual_max` (the
points of written answers, counted in max_score and graded by hand) and `manual_state`
(`waiting` while a written answer awaits the instructor). cells.csv: `student,notebook,
grade_id,score,max_score`, then `kind` (auto/manual) and `state`. diagnoses.csv: `student,
notebook,grade_id,mistake`. Every text cell that a spreadsheet would read as a formula (it
starts with = + - @, a tab or a carriage return) is prefixed with a quote.

The gradebook keeps every notebook graded into OUT, not only this run's: a run with other
`--notebooks` adds the earlier notebooks' trusted grades (their state files) for this run's
students, so that their scores and hand grading stay in formgrader and in the export.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from autograder.contract import CONTRACT
from autograder.discover import Master, Submission, load_masters
from autograder.feedback import summary_page
from autograder.gradebook import write_gradebook
from autograder.grades import CellGrade, NotebookGrade, zero
from autograder.outdir import feedback_path, state_folder
from autograder.report import write_report
from autograder.state import StateStore, atomic_write

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NOT_GRADED = "the grader could not grade this file (see grader.log)"


def placeholder(
    sub: Submission, notebook: str, master: Master, status: str, detail: str = ""
) -> NotebookGrade:
    """A grade for a notebook that no worker graded: missing, refused or failed."""
    problem = {"missing": "not submitted", "invalid": "the file could not be read"}
    cells = [
        CellGrade.judged(zero(g, p, problem.get(status, "not graded")), p, g)
        for g, p in master.graded.items()
    ]
    cells += [CellGrade(g, p, 0.0, None, g, True, "unanswered") for g, p in master.manual.items()]
    path = sub.files.get(notebook)
    return NotebookGrade(
        sub.student,
        notebook,
        status,
        detail,
        file=str(path.relative_to(sub.folder)) if path else None,
        notes=list(sub.notes.get(notebook, [])),
        cells=cells,
        synthetic=True,
    )


def collect(
    subs: list[Submission],
    masters: dict[str, Master],
    store: StateStore,
    keys: dict[tuple[str, str], str],
) -> list[NotebookGrade]:
    """One grade per student and course notebook, from the trusted states."""
    grades = []
    for sub in subs:
        for notebook, master in masters.items():
            if notebook in sub.invalid:
                grade = placeholder(sub, notebook, master, "invalid", sub.invalid[notebook])
            elif notebook in sub.files:
                key = keys.get((sub.student, notebook))
                grade = store.load(sub.student, notebook, key) if key else None
                grade = grade or placeholder(sub, notebook, master, "error", NOT_GRADED)
            else:
                grade = placeholder(sub, notebook, master, "missing")
            grades.append(grade)
    return grades


def neutral(value: object) -> str:
    """A CSV cell a spreadsheet shows as text, never runs as a formula."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _csv(header: list[str], rows: list[list[object]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([[neutral(v) for v in row] for row in rows])
    return buf.getvalue()


def _fmt(x: float) -> str:
    return f"{x:g}"


def write_csvs(out: Path, grades: list[NotebookGrade]) -> None:
    rows, cells, diagnoses = [], [], []
    for g in grades:
        rows.append(
            [g.student, g.notebook, _fmt(g.score), _fmt(g.max_score), g.status]
            + [_fmt(g.manual_max), g.manual_state]
        )
        for c in g.cells:
            kind = "manual" if c.manual else "auto"
            cells.append(
                [g.student, g.notebook, c.grade_id, _fmt(c.score), _fmt(c.max_score), kind, c.state]
            )
            diagnoses += [[g.student, g.notebook, c.grade_id, m] for m in c.mistakes]
    head = ["student", "notebook", "score", "max_score", "status", "manual_max", "manual_state"]
    atomic_write(out / "grades.csv", _csv(head, rows))
    head = ["student", "notebook", "grade_id", "score", "max_score", "kind", "state"]
    atomic_write(out / "cells.csv", _csv(head, cells))
    head = ["student", "notebook", "grade_id", "mistake"]
    atomic_write(out / "diagnoses.csv", _csv(head, diagnoses))


def write_outputs(
    out: Path, grades: list[NotebookGrade], masters: dict[str, Master], unjailed: bool = False
) -> None:
    """Everything OUT holds for the class, written after the notebooks are graded."""
    for grade in grades:
        if grade.synthetic:  # graded notebooks got their page from the worker
            atomic_write(feedback_path(out, grade.student, grade.notebook), summary_page(grade))
    write_csvs(out, grades)
    earlier, rows = earlier_notebooks(out, grades, masters)
    both = {**masters, **earlier}
    everything = {nb: both[nb] for nb in CONTRACT if nb in both}
    write_gradebook(out / "gradebook.db", everything, [g.to_json() for g in grades] + rows)
    write_report(out, grades, masters, unjailed)


def earlier_notebooks(
    out: Path, grades: list[NotebookGrade], masters: dict[str, Master]
) -> tuple[dict[str, Master], list[dict[str, object]]]:
    """Notebooks an earlier run graded into OUT and this one does not: their masters, and a
    row per student of this run (the trusted state, else `missing`)."""
    students = sorted({g.student for g in grades})
    folder = state_folder(out)
    names = {p.name.removesuffix(".json") for s in students for p in (folder / s).glob("*.json")}
    others = tuple(nb for nb in CONTRACT if nb in names and nb not in masters)
    earlier = load_masters(notebooks=others) if others else {}
    store = StateStore(out)
    rows: list[dict[str, object]] = []
    for notebook in earlier:
        for student in students:
            grade = store.load(student, notebook)
            rows.append(
                grade.to_json()
                if grade
                else {"student": student, "notebook": notebook, "status": "missing", "cells": []}
            )
    return earlier, rows
