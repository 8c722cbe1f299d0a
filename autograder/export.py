"""`python -m autograder export OUT`: final grades, hand-graded points included.

Reads OUT/gradebook.db (the grader's scores, each notebook's status, and whatever was graded by
hand in formgrader; every notebook graded into OUT, whatever `--notebooks` the last run had),
and writes OUT/final-grades.csv: one row per student and notebook with the autograded and the
hand-graded points side by side and whether hand grading is done or still waiting. With
`--format canvas` or `--format moodle` it also writes the platform's gradebook-import CSV (one
column per notebook; the student id in the column the platform matches on, from `--roster` when
the grader's ids are not the platform's). A notebook still waiting for hand grading is left
blank there (the platform keeps what it had) unless `--partial`; a notebook not handed in is
blank unless `--missing-zero`.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.contract import ASSIGNMENT

CANVAS_FIXED = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_IDS = CANVAS_FIXED[1:4]
MOODLE_IDS = {"username": "Username", "idnumber": "ID number", "email": "Email address"}
FORMULA = ("=", "+", "-", "@", "\t", "\r")


@dataclass
class Final:
    """One student's notebook: autograded and hand-graded points, and what is still open."""

    student: str
    notebook: str  # file name, e.g. 02_queries_and_keys.ipynb
    status: str  # the grader's: ok, missing, unanswered, invalid, timeout, error
    autograded: float = 0.0
    autograded_max: float = 0.0
    manual: float = 0.0
    manual_max: float = 0.0
    extra_credit: float = 0.0
    waiting: list[str] = field(default_factory=list)  # hand-graded cells not graded yet

    @property
    def score(self) -> float:
        return round(self.autograded + self.manual + self.extra_credit, 6)

    @property
    def max_score(self) -> float:
        return round(self.autograded_max + self.manual_max, 6)

    @property
    def hand_grading(self) -> str:
        if self.waiting:
            return f"waiting: {' '.join(self.waiting)}"
        return "done" if self.manual_max else "none"


def _statuses(out: Path) -> dict[tuple[str, str], str]:
    """The grader's status of each (student, notebook stem): the gradebook's, else grades.csv's
    (a gradebook written before it kept them)."""
    from autograder.gradebook import statuses

    kept = statuses(out / "gradebook.db")
    if kept:
        return kept
    try:
        with open(out / "grades.csv", newline="", encoding="utf-8") as f:
            return {
                (r["student"], Path(r["notebook"]).stem): r["status"] for r in csv.DictReader(f)
            }
    except (OSError, KeyError):
        return {}


def collect(out: Path) -> list[Final]:
    """Every student x notebook of OUT's gradebook, in gradebook order."""
    from nbgrader.api import MissingEntry

    from autograder.gradebook import open_gradebook

    path = out / "gradebook.db"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: run `python -m autograder grade` first")
    statuses = _statuses(out)
    finals = []
    with open_gradebook(f"sqlite:///{path.resolve()}") as gb:
        notebooks = [nb.name for nb in gb.find_assignment(ASSIGNMENT).notebooks]
        manual_cells = {
            nb: {c.name for c in gb.find_notebook(nb, ASSIGNMENT).solution_cells}
            for nb in notebooks
        }
        for student in sorted(s.id for s in gb.students):
            for nb in notebooks:
                status = statuses.get((student, nb), "ok")
                final = Final(student, f"{nb}.ipynb", status)
                try:
                    graded = gb.find_submission_notebook(nb, ASSIGNMENT, student).grades
                except MissingEntry:
                    final.status, graded = "missing", []
                    final.autograded_max, final.manual_max = _maxima(gb, nb, manual_cells[nb])
                for grade in graded:
                    _add(final, grade, grade.name in manual_cells[nb])
                finals.append(final)
    return finals


def _maxima(gb: Any, nb: str, manual: set[str]) -> tuple[float, float]:
    cells = gb.find_notebook(nb, ASSIGNMENT).grade_cells
    auto = sum(c.max_score for c in cells if c.name not in manual)
    return auto, sum(c.max_score for c in cells if c.name in manual)


def _add(final: Final, grade: Any, manual: bool) -> None:
    score = grade.score or 0.0  # the manual score, else the autograded one
    if manual:
        final.manual += score
        final.manual_max += grade.max_score
        if grade.needs_manual_grade:
            final.waiting.append(grade.name)
    else:
        final.autograded += score
        final.autograded_max += grade.max_score
    final.extra_credit += grade.extra_credit or 0.0


# ---- files ------------------------------------------------------------------------------------


def number(x: float) -> str:
    return f"{x:.6f}".rstrip("0").rstrip(".")


def _safe(cell: str) -> str:
    """A text cell a spreadsheet will not run as a formula."""
    return "'" + cell if cell.startswith(FORMULA) else cell


def final_grades_csv(finals: list[Final]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["student", "notebook", "autograded", "autograded_max", "manual", "manual_max"]
        + ["extra_credit", "score", "max_score", "status", "hand_grading"]
    )
    for f in finals:
        w.writerow(
            [_safe(f.student), f.notebook, number(f.autograded), number(f.autograded_max)]
            + [number(f.manual), number(f.manual_max), number(f.extra_credit)]
            + [number(f.score), number(f.max_score), f.status, f.hand_grading]
        )
    return buf.getvalue()


@dataclass(frozen=True)
class Platform:
    """How grades go into the learning platform's import CSV."""

    kind: str  # canvas | moodle
    id_column: str  # Canvas: ID, SIS User ID, SIS Login ID; Moodle: username, idnumber, email
    roster: dict[str, dict[str, str]] = field(default_factory=dict)  # student -> roster row
    id_from: str = ""  # roster column holding the platform id ("" = the grader's student id)
    partial: bool = False
    missing_zero: bool = False

    def platform_id(self, student: str) -> str | None:
        if not self.roster:
            return student
        row = self.roster.get(student)
        return None if row is None else row.get(self.id_from or "student", "").strip() or None

    def cell(self, f: Final) -> str:
        if f.status == "missing":
            return "0" if self.missing_zero else ""
        if f.waiting and not self.partial:
            return ""
        return number(f.score)


def columns(finals: list[Final]) -> list[str]:
    """One column per notebook, named by its file stem."""
    return list(dict.fromkeys(Path(f.notebook).stem for f in finals))


def platform_csv(finals: list[Final], p: Platform) -> tuple[str, list[str]]:
    """The import file and the warnings (students left out, cells left blank)."""
    notebooks = columns(finals)
    by_student: dict[str, dict[str, Final]] = {}
    for f in finals:
        by_student.setdefault(f.student, {})[Path(f.notebook).stem] = f
    warnings, rows = [], []
    for student, cells in by_student.items():
        pid = p.platform_id(student)
        if pid is None:
            warnings.append(f"{student}: not in the roster (left out)")
            continue
        if pid.startswith(FORMULA):
            warnings.append(f"{student}: id {pid!r} starts like a formula (left out)")
            continue
        values = [p.cell(cells[nb]) if nb in cells else "" for nb in notebooks]
        waiting = [nb for nb in notebooks if nb in cells and cells[nb].waiting]
        if waiting and not p.partial:
            warnings.append(f"{student}: {', '.join(waiting)} blank, hand grading not done")
        name = (p.roster.get(student) or {}).get("name", student)
        rows.append((pid, name, values))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if p.kind == "canvas":
        w.writerow([*CANVAS_FIXED, *notebooks])
        maxima = {Path(f.notebook).stem: number(f.max_score) for f in finals}
        w.writerow(["Points Possible", "", "", "", "", *(maxima[nb] for nb in notebooks)])
        for pid, name, values in rows:
            ids = ["" if c != p.id_column else pid for c in CANVAS_IDS]
            w.writerow([_safe(name), *ids, "", *values])
    else:
        w.writerow([MOODLE_IDS[p.id_column], *notebooks])
        for pid, _, values in rows:
            w.writerow([pid, *values])
    return buf.getvalue(), warnings


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    """A CSV with a `student` column (the grader's ids) and the platform's ids beside it."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        if "student" not in (reader.fieldnames or []):
            raise ValueError(f"{path} needs a 'student' column (the submission folder names)")
        return {row["student"].strip(): row for row in reader}


# ---- command line -----------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autograder export",
        description="Final grades with the hand-graded points: OUT/final-grades.csv, and the "
        "gradebook-import CSV of Canvas or Moodle.",
    )
    p.add_argument("out", metavar="OUT", type=Path, help="the grader's --out folder")
    p.add_argument("--format", choices=("canvas", "moodle"), help="also write OUT/<format>.csv")
    p.add_argument(
        "--id-column",
        help="the column the platform matches students on: Canvas 'SIS Login ID' (default), "
        "'SIS User ID' or 'ID'; Moodle 'username' (default), 'idnumber' or 'email'",
    )
    p.add_argument("--roster", type=Path, help="CSV: a 'student' column and the platform's ids")
    p.add_argument("--id-from", default="", help="the roster column holding the platform id")
    p.add_argument("--partial", action="store_true", help="export notebooks still waiting too")
    p.add_argument("--missing-zero", action="store_true", help="0 for notebooks not handed in")
    return p


def _platform(args: argparse.Namespace) -> Platform:
    default = {"canvas": "SIS Login ID", "moodle": "username"}[args.format]
    id_column = args.id_column or default
    allowed = CANVAS_IDS if args.format == "canvas" else tuple(MOODLE_IDS)
    if id_column not in allowed:
        raise ValueError(f"--id-column for {args.format} is one of {', '.join(allowed)}")
    roster = read_roster(args.roster) if args.roster else {}
    if roster and args.id_from and args.id_from not in next(iter(roster.values())):
        raise ValueError(f"the roster has no column {args.id_from!r}")
    return Platform(args.format, id_column, roster, args.id_from, args.partial, args.missing_zero)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        platform = _platform(args) if args.format else None
        finals = collect(args.out)
    except (OSError, ValueError) as err:
        print(f"export: {err}", file=sys.stderr)
        return 2
    (args.out / "final-grades.csv").write_text(final_grades_csv(finals), encoding="utf-8")
    waiting = [f for f in finals if f.waiting]
    print(
        f"{args.out / 'final-grades.csv'}: {len(finals)} rows, {len(waiting)} notebooks "
        "waiting for hand grading" + (" (formgrader: `make lab OUT=...`)" if waiting else "")
    )
    if platform:
        text, warnings = platform_csv(finals, platform)
        target = args.out / f"{platform.kind}.csv"
        target.write_text(text, encoding="utf-8")
        print(
            f"{target}: {platform.kind} gradebook import, students matched on {platform.id_column}"
        )
        for warning in warnings:
            print(f"  {warning}", file=sys.stderr)
    return 0
