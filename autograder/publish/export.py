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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from autograder.model import options
from autograder.model.contract import ASSIGNMENT
from autograder.model.enums import Status
from autograder.publish.csvs import neutral, starts_like_formula

CANVAS_FIXED = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_IDS = CANVAS_FIXED[1:4]
MOODLE_IDS = {"username": "Username", "idnumber": "ID number", "email": "Email address"}


@dataclass
class Final:
    """One student's notebook: autograded and hand-graded points, and what is still open."""

    student: str
    notebook: str  # file name, e.g. 02_queries_and_keys.ipynb
    status: Status  # the grader's
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


def _statuses(out: Path) -> dict[tuple[str, str], Status]:
    """The grader's status of each (student, notebook stem): the gradebook's, else grades.csv's
    (a gradebook written before it kept them)."""
    from autograder.publish.gradebook import statuses

    kept = statuses(out / "gradebook.db")
    if kept:
        return kept
    try:
        with open(out / "grades.csv", newline="", encoding="utf-8") as f:
            return {
                (r["student"], Path(r["notebook"]).stem): Status(r["status"])
                for r in csv.DictReader(f)
            }
    except (OSError, KeyError, ValueError):
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
                status = statuses.get((student, nb), Status.OK)
                final = Final(student, f"{nb}.ipynb", status)
                try:
                    graded = gb.find_submission_notebook(nb, ASSIGNMENT, student).grades
                except MissingEntry:
                    final.status, graded = Status.MISSING, []
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


def final_grades_csv(finals: list[Final]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["student", "notebook", "autograded", "autograded_max", "manual", "manual_max"]
        + ["extra_credit", "score", "max_score", "status", "hand_grading"]
    )
    for f in finals:
        w.writerow(
            [neutral(f.student), f.notebook, number(f.autograded), number(f.autograded_max)]
            + [number(f.manual), number(f.manual_max), number(f.extra_credit)]
            + [number(f.score), number(f.max_score), f.status, f.hand_grading]
        )
    return buf.getvalue()


@dataclass(frozen=True)
class Platform:
    """How grades go into a learning platform's import CSV. A platform is one subclass,
    registered with @platform("name"): the id columns it matches students on, its file's header
    and rows, and what the instructor must set there. `Platform("canvas", ...)` makes the
    registered class of that name."""

    kind: str  # the registered name: canvas | moodle
    id_column: str  # Canvas: ID, SIS User ID, SIS Login ID; Moodle: username, idnumber, email
    roster: dict[str, dict[str, str]] = field(default_factory=dict)  # student -> roster row
    id_from: str = ""  # roster column holding the platform id ("" = the grader's student id)
    partial: bool = False
    missing_zero: bool = False
    percent: bool = False  # scores as percentages of the notebook's maximum (where allowed)

    name: ClassVar[str] = ""
    id_columns: ClassVar[tuple[str, ...]] = ()  # the ones it matches on, the default first
    case_free_ids: ClassVar[tuple[str, ...]] = ()  # id columns the platform compares ignoring case
    no_percent: ClassVar[str] = ""  # why --percent is not for it (empty: it is)

    def __new__(cls, kind: str, *args: Any, **kwargs: Any) -> Platform:
        if cls is Platform:
            if kind not in PLATFORMS:
                raise ValueError(f"no platform {kind!r}: {', '.join(sorted(PLATFORMS))}")
            cls = PLATFORMS[kind]
        return super().__new__(cls)

    def __post_init__(self) -> None:
        if self.kind != self.name:
            raise ValueError(
                f"{type(self).__name__} is the platform {self.name!r}, not {self.kind!r}"
            )

    @property
    def ids_ignore_case(self) -> bool:
        return self.id_column in self.case_free_ids

    def platform_id(self, student: str) -> str | None:
        if not self.roster:
            return student
        row = self.roster.get(student)
        return None if row is None else row.get(self.id_from or "student", "").strip() or None

    def cell(self, f: Final) -> str | None:
        """The grade to import, or None when it is not known (the student is left out)."""
        if f.status == Status.MISSING:
            return "0" if self.missing_zero else None
        if f.waiting and not self.partial:
            return None
        if self.percent and f.max_score:
            return number(round(100 * f.score / f.max_score, 2))
        return number(f.score)

    def header(self, notebook: str, maximum: float) -> list[list[str]]:
        """The file's rows before the students'."""
        raise NotImplementedError

    def row(self, pid: str, name: str, value: str) -> list[str]:
        """A student's row: platform id, name (the roster's, else the grader's id), grade."""
        raise NotImplementedError

    def maximum_note(self, maximum: float) -> str:
        """What the instructor must know of the notebook's maximum on this platform."""
        raise NotImplementedError


PLATFORMS: dict[str, type[Platform]] = {}  # --format's choices: name -> its Platform subclass
P = TypeVar("P", bound=Platform)


def platform(name: str) -> Callable[[type[P]], type[P]]:
    """Register a Platform subclass under `name` (`--format name`)."""

    def register(cls: type[P]) -> type[P]:
        cls.name = name
        PLATFORMS[name] = cls
        return cls

    return register


@platform("canvas")
@dataclass(frozen=True)
class Canvas(Platform):
    """Canvas's gradebook import: its fixed columns, a Points Possible row, one id filled."""

    id_columns: ClassVar[tuple[str, ...]] = ("SIS Login ID", "SIS User ID", "ID")
    case_free_ids: ClassVar[tuple[str, ...]] = ("SIS Login ID",)
    no_percent: ClassVar[str] = "Canvas reads the points possible"

    def header(self, notebook: str, maximum: float) -> list[list[str]]:
        return [[*CANVAS_FIXED, notebook], ["Points Possible", "", "", "", "", number(maximum)]]

    def row(self, pid: str, name: str, value: str) -> list[str]:
        ids = ["" if c != self.id_column else pid for c in CANVAS_IDS]
        return [neutral(name), *ids, "", value]

    def maximum_note(self, maximum: float) -> str:
        return f"its Points Possible row says {number(maximum)}"


@platform("moodle")
@dataclass(frozen=True)
class Moodle(Platform):
    """Moodle's CSV grade import: the id column and the grade, nothing else."""

    id_columns: ClassVar[tuple[str, ...]] = tuple(MOODLE_IDS)
    case_free_ids: ClassVar[tuple[str, ...]] = ("username", "email")

    def header(self, notebook: str, maximum: float) -> list[list[str]]:
        return [[MOODLE_IDS[self.id_column], notebook]]

    def row(self, pid: str, name: str, value: str) -> list[str]:
        return [pid, value]

    def maximum_note(self, maximum: float) -> str:
        if self.percent:
            return "percentages of the notebook's points: the grade item's maximum must be 100"
        return (
            f"the Moodle grade item needs a maximum grade of {number(maximum)} (a grade item "
            f"made by the import gets 100: set it to {number(maximum)} first, or export with "
            "--percent)"
        )


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
                why = "not handed in" if f.status == Status.MISSING else "hand grading not done"
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
        elif starts_like_formula(pid):
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
    w.writerows(p.header(notebook, maximum))
    w.writerows(p.row(pid, name, value) for pid, name, value in rows)
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder export`: its options, description and examples."""
    p.description = (
        "Final grades with the hand-graded points: OUT/final-grades.csv, and the "
        "gradebook-import CSVs of Canvas or Moodle (one per notebook)."
    )
    p.epilog = """examples:
  python -m autograder export out/                                # out/final-grades.csv
  python -m autograder export out/ --format canvas                # and out/canvas/<notebook>.csv
  python -m autograder export out/ --format moodle --percent
  python -m autograder export out/ --format canvas --roster roster.csv --id-from sis_login"""
    options.out_folder(p)
    p.add_argument(
        "--format", choices=sorted(PLATFORMS), help="also write OUT/<format>/<notebook>.csv"
    )
    p.add_argument(
        "--id-column",
        metavar="COLUMN",
        help=f"the column the platform matches students on: {_ids()}",
    )
    p.add_argument(
        "--roster", metavar="FILE", type=Path, help="CSV: a 'student' column and the platform's ids"
    )
    p.add_argument(
        "--id-from", metavar="COLUMN", default="", help="the roster column holding the platform id"
    )
    p.add_argument("--partial", action="store_true", help="export notebooks still waiting too")
    p.add_argument("--missing-zero", action="store_true", help="0 for notebooks not handed in")
    p.add_argument(
        "--percent",
        action="store_true",
        help="Moodle: each score as a percentage of the notebook's maximum (fits the maximum "
        "of 100 that Moodle gives a grade item the import creates)",
    )


def _ids() -> str:
    """Each platform's id columns, for --help: Canvas 'SIS Login ID' (default), ... or 'ID'."""
    said = []
    for cls in PLATFORMS.values():
        first, *others = (f"'{c}'" for c in cls.id_columns)
        rest = ", ".join(others[:-1]) + f" or {others[-1]}" if len(others) > 1 else "".join(others)
        said.append(f"{cls.__name__} {first} (default)" + (f", {rest}" if rest else ""))
    return "; ".join(said)


def _platform(args: argparse.Namespace) -> Platform:
    cls = PLATFORMS[args.format]
    id_column = args.id_column or cls.id_columns[0]
    if id_column not in cls.id_columns:
        raise ValueError(f"--id-column for {args.format} is one of {', '.join(cls.id_columns)}")
    if args.percent and cls.no_percent:
        allowed = ", ".join(name for name, c in PLATFORMS.items() if not c.no_percent)
        raise ValueError(f"--percent is for --format {allowed} ({cls.no_percent})")
    roster = read_roster(args.roster) if args.roster else {}
    if roster and args.id_from and args.id_from not in next(iter(roster.values())):
        raise ValueError(f"the roster has no column {args.id_from!r}")
    return cls(args.format, id_column, roster, args.id_from, args.partial,
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
            maximum = result.maxima[notebook]
            rows = text.count("\n") - len(platform.header(notebook, maximum))
            note = platform.maximum_note(maximum)
            plural = "s" if rows != 1 else ""
            print(f"{target}: {rows} student{plural}, matched on {platform.id_column}; {note}")
        left = result.left_out.get(notebook, [])
        if left:
            print(f"  left out, the platform keeps what it has: {', '.join(left)}", file=sys.stderr)
    for warning in result.warnings:
        print(f"  {warning}", file=sys.stderr)
    return written


def run(args: argparse.Namespace) -> int:
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
