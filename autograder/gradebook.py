"""The class's nbgrader gradebook (OUT/gradebook.db), written once by the parent process.

nbgrader's SQLite gradebook is not built for concurrent writers, so workers never touch it:
the parent rebuilds it from the states at the end of every run (in memory, saved to a
temporary file, then renamed). Assignment, notebooks and cells come from the solutions'
nbgrader metadata; every student gets a submission whose autograded cells carry the trusted
scores (grade cells are the `test-<grade_id>` cells, as in nbgrader). Notebooks that were not
`ok` are flagged.
"""

from __future__ import annotations

import os
import sqlite3
import warnings
from pathlib import Path
from typing import Any

from autograder.contract import ASSIGNMENT, test_cell_id
from autograder.notebook_io import nbgrader_meta, source

COURSE_ID = "self-attention"


def _alembic_head() -> str:
    """nbgrader's schema revision, read in-process (nbgrader shells out to `alembic heads`)."""
    import nbgrader
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    folder = Path(nbgrader.__file__).parent
    config = Config(str(folder / "alembic.ini"))
    config.set_main_option("script_location", str(folder / "alembic"))
    return ScriptDirectory.from_config(config).get_current_head()


def write_gradebook(path: Path, masters: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Build the gradebook in memory (one commit per row would fsync), then save it to `path`."""
    import nbgrader.api

    nbgrader.api.get_alembic_version = _alembic_head
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with nbgrader.api.Gradebook("sqlite://", course_id=COURSE_ID) as gb:
            _fill(gb, masters, rows)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.unlink(missing_ok=True)
            raw = gb.engine.raw_connection()
            try:
                dest = sqlite3.connect(tmp)
                raw.driver_connection.backup(dest)
                dest.close()
            finally:
                raw.close()
    os.replace(tmp, path)


def _fill(gb: Any, masters: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    from nbgrader.api import MissingEntry
    from nbgrader.utils import compute_checksum

    gb.update_or_create_assignment(ASSIGNMENT)
    for notebook, master in masters.items():
        name = Path(notebook).stem
        gb.update_or_create_notebook(name, ASSIGNMENT)
        for cell in master.nb.cells:
            meta = nbgrader_meta(cell)
            gid = meta.get("grade_id")
            if not gid:
                continue
            if meta.get("grade"):
                gb.update_or_create_grade_cell(
                    gid,
                    name,
                    ASSIGNMENT,
                    max_score=float(meta.get("points", 0)),
                    cell_type=cell.cell_type,
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
    by_student: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_student.setdefault(row["student"], []).append(row)
    for student, student_rows in sorted(by_student.items()):
        gb.update_or_create_student(student)
        if all(r["status"] == "missing" for r in student_rows):
            continue
        gb.add_submission(ASSIGNMENT, student)
        for row in student_rows:
            name = Path(row["notebook"]).stem
            try:
                sub_nb = gb.find_submission_notebook(name, ASSIGNMENT, student)
                sub_nb.flagged = row["status"] != "ok"
            except MissingEntry:
                continue
            for cell in row.get("cells", []):
                try:
                    grade = gb.find_grade(test_cell_id(cell["grade_id"]), name, ASSIGNMENT, student)
                except MissingEntry:
                    continue
                grade.auto_score = float(cell["score"])
                grade.needs_manual_grade = False
        gb.db.commit()
