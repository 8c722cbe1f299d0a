"""`python -m autograder formgrade OUT`: formgrader shows a graded class for hand grading.

Formgrader (JupyterLab → Nbgrader → Formgrader, from `make lab`) reads nbgrader's course
directory, `.nbgrader/` (or $AUTOGRADER_COURSE_DIR). This command points it at the class that
`python -m autograder grade ... --out OUT` graded:
- `<course>/autograded` becomes a link to OUT/autograded, the executed notebook of every
  submission (nbgrader's layout: autograded/<student>/<assignment>/<notebook>.ipynb);
- `<course>/formgrade.json` names OUT, so that the instructor's nbgrader configuration
  (nbgrader_config.py) uses OUT/gradebook.db as formgrader's database.
Scores entered in formgrader are written to OUT/gradebook.db, where a later `grade` run keeps
them, `python -m autograder refresh OUT` brings them into OUT's CSVs, report and feedback pages,
and `python -m autograder export OUT` reads them. `formgrade --clear` undoes the link.

Formgrader's first page (Manage Assignments) is nbgrader's course-side view: generate, release,
collect and feedback buttons for nbgrader's own exchange, which this course does not use (it
releases with `student-release` and grades with `grade`). Inside the Jupyter server, `apply`
gives formgrader a copy of nbgrader's page templates (links in `<course>/.formgrader-templates`)
whose Manage Assignments says in one line where the graded class is (Manual Grading → the
assignment, linked) and hides those buttons (templates/formgrader/manage_assignments.tpl).

Formgrader renders a submission on the Jupyter server's own origin, in the instructor's
authenticated session: student content must stay inert. nbgrader's formgrade template passes
markdown cells through unsanitised, so `SafeForFormgrader` (a preprocessor of formgrader's
exporter, with `HTMLExporter.sanitize_html`) cleans them and drops active output types.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from nbconvert.filters.strings import clean_html
from nbconvert.preprocessors import Preprocessor

from autograder.model.contract import ASSIGNMENT
from autograder.model.paths import COURSE_DIR

POINTER = "formgrade.json"
ENV_COURSE_DIR = "AUTOGRADER_COURSE_DIR"


class NotGraded(Exception):
    """OUT holds no graded class."""


def course_dir() -> Path:
    """nbgrader's course directory for the instructor's lab."""
    return Path(os.environ.get(ENV_COURSE_DIR) or COURSE_DIR).resolve()


def graded_class(course: Path | None = None) -> Path | None:
    """The OUT that formgrader is pointed at, or None."""
    pointer = (course or course_dir()) / POINTER
    try:
        out = Path(json.loads(pointer.read_text(encoding="utf-8"))["out"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return out if (out / "gradebook.db").is_file() else None


# Output types formgrader may show: plain data, images, and HTML/markdown that get cleaned.
SAFE_OUTPUTS = {"text/plain", "text/html", "text/markdown", "image/png", "image/jpeg"}


class SafeForFormgrader(Preprocessor):
    """Markdown cleaned to inert text and tags; no script, SVG, JavaScript or widget outputs."""

    def preprocess_cell(self, cell: Any, resources: Any, index: int) -> tuple[Any, Any]:
        if cell.cell_type in ("markdown", "raw"):
            cell.source = clean_html(cell.source)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            for mime in list(data):
                if mime not in SAFE_OUTPUTS:
                    del data[mime]
                elif mime in ("text/html", "text/markdown"):
                    data[mime] = clean_html(data[mime])
        return cell, resources


def apply(c: Any) -> Any:
    """Formgrader's settings: the graded class's gradebook, student content kept inert, and,
    inside the Jupyter server, a Manage Assignments page that says where the class is."""
    c.HTMLExporter.sanitize_html = True
    c.HTMLExporter.preprocessors = [f"{__name__}.SafeForFormgrader"]
    course = Path(c.CourseDirectory.root)
    out = graded_class(course)
    if out is not None:
        c.CourseDirectory.db_url = f"sqlite:///{out / 'gradebook.db'}"
    if FORMGRADER_SERVER in sys.modules and course.is_dir():
        course_side_templates(course, out)
    return c


FORMGRADER_SERVER = "nbgrader.server_extensions.formgrader.formgrader"
TEMPLATE_LINKS = ".formgrader-templates"
OVERRIDE = (
    Path(__file__).resolve().parents[1] / "templates" / "formgrader" / "manage_assignments.tpl"
)


def course_side_templates(course: Path, out: Path | None) -> Path:
    """Point formgrader at `<course>/.formgrader-templates`: links to each of nbgrader's page
    templates, and this course's Manage Assignments (which extends nbgrader's own) with the
    graded class `out` filled in. Returns the folder."""
    from nbgrader.server_extensions.formgrader import handlers

    original = Path(getattr(handlers, "nbgrader_template_path", handlers.template_path))
    handlers.nbgrader_template_path = str(original)
    folder = course / TEMPLATE_LINKS
    folder.mkdir(exist_ok=True)
    for entry in original.iterdir():
        names = {"manage_assignments.tpl": "nbgrader_manage_assignments.tpl"}
        link = folder / names.get(entry.name, entry.name)
        if not link.is_symlink() or link.resolve() != entry.resolve():
            link.unlink(missing_ok=True)
            link.symlink_to(entry, target_is_directory=entry.is_dir())
    page = OVERRIDE.read_text(encoding="utf-8")
    page = page.replace("@@OUT@@", json.dumps(str(out) if out else ""))
    page = page.replace("@@ASSIGNMENT@@", ASSIGNMENT)
    target = folder / "manage_assignments.tpl"
    target.unlink(missing_ok=True)
    target.write_text(page, encoding="utf-8")
    handlers.template_path = str(folder)
    return folder


def clear(course: Path) -> None:
    link = course / "autograded"
    if link.is_symlink():
        link.unlink()
    (course / POINTER).unlink(missing_ok=True)


def prepare(out: Path, course: Path | None = None) -> Path:
    """Point the course directory at OUT; return the course directory."""
    from autograder.course.release import ensure_course_dir

    out = out.resolve()
    if not (out / "gradebook.db").is_file():
        raise NotGraded(f"{out} holds no gradebook.db: run `python -m autograder grade` first")
    course = ensure_course_dir(course or course_dir())
    link = course / "autograded"
    if link.exists() and not link.is_symlink():
        raise NotGraded(f"{link} is a real folder (nbgrader's own autograde?): move it away first")
    clear(course)
    (out / "autograded").mkdir(exist_ok=True)
    link.symlink_to(out / "autograded", target_is_directory=True)
    (course / POINTER).write_text(json.dumps({"out": str(out)}) + "\n", encoding="utf-8")
    return course


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder formgrade`: its options, description and examples."""
    p.description = (
        "Point formgrader (JupyterLab: Nbgrader, Formgrader) at the class graded in OUT, for "
        "hand grading; the scores given there go to OUT/gradebook.db."
    )
    p.epilog = """examples:
  python -m autograder formgrade out/               # formgrader shows the class in out/
  python -m autograder formgrade out/ --if-graded   # the same; nothing when out/ is not graded
  python -m autograder formgrade --clear            # formgrader back to the course alone"""
    p.add_argument(
        "out",
        metavar="OUT",
        type=Path,
        nargs="?",
        help="the graded class: grade's --out folder (none: as --clear)",
    )
    p.add_argument("--clear", action="store_true", help="formgrader back to the course alone")
    p.add_argument(
        "--if-graded", action="store_true", help="do nothing (exit 0) when OUT is not graded yet"
    )


def run(args: argparse.Namespace) -> int:
    if args.clear or args.out is None:
        clear(course_dir())
        print("formgrader shows the course without a graded class")
        return 0
    try:
        course = prepare(args.out)
    except NotGraded as err:
        if args.if_graded:
            clear(course_dir())
            print(f"formgrader: no graded class in {args.out} yet")
            return 0
        print(f"formgrade: {err}", file=sys.stderr)
        return 2
    print(f"formgrader: {where(args.out.resolve())} (course directory {course})")
    return 0


def where(out: Path) -> str:
    """One line: where formgrader shows the class graded in `out`, and what waits there."""
    students, waiting = 0, 0
    try:
        with closing(sqlite3.connect(f"file:{out / 'gradebook.db'}?mode=ro", uri=True)) as db:
            students = db.execute("SELECT COUNT(*) FROM submitted_assignment").fetchone()[0]
            query = "SELECT COUNT(*) FROM grade WHERE needs_manual_grade"
            waiting = db.execute(query).fetchone()[0]
    except sqlite3.Error:
        pass
    return (
        f"the class graded in {out} ({students} student{'s' if students != 1 else ''} handed "
        f"in, {waiting} written answer{'s' if waiting != 1 else ''} waiting) is under Nbgrader → "
        f"Formgrader → Manual Grading → {ASSIGNMENT}"
    )
