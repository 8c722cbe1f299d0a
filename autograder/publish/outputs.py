"""The class's files, from the grades: CSVs, pages of what was not graded, gradebook, report.

grades.csv: `student,notebook,score,max_score,status` (the contract), then `manual_max` (the
points of written answers, counted in max_score and graded by hand), `manual_state`
(`waiting` while a written answer awaits the instructor) and `note` (which file was graded
when the student's folder held several for the notebook, or one under another name). The
score counts the autograded points and what the instructor gave by hand in formgrader so far
(points, replaced points, extra credit). cells.csv: `student,notebook,grade_id,score,
max_score`, then `kind` (auto/manual), `state` (graded, waiting, unanswered, or `by hand`) and
`comment` (the instructor's). diagnoses.csv: `student,notebook,grade_id,mistake`. Every text
cell that a spreadsheet would read as a formula (it starts with = + - @, a tab or a carriage
return) is prefixed with a quote.

The gradebook keeps every notebook graded into OUT, not only this run's: a run with other
`--notebooks` adds the earlier notebooks' trusted grades (their state files) for this run's
students, so that their scores and hand grading stay in formgrader and in the export.

Hand grading flows back: the CSVs, the report and the feedback pages are written with the
gradebook's hand grading (autograder/publish/handgrading.py), by every `grade` run and by `refresh`
(`python -m autograder refresh OUT`, also run by `export`), which rewrites them from OUT alone:
the class record (`OUT/.state/.class-record.json`, authenticated like the states) names the
last run's grades.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from autograder.intake.discover import Choice, Submission
from autograder.model.contract import CONTRACT
from autograder.model.course import Master, load_masters
from autograder.model.enums import CellState, Reason, Status
from autograder.model.grades import CellGrade, NotebookGrade, zero
from autograder.publish import handgrading
from autograder.publish.csvs import neutral
from autograder.publish.feedback import summary_page, with_hand_grading
from autograder.publish.gradebook import write_gradebook
from autograder.publish.handgrading import Hand, Settled
from autograder.publish.outdir import feedback_path, state_folder
from autograder.publish.report import write_report
from autograder.publish.state import StateStore, atomic_write

NOT_GRADED = "the grader could not grade this file (see grader.log)"
PLACEHOLDER_PROBLEMS = {  # the zero of each autograded cell of a notebook no worker graded
    Status.MISSING: (Reason.NOT_SUBMITTED, "not submitted"),
    Status.INVALID: (Reason.UNREADABLE, "the file could not be read"),
}


def placeholder(
    sub: Submission, notebook: str, master: Master, status: Status, detail: str = ""
) -> NotebookGrade:
    """A grade for a notebook that no worker graded: missing, refused or failed."""
    reason, problem = PLACEHOLDER_PROBLEMS.get(status, (Reason.NOT_GRADED, "not graded"))
    cells = [CellGrade.judged(zero(g, p, reason, problem), p, g) for g, p in master.graded.items()]
    cells += [
        CellGrade(g, p, 0.0, None, g, True, CellState.UNANSWERED) for g, p in master.manual.items()
    ]
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
                grade = placeholder(sub, notebook, master, Status.INVALID, sub.invalid[notebook])
            elif notebook in sub.files:
                key = keys.get((sub.student, notebook))
                grade = store.load(sub.student, notebook, key) if key else None
                grade = grade or placeholder(sub, notebook, master, Status.ERROR, NOT_GRADED)
            else:
                grade = placeholder(sub, notebook, master, Status.MISSING)
            grades.append(grade)
    return grades


def _csv(header: list[str], rows: list[list[object]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([[neutral(v) for v in row] for row in rows])
    return buf.getvalue()


def _fmt(x: float) -> str:
    return f"{x:g}"


Choices = dict[tuple[str, str], Choice]


def choices_of(subs: list[Submission]) -> Choices:
    """(student, notebook) -> which of several files was graded, for every student."""
    return {(s.student, nb): c for s in subs for nb, c in s.choices.items()}


def file_note(grade: NotebookGrade, choice: Choice | None) -> str:
    """grades.csv's note: the file graded when there were several, or one named otherwise."""
    if choice is not None:
        return choice.line()
    if grade.file and Path(grade.file).name != grade.notebook:
        return f"graded {grade.file}"
    return ""


def write_csvs(out: Path, settled: list[Settled], choices: Choices | None = None) -> None:
    choices = choices or {}
    rows, cells, diagnoses = [], [], []
    for s in settled:
        g = s.grade
        note = file_note(g, choices.get((g.student, g.notebook)))
        rows.append(
            [g.student, g.notebook, _fmt(s.score), _fmt(g.max_score), g.status]
            + [_fmt(g.manual_max), s.manual_state, note]
        )
        for r in s.rows:
            c = r.cell
            kind = "manual" if c.manual else "auto"
            cells.append(
                [g.student, g.notebook, c.grade_id, _fmt(r.score + r.extra), _fmt(c.max_score)]
                + [kind, r.state, r.comment]
            )
            diagnoses += [[g.student, g.notebook, c.grade_id, m] for m in c.mistakes]
    head = ["student", "notebook", "score", "max_score", "status", "manual_max", "manual_state"]
    atomic_write(out / "grades.csv", _csv([*head, "note"], rows))
    head = ["student", "notebook", "grade_id", "score", "max_score", "kind", "state", "comment"]
    atomic_write(out / "cells.csv", _csv(head, cells))
    head = ["student", "notebook", "grade_id", "mistake"]
    atomic_write(out / "diagnoses.csv", _csv(head, diagnoses))


def write_outputs(
    out: Path,
    grades: list[NotebookGrade],
    masters: dict[str, Master],
    unjailed: bool = False,
    choices: Choices | None = None,
    notices: list[str] | None = None,
) -> None:
    """Everything OUT holds for the class, written after the notebooks are graded; `notices`
    are what the report's banner must say of how this run's jails were bounded."""
    earlier, others = earlier_notebooks(out, grades, masters)
    both = {**masters, **earlier}
    everything = {nb: both[nb] for nb in CONTRACT if nb in both}
    write_gradebook(out / "gradebook.db", everything, grades + others)
    record = Record(list(masters), unjailed, grades, choices or {}, notices=list(notices or []))
    previous = load_record(out)
    if previous is not None:  # pages of notebooks this run does not grade are refreshed too
        ours = {(g.student, g.notebook) for g in grades}
        record.others = [g for g in previous.all if (g.student, g.notebook) not in ours]
        record.hand_pages = previous.hand_pages - ours
    write_class_files(out, record, masters, rewrite_synthetic=True)


def write_class_files(
    out: Path, record: Record, masters: dict[str, Master], rewrite_synthetic: bool = False
) -> Counts:
    """The CSVs, the report and the feedback pages, with the gradebook's hand grading; the
    record last."""
    hands = handgrading.read(out / "gradebook.db")
    settled = handgrading.settle(record.grades, hands)
    write_csvs(out, settled, record.choices)
    write_report(out, settled, masters, record.unjailed, record.choices, record.notices)
    counts = Counts(waiting=sum(len(s.waiting) for s in settled))
    hand_pages: set[tuple[str, str]] = set()
    for grade in record.all:
        key = (grade.student, grade.notebook)
        hand = hands.get(key, handgrading.NONE)
        path = feedback_path(out, grade.student, grade.notebook)
        if grade.synthetic:
            if rewrite_synthetic or hand or key in record.hand_pages:
                atomic_write(path, summary_page(grade, hand))
        elif (hand or key in record.hand_pages) and _refresh_page(path, grade, hand):
            counts.pages += 1
        if hand:
            hand_pages.add(key)
            counts.by_hand += 1
    record.hand_pages = hand_pages
    save_record(out, record)
    return counts


def _refresh_page(path: Path, grade: NotebookGrade, hand: Hand) -> bool:
    """Render the summary of an existing page again; True when the page changed."""
    try:
        html = path.read_text(encoding="utf-8")
    except OSError:
        return False
    new = with_hand_grading(html, grade, hand)
    if new is None or new == html:
        return False
    atomic_write(path, new)
    return True


# ---- the class record: what `refresh` rewrites, from OUT alone --------------------------------


@dataclass
class Counts:
    pages: int = 0  # feedback pages whose summary changed
    by_hand: int = 0  # notebooks with hand grading
    waiting: int = 0  # written answers still waiting


@dataclass
class Record:
    """The last run's notebooks and grades (and, for the pages, earlier notebooks' grades)."""

    notebooks: list[str]
    unjailed: bool
    grades: list[NotebookGrade]
    choices: Choices
    others: list[NotebookGrade] | None = None  # graded into OUT by earlier runs
    hand_pages: set[tuple[str, str]] | None = None  # pages that show hand grading
    notices: list[str] | None = None  # the report's banner: jails without a memory bound

    def __post_init__(self) -> None:
        self.others = self.others or []
        self.hand_pages = self.hand_pages or set()
        self.notices = self.notices or []

    @property
    def all(self) -> list[NotebookGrade]:
        return self.grades + (self.others or [])


def record_path(out: Path) -> Path:
    return state_folder(out) / ".class-record.json"


def save_record(out: Path, record: Record) -> None:
    def row(g: NotebookGrade) -> dict[str, object]:
        if g.synthetic:
            return {"grade": g.to_json()}
        return {"student": g.student, "notebook": g.notebook, "key": g.key}

    data = {
        "notebooks": record.notebooks,
        "unjailed": record.unjailed,
        "rows": [row(g) for g in record.grades],
        "others": [row(g) for g in record.others or []],
        "choices": [[s, nb, c.graded, list(c.left_out)] for (s, nb), c in record.choices.items()],
        "hand_pages": sorted(record.hand_pages or ()),
        "notices": list(record.notices or []),
    }
    store = StateStore(out)
    blob = json.dumps({"record": data, "mac": store.mac(data)}, allow_nan=False)
    atomic_write(record_path(out), blob, 0o600)


def load_record(out: Path) -> Record | None:
    """The last run's record, its grades from the trusted states; None when there is none or
    it is not trusted (the states' key did not make it)."""
    try:
        doc = json.loads(record_path(out).read_text(encoding="utf-8"))
        data, mac = doc["record"], doc["mac"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    store = StateStore(out)
    if not isinstance(mac, str) or mac != store.mac(data):
        return None
    try:
        grades = [g for r in data["rows"] if (g := _row(store, r)) is not None]
        others = [g for r in data.get("others", []) if (g := _row(store, r)) is not None]
        choices = {(s, nb): Choice(graded, tuple(left)) for s, nb, graded, left in data["choices"]}
        hand_pages = {(s, nb) for s, nb in data.get("hand_pages", [])}
        notices = [str(line) for line in data.get("notices", [])]
        return Record(list(data["notebooks"]), bool(data["unjailed"]), grades, choices, others,
                      hand_pages, notices)  # fmt: skip
    except (ValueError, KeyError, TypeError):
        return None


def _row(store: StateStore, row: dict) -> NotebookGrade | None:
    if "grade" in row:
        return NotebookGrade.from_json(row["grade"])
    return store.load(str(row["student"]), str(row["notebook"]), str(row["key"]))


class NotGraded(Exception):
    """OUT holds no class a `grade` run recorded."""


def refresh(out: Path) -> Counts:
    """grades.csv, cells.csv, the report and every feedback page again, with the hand grading
    formgrader saved in OUT/gradebook.db since."""
    record = load_record(out)
    if record is None:
        raise NotGraded(
            f"{out} holds no class graded by this grader (run `python -m autograder grade`)"
        )
    masters = load_masters(notebooks=tuple(record.notebooks))
    return write_class_files(out, record, masters)


def earlier_notebooks(
    out: Path, grades: list[NotebookGrade], masters: dict[str, Master]
) -> tuple[dict[str, Master], list[NotebookGrade]]:
    """Notebooks an earlier run graded into OUT and this one does not: their masters, and a
    grade per student of this run (the trusted state, else a `missing` placeholder)."""
    students = sorted({g.student for g in grades})
    folder = state_folder(out)
    names = {p.name.removesuffix(".json") for s in students for p in (folder / s).glob("*.json")}
    others = tuple(nb for nb in CONTRACT if nb in names and nb not in masters)
    earlier = load_masters(notebooks=others) if others else {}
    store = StateStore(out)
    found: list[NotebookGrade] = []
    for notebook in earlier:
        for student in students:
            grade = store.load(student, notebook)
            found.append(grade or NotebookGrade(student, notebook, Status.MISSING, synthetic=True))
    return earlier, found
