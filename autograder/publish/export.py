"""`python -m autograder export OUT`: final grades, hand-graded points included.

Reads OUT/gradebook.db (the grader's scores, each notebook's status, and whatever was graded by
hand in formgrader; every notebook graded into OUT, whatever `--notebooks` the last run had),
and writes OUT/final-grades.csv: one row per student and notebook with the autograded and the
hand-graded points side by side and whether hand grading is done or still waiting. It also
brings the hand grading into OUT's grades.csv, cells.csv, report and feedback pages (as
`refresh` does).

With `--format canvas` or `--format moodle` it writes the platform's gradebook-import CSV, one
file per notebook (OUT/canvas/<notebook>.csv, OUT/moodle/<notebook>.csv), with a row only for
the students whose grade for that notebook is known. Neither platform reads a blank as "leave
it": Canvas counts a blank where it holds a score as a change and removes the score
(canvas-lms GradebookImporter#no_change_to_value?); Moodle stores "no grade" for a blank or
`-` in an existing grade item, erasing the grade, and a grade of 0 for a blank in a new one
(gradeimport_csv_load_data). So a notebook still waiting for hand grading (unless
`--partial`), or not handed in (unless `--missing-zero`), is left out of the file for that
student, with a line saying so, and the platform keeps what it had. A Moodle grade item made
by the import has a maximum of 100, and Moodle refuses a grade above it: the export says the
maximum each grade item needs, or writes percentages (`--percent`) that fit 100.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autograder.model.contract import ASSIGNMENT

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
    from autograder.publish.gradebook import statuses

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

    from autograder.publish.gradebook import open_gradebook

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
        if grade.needs_manual_grade and grade.manual_score is None:
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
    percent: bool = False  # Moodle: scores as percentages of the notebook's maximum

    @property
    def ids_ignore_case(self) -> bool:
        """Canvas login ids, Moodle user names and e-mail addresses ignore case."""
        return self.id_column in ("SIS Login ID", "username", "email")

    def platform_id(self, student: str) -> str | None:
        if not self.roster:
            return student
        row = self.roster.get(student)
        return None if row is None else row.get(self.id_from or "student", "").strip() or None

    def cell(self, f: Final) -> str | None:
        """The grade to import, or None when it is not known (the student is left out)."""
        if f.status == "missing":
            return "0" if self.missing_zero else None
        if f.waiting and not self.partial:
            return None
        if self.percent and f.max_score:
            return number(round(100 * f.score / f.max_score, 2))
        return number(f.score)


def columns(finals: list[Final]) -> list[str]:
    """One column per notebook, named by its file stem."""
    return list(dict.fromkeys(Path(f.notebook).stem for f in finals))


@dataclass
class Export:
    """The platform's import files (notebook stem -> CSV text) and what the instructor must know."""

    files: dict[str, str] = field(default_factory=dict)
    left_out: dict[str, list[str]] = field(default_factory=dict)  # notebook -> students, why
    warnings: list[str] = field(default_factory=list)
    maxima: dict[str, float] = field(default_factory=dict)


def platform_files(finals: list[Final], p: Platform) -> Export:
    """One import file per notebook, a row for each student whose grade is known."""
    result = Export()
    ids = _platform_ids(finals, p, result.warnings)
    for notebook in columns(finals):
        rows = []
        for f in (f for f in finals if Path(f.notebook).stem == notebook):
            result.maxima[notebook] = f.max_score
            if f.student not in ids:
                continue
            value = p.cell(f)
            if value is None:
                why = "not handed in" if f.status == "missing" else "hand grading not done"
                result.left_out.setdefault(notebook, []).append(f"{f.student} ({why})")
                continue
            rows.append((ids[f.student], _name(p, f.student), value))
        if rows:
            result.files[notebook] = _file(p, notebook, rows, result.maxima[notebook])
    return result


def _name(p: Platform, student: str) -> str:
    return (p.roster.get(student) or {}).get("name", student)


def _platform_ids(finals: list[Final], p: Platform, warnings: list[str]) -> dict[str, str]:
    """Student -> platform id; those not in the roster, with a formula id, or sharing one id
    (compared in Unicode NFC, and ignoring case where the platform does) are left out."""
    ids: dict[str, str] = {}
    for student in dict.fromkeys(f.student for f in finals):
        pid = p.platform_id(student)
        if pid is None:
            warnings.append(f"{student}: not in the roster (left out)")
        elif pid.startswith(FORMULA):
            warnings.append(f"{student}: id {pid!r} starts like a formula (left out)")
        else:
            ids[student] = pid
    seen: dict[str, list[str]] = {}
    for student, pid in ids.items():
        key = nfc(pid).casefold() if p.ids_ignore_case else nfc(pid)
        seen.setdefault(key, []).append(student)
    for students in (s for s in seen.values() if len(s) > 1):
        warnings.append(
            f"{', '.join(students)}: one {p.id_column} for several students "
            f"({ids[students[0]]!r}; left out)"
        )
        for student in students:
            del ids[student]
    return ids


def _file(p: Platform, notebook: str, rows: list[tuple[str, str, str]], maximum: float) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if p.kind == "canvas":
        w.writerow([*CANVAS_FIXED, notebook])
        w.writerow(["Points Possible", "", "", "", "", number(maximum)])
        for pid, name, value in rows:
            ids = ["" if c != p.id_column else pid for c in CANVAS_IDS]
            w.writerow([_safe(name), *ids, "", value])
    else:
        w.writerow([MOODLE_IDS[p.id_column], notebook])
        for pid, _, value in rows:
            w.writerow([pid, value])
    return buf.getvalue()


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    """A CSV with a `student` column (the grader's ids) and the platform's ids beside it."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        if "student" not in (reader.fieldnames or []):
            raise ValueError(f"{path} needs a 'student' column (the submission folder names)")
        return {nfc(row["student"].strip()): row for row in reader}


def match_roster(
    roster: dict[str, dict[str, str]], students: list[str]
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The roster keyed by the grader's ids: a roster id matches in Unicode NFC, else ignoring
    case when that makes one match only; the second list says where case was ignored."""
    matched = {s: roster[nfc(s)] for s in students if nfc(s) in roster}
    folded: dict[str, list[str]] = {}
    for key in roster:
        folded.setdefault(key.casefold(), []).append(key)
    notes = []
    for student in students:
        if student in matched:
            continue
        keys = folded.get(nfc(student).casefold(), [])
        if len(keys) == 1 and keys[0] not in {nfc(s) for s in students}:
            matched[student] = roster[keys[0]]
            notes.append(f"{student}: matched the roster's {keys[0]!r} ignoring case")
    return matched, notes


# ---- command line -----------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autograder export",
        description="Final grades with the hand-graded points: OUT/final-grades.csv, and the "
        "gradebook-import CSVs of Canvas or Moodle (one per notebook).",
    )
    p.add_argument("out", metavar="OUT", type=Path, help="the grader's --out folder")
    p.add_argument(
        "--format", choices=("canvas", "moodle"), help="also write OUT/<format>/<notebook>.csv"
    )
    p.add_argument(
        "--id-column",
        help="the column the platform matches students on: Canvas 'SIS Login ID' (default), "
        "'SIS User ID' or 'ID'; Moodle 'username' (default), 'idnumber' or 'email'",
    )
    p.add_argument("--roster", type=Path, help="CSV: a 'student' column and the platform's ids")
    p.add_argument("--id-from", default="", help="the roster column holding the platform id")
    p.add_argument("--partial", action="store_true", help="export notebooks still waiting too")
    p.add_argument("--missing-zero", action="store_true", help="0 for notebooks not handed in")
    p.add_argument(
        "--percent",
        action="store_true",
        help="Moodle: each score as a percentage of the notebook's maximum (fits the maximum "
        "of 100 that Moodle gives a grade item the import creates)",
    )
    return p


def _platform(args: argparse.Namespace) -> Platform:
    default = {"canvas": "SIS Login ID", "moodle": "username"}[args.format]
    id_column = args.id_column or default
    allowed = CANVAS_IDS if args.format == "canvas" else tuple(MOODLE_IDS)
    if id_column not in allowed:
        raise ValueError(f"--id-column for {args.format} is one of {', '.join(allowed)}")
    if args.percent and args.format != "moodle":
        raise ValueError("--percent is for --format moodle (Canvas reads the points possible)")
    roster = read_roster(args.roster) if args.roster else {}
    if roster and args.id_from and args.id_from not in next(iter(roster.values())):
        raise ValueError(f"the roster has no column {args.id_from!r}")
    return Platform(args.format, id_column, roster, args.id_from, args.partial,
                    args.missing_zero, args.percent)  # fmt: skip


def _refresh(out: Path) -> None:
    """Bring hand grading into OUT's CSVs, report and pages too; say so, or why not."""
    from autograder.publish.outputs import NotGraded, refresh
    from autograder.publish.refresh import said

    try:
        print(said(out, refresh(out.resolve())))
    except NotGraded as err:
        print(f"  (grades.csv and the pages not refreshed: {err})", file=sys.stderr)


def write_platform(out: Path, finals: list[Final], platform: Platform) -> list[Path]:
    """OUT/<platform>/<notebook>.csv, and what the instructor must know, printed."""
    if platform.roster:
        students = list(dict.fromkeys(f.student for f in finals))
        matched, notes = match_roster(platform.roster, students)
        platform = replace(platform, roster=matched)
        for note in notes:
            print(f"  {note}", file=sys.stderr)
    result = platform_files(finals, platform)
    folder = out / platform.kind
    folder.mkdir(exist_ok=True)
    for stale in folder.glob("*.csv"):  # a notebook with nothing to import this time
        stale.unlink()
    written = []
    for notebook in columns(finals):
        text = result.files.get(notebook)
        if text is None:
            print(f"{platform.kind}: nothing to import for {notebook} (no grade is final yet)")
        else:
            target = folder / f"{notebook}.csv"
            target.write_text(text, encoding="utf-8")
            written.append(target)
            rows = text.count("\n") - (2 if platform.kind == "canvas" else 1)
            note = _maximum_note(platform, result.maxima[notebook])
            plural = "s" if rows != 1 else ""
            print(f"{target}: {rows} student{plural}, matched on {platform.id_column}; {note}")
        left = result.left_out.get(notebook, [])
        if left:
            print(f"  left out, the platform keeps what it has: {', '.join(left)}", file=sys.stderr)
    for warning in result.warnings:
        print(f"  {warning}", file=sys.stderr)
    return written


def _maximum_note(p: Platform, maximum: float) -> str:
    if p.kind == "canvas":
        return f"its Points Possible row says {number(maximum)}"
    if p.percent:
        return "percentages of the notebook's points: the grade item's maximum must be 100"
    return (
        f"the Moodle grade item needs a maximum grade of {number(maximum)} (a grade item made "
        f"by the import gets 100: set it to {number(maximum)} first, or export with --percent)"
    )


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
    _refresh(args.out)
    (args.out / "final-grades.csv").write_text(final_grades_csv(finals), encoding="utf-8")
    waiting = [f for f in finals if f.waiting]
    plural = "s" if len(waiting) != 1 else ""
    hint = " (formgrader: `make lab OUT=...`)" if waiting else ""
    print(
        f"{args.out / 'final-grades.csv'}: {len(finals)} rows, {len(waiting)} notebook{plural} "
        f"waiting for hand grading{hint}"
    )
    if platform:
        write_platform(args.out, finals, platform)
    return 0
