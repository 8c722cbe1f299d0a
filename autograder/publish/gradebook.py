"""The class's nbgrader gradebook (OUT/gradebook.db): autograded scores and hand grading.

The grading process alone writes it, at the end of every run, from the per-notebook grades
(`NotebookGrade`s: student, notebook, status, cells with grade_id and score): built in memory,
saved to a temporary file, renamed into place. What formgrader needs is all there:
- the assignment, its notebooks and cells, from the masters' nbgrader metadata;
- a submission per student who handed in anything;
- autograded cells (the `test-<grade_id>` cells the grader scores) with their trusted score;
- every other graded cell (a written answer) waiting for a manual grade, unless the student
  left the release stub in it, handed nothing in, or the grader marked it `unanswered` (an
  unanswered notebook, one it could not grade): then 0, as nbgrader does, nothing to grade.
Manual scores, extra credit and comments already entered in formgrader survive a rebuild for
every answer whose text is unchanged (its sha256 is kept in the table `autograder_answers`;
points replacing an autograded cell's follow the code answer that cell grades);
each notebook's status is kept in `autograder_status` (for the export).
The executed notebooks formgrader shows are OUT/autograded/<student>/<assignment>/<nb>.ipynb.

nbgrader's `Gradebook` runs `alembic heads` in a subprocess to check its schema; `nbgrader_api`
reads the same revision in-process instead, for the time a gradebook is open and no longer.
This code writes nbgrader's tables through its API and reads them with SQL of its own (here,
handgrading.py, export.py): `NBGRADER_SCHEMA` is the schema revision it was written for.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import warnings
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from autograder.model.contract import ASSIGNMENT, COURSE_ID, test_cell_id
from autograder.model.enums import CellState, Status
from autograder.model.grades import NotebookGrade
from autograder.model.notebook_io import answer_cells, grade_id, nbgrader_meta, source
from autograder.publish.outdir import autograded_path

TEXT_STUB = "YOUR ANSWER HERE"  # nbgrader_settings: ClearSolutions.text_stub
# The schema revision of nbgrader's gradebook (its alembic head) that this code was written
# for: nbgrader 0.9.6's "added course table and relationships". When an nbgrader upgrade
# changes it, a test fails (tests/e2e/test_hand_grading.py): read the new migrations under
# nbgrader/alembic/versions, check the tables and columns this module fills through nbgrader's
# API and the SQL that reads them back (handgrading.py, export.py, `previous_hand_grading`),
# then set this to the new head.
NBGRADER_SCHEMA = "e43177bfe90b"


def manual_cells(master_nb: Any) -> dict[str, float]:
    """grade_id -> points of each graded cell the grader does not score (graded by hand)."""
    gids = {grade_id(c) for c in master_nb.cells}
    return {
        gid: float(meta.get("points", 0))
        for c in master_nb.cells
        if (meta := nbgrader_meta(c)).get("grade") and (gid := grade_id(c))
        and not (gid.startswith("test-") and gid.removeprefix("test-") in gids)
    }  # fmt: skip


def _alembic_head() -> str:
    """nbgrader's schema revision, read in-process (nbgrader shells out to `alembic heads`)."""
    import nbgrader
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    folder = Path(nbgrader.__file__).parent
    config = Config(str(folder / "alembic.ini"))
    config.set_main_option("script_location", str(folder / "alembic"))
    return ScriptDirectory.from_config(config).get_current_head()


@contextmanager
def nbgrader_api() -> Iterator[Any]:
    """`nbgrader.api`, with its schema check reading the revision in-process (no `alembic
    heads` subprocess) until the block ends; then nbgrader's own check again."""
    import nbgrader.api

    theirs = nbgrader.api.get_alembic_version
    nbgrader.api.get_alembic_version = _alembic_head
    try:
        yield nbgrader.api
    finally:
        nbgrader.api.get_alembic_version = theirs


@contextmanager
def open_gradebook(url: str) -> Iterator[Any]:
    """nbgrader's Gradebook on `url`, without the alembic subprocess; closed on leaving."""
    with nbgrader_api() as api:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gb = api.Gradebook(url, course_id=COURSE_ID)
        with gb:
            yield gb


def write_gradebook(path: Path, masters: dict[str, Any], grades: list[NotebookGrade]) -> None:
    """Build the gradebook in memory (one commit per row would fsync), then save it to `path`."""
    kept = previous_hand_grading(path)
    answers = written_answers(path.parent, masters, grades)
    with open_gradebook("sqlite://") as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's own SQLAlchemy warnings on add_submission
        _fill(gb, masters, grades, answers)
        _restore(gb, kept, answers)
        gb.db.commit()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        raw = gb.engine.raw_connection()
        try:
            dest = sqlite3.connect(tmp)
            raw.driver_connection.backup(dest)
            _save_answers(dest, answers)
            _save_statuses(dest, grades)
            dest.close()
        finally:
            raw.close()
    os.replace(tmp, path)


# ---- the written answers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """A student's text in a hand-graded cell: None when it cannot be read."""

    text: str | None

    @property
    def blank(self) -> bool:
        return self.text is not None and self.text.strip() in ("", TEXT_STUB)

    @property
    def sha(self) -> str:
        return "" if self.text is None else hashlib.sha256(self.text.encode()).hexdigest()


def written_answers(
    out: Path, masters: dict[str, Any], grades: list[NotebookGrade]
) -> dict[tuple[str, str, str], Answer]:
    """(student, notebook stem, grade cell) -> the answer it grades: the written answer of a
    hand-graded cell, the code answer of an autograded one (`test-<grade_id>`), so that points
    given or replaced by hand follow the answer's text, not the grader's version."""
    found = {}
    for grade in grades:
        notebook, student = grade.notebook, grade.student
        # "*": the submission itself (its key changes with the file): for overridden scores
        found[(student, Path(notebook).stem, "*")] = Answer(grade.key)
        if notebook not in masters:
            continue
        manual = manual_cells(masters[notebook].nb)
        coded = {  # autograded cell -> the answer cell it grades
            cell: gid
            for gid, c in answer_cells(masters[notebook].nb).items()
            if (cell := test_cell_id(gid)) not in manual and c.cell_type == "code"
        }
        cells: dict[str, str] = {}
        path = autograded_path(out, student, notebook)
        if grade.status.submitted and path.is_file():
            try:
                nb = nbformat.read(str(path), as_version=4)
                wanted = set(manual) | set(coded.values())
                cells = {g: source(c) for c in nb.cells if (g := grade_id(c)) in wanted}
            except Exception:  # an unreadable file: graded by hand from the submission
                cells = {}
        blank = _left_blank(grade)
        for gid in manual:
            text = "" if not grade.status.submitted or gid in blank else cells.get(gid)
            found[(student, Path(notebook).stem, gid)] = Answer(text)
        for cell, gid in coded.items():
            if gid in cells:
                found[(student, Path(notebook).stem, cell)] = Answer(cells[gid])
    return found


def _left_blank(grade: NotebookGrade) -> set[str]:
    """Hand-graded cells the grader found unanswered (still the stub, or not graded): 0 points,
    nothing to grade by hand, as cells.csv and the feedback page say."""
    return {c.grade_id for c in grade.cells if c.manual and c.state == CellState.UNANSWERED}


def _save_answers(db: sqlite3.Connection, answers: dict[tuple[str, str, str], Answer]) -> None:
    db.execute(
        "CREATE TABLE IF NOT EXISTS autograder_answers (student TEXT, notebook TEXT, "
        "cell TEXT, sha256 TEXT, PRIMARY KEY (student, notebook, cell))"
    )
    db.executemany(
        "INSERT OR REPLACE INTO autograder_answers VALUES (?, ?, ?, ?)",
        [(*key, answer.sha) for key, answer in answers.items()],
    )
    db.commit()


def _save_statuses(db: sqlite3.Connection, grades: list[NotebookGrade]) -> None:
    """The grader's status of each (student, notebook), for the export."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS autograder_status (student TEXT, notebook TEXT, "
        "status TEXT, PRIMARY KEY (student, notebook))"
    )
    db.executemany(
        "INSERT OR REPLACE INTO autograder_status VALUES (?, ?, ?)",
        [(g.student, Path(g.notebook).stem, str(g.status)) for g in grades],
    )
    db.commit()


def statuses(path: Path) -> dict[tuple[str, str], Status]:
    """(student, notebook stem) -> the grader's status, as the gradebook at `path` holds it."""
    if not path.is_file():
        return {}
    try:
        with closing(sqlite3.connect(path)) as db:
            found = db.execute("SELECT student, notebook, status FROM autograder_status")
            return {(student, nb): Status(status) for student, nb, status in found}
    except (sqlite3.Error, ValueError):  # ValueError: a status no grader writes
        return {}


# ---- filling it -------------------------------------------------------------------------------


def _fill(
    gb: Any,
    masters: dict[str, Any],
    grades: list[NotebookGrade],
    answers: dict[tuple[str, str, str], Answer],
) -> None:
    gb.update_or_create_assignment(ASSIGNMENT)
    for notebook, master in masters.items():
        _cells(gb, Path(notebook).stem, master.nb)
    by_student: dict[str, list[NotebookGrade]] = {}
    for grade in grades:
        if grade.notebook in masters:
            by_student.setdefault(grade.student, []).append(grade)
    for student, student_grades in sorted(by_student.items()):
        gb.update_or_create_student(student)
        if all(g.status == Status.MISSING for g in student_grades):
            continue
        gb.add_submission(ASSIGNMENT, student)
        for grade in student_grades:
            _scores(gb, grade, masters[grade.notebook].nb, answers)


def _cells(gb: Any, name: str, nb: Any) -> None:
    """Notebook, grade, solution and source cells of one master."""
    from nbgrader.utils import compute_checksum

    gb.update_or_create_notebook(name, ASSIGNMENT)
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if not gid:
            continue
        if meta.get("grade"):
            points = float(meta.get("points", 0))
            gb.update_or_create_grade_cell(
                gid, name, ASSIGNMENT, max_score=points, cell_type=cell.cell_type
            )
        if meta.get("solution"):
            gb.update_or_create_solution_cell(gid, name, ASSIGNMENT)
        if meta.get("grade") or meta.get("solution") or meta.get("locked"):
            gb.update_or_create_source_cell(
                gid,
                name,
                ASSIGNMENT,
                cell_type=cell.cell_type,
                locked=bool(meta.get("locked")),
                source=source(cell),
                checksum=compute_checksum(cell),
            )


def _scores(
    gb: Any, graded: NotebookGrade, nb: Any, answers: dict[tuple[str, str, str], Answer]
) -> None:
    """One submitted notebook: trusted autograded scores, hand-graded cells waiting."""
    from nbgrader.api import MissingEntry

    student, name = graded.student, Path(graded.notebook).stem
    try:
        sub_nb = gb.find_submission_notebook(name, ASSIGNMENT, student)
    except MissingEntry:
        return
    sub_nb.flagged = graded.status not in (Status.OK, Status.UNANSWERED)
    scored = {c.grade_id: c for c in graded.cells}
    manual = manual_cells(nb)
    for grade in sub_nb.grades:
        if grade.name in manual:
            answer = answers.get((student, name, grade.name), Answer(None))
            waiting = not (answer.blank or not graded.status.submitted)
            grade.auto_score = None if waiting else 0.0
            grade.needs_manual_grade = waiting
            continue
        cell = next((c for g, c in scored.items() if test_cell_id(g) == grade.name), None)
        grade.auto_score = float(cell.score) if cell else 0.0
        grade.needs_manual_grade = False


# ---- hand grading that survives a rebuild -----------------------------------------------------


@dataclass(frozen=True)
class HandGrade:
    manual_score: float | None
    extra_credit: float | None
    sha256: str | None  # of the answer when it was graded; None: not recorded


def previous_hand_grading(
    path: Path,
) -> tuple[dict[tuple[str, str, str], HandGrade], dict[tuple[str, str, str], str]]:
    """Manual scores and manual comments entered in an existing gradebook at `path`."""
    grades: dict[tuple[str, str, str], HandGrade] = {}
    comments: dict[tuple[str, str, str], str] = {}
    if not path.is_file():
        return grades, comments
    from nbgrader.api import Comment, Grade

    shas: dict[tuple, str] = {}
    with sqlite3.connect(path) as db:
        try:
            shas = {tuple(r[:3]): r[3] for r in db.execute("SELECT * FROM autograder_answers")}
        except sqlite3.Error:
            shas = {}
    with open_gradebook(f"sqlite:///{path}") as gb:
        for grade in gb.db.query(Grade).filter(
            (Grade.manual_score.isnot(None)) | (Grade.extra_credit.isnot(None))
        ):
            key = (grade.student.id, grade.notebook.name, grade.name)
            sha = shas.get(key, shas.get((*key[:2], "*")))
            grades[key] = HandGrade(grade.manual_score, grade.extra_credit, sha)
        for comment in gb.db.query(Comment).filter(Comment.manual_comment.isnot(None)):
            key = (comment.student.id, comment.notebook.name, comment.name)
            comments[key] = comment.manual_comment
    return grades, comments


def _restore(
    gb: Any,
    kept: tuple[dict[tuple[str, str, str], HandGrade], dict[tuple[str, str, str], str]],
    answers: dict[tuple[str, str, str], Answer],
) -> None:
    """Put earlier hand grading back where the answer it graded is still the same."""
    from nbgrader.api import MissingEntry

    grades, comments = kept
    for (student, notebook, cell), hand in grades.items():
        answer = answers.get((student, notebook, cell)) or answers.get((student, notebook, "*"))
        if answer is not None and hand.sha256 is not None and answer.sha != hand.sha256:
            continue  # the student handed in a different answer: grade it again
        try:
            grade = gb.find_grade(cell, notebook, ASSIGNMENT, student)
        except MissingEntry:
            continue
        grade.manual_score, grade.extra_credit = hand.manual_score, hand.extra_credit
        grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
    for (student, notebook, cell), text in comments.items():
        try:
            gb.find_comment(cell, notebook, ASSIGNMENT, student).manual_comment = text
        except MissingEntry:
            continue
