"""Hand grading end to end: gradebook -> formgrader (in `make lab`) -> a manual score -> export.

A small graded class is written the way the grader leaves it: OUT/gradebook.db from
`write_gradebook` and the executed notebook of each submission at
OUT/autograded/<student>/self-attention/<notebook>.ipynb (here: the master notebook with the
student's answers, not executed). Then the instructor's side is driven through nbgrader's own
code: NbGraderAPI as formgrader configures it, and formgrader's HTTP handlers in the
JupyterLab that `make lab OUT=...` starts (a free port, a throwaway course directory). A real
`grade` run's OUT (tests/e2e/browser/graded_class.py, graded once per session) goes the same way,
an unanswered student included, and is graded again with another `--assignment`.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from autograder import cli
from autograder.checks.base import CellResult, Check
from autograder.course import formgrade
from autograder.model import contract
from autograder.model.contract import ASSIGNMENT
from autograder.model.enums import Status
from autograder.model.grades import CellGrade, NotebookGrade
from autograder.model.notebook_io import (
    answer_cells,
    grade_id,
    nbgrader_meta,
    read,
    solution_answers,
)
from autograder.model.paths import ROOT, SOLUTIONS
from autograder.publish import export
from autograder.publish.gradebook import autograded_path, manual_cells, write_gradebook
from tests.e2e.browser import graded_class as real
from tests.e2e.browser.graded_class import COPY, NB01, NB02, PARTIAL, STRIPPED, WRONG

# slow: classes graded and a lab started in module fixtures (pytest-timeout: setup counts)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NOTEBOOKS = ("01_uniform_averaging.ipynb", "02_queries_and_keys.ipynb")
WRITTEN = "why-not-T"  # 02's hand-graded written answer
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="alert(1)">'
HOSTILE_SVG = '<svg xmlns="http://www.w3.org/2000/svg"><script>document.title="svg"</script></svg>'
ACTIVE = re.compile(rb"<script>document\.title|<[^>]*\bonerror\s*=")


def masters() -> dict[str, SimpleNamespace]:
    return {nb: SimpleNamespace(nb=read(SOLUTIONS / nb)) for nb in NOTEBOOKS}


def autograded_points(nb: nbformat.NotebookNode) -> dict[str, float]:
    """Answer grade_id -> points of its test cell (what the grader scores)."""
    tests = {grade_id(c): float(nbgrader_meta(c).get("points", 0)) for c in nb.cells if grade_id(c)}
    return {
        gid: tests[contract.test_cell_id(gid)]
        for gid, cell in answer_cells(nb).items()
        if cell.cell_type == "code" and contract.test_cell_id(gid) in tests
    }


@dataclass
class Student:
    """What one student handed in for one notebook, and what the grader made of it."""

    written: str | None = None  # the written answer; None: the release stub
    lost: dict[str, str] | None = None  # grade_id -> mistake: that cell scored 0
    hostile: bool = False  # an output that tries to run script in the instructor's browser
    status: Status = Status.OK


def _graded(gid: str, points: float, mistake: str | None) -> CellGrade:
    """An autograded cell: full points, or 0 with the mistake named."""
    earned = 0.0 if mistake else points
    result = CellResult(gid, [Check("the check", points, earned)], [mistake] if mistake else [])
    return CellGrade.judged(result, points, gid)


def write_submission(out: Path, student: str, notebook: str, s: Student, master) -> NotebookGrade:
    """OUT/autograded/<student>/...: the master with the student's answers; return its grade."""
    nb = copy.deepcopy(master.nb)
    answers = solution_answers(master.nb)
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in answers:
            cell.source = answers[gid]
        elif gid in manual_cells(master.nb):
            cell.source = s.written if s.written is not None else "YOUR ANSWER HERE"
        if s.hostile and gid and gid.startswith("test-"):
            data = {"text/html": HOSTILE, "image/svg+xml": HOSTILE_SVG, "text/markdown": HOSTILE}
            cell.outputs = [nbformat.v4.new_output("display_data", data)]
    path = autograded_path(out, student, notebook)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    lost = s.lost or {}
    cells = [_graded(g, p, lost.get(g)) for g, p in autograded_points(master.nb).items()]
    return NotebookGrade(
        student, notebook, s.status, key=f"{student}/{notebook}/{s.written}", cells=cells
    )


CLASS = {
    "ada": {n: Student(written="Each projection sees one token's C channels.") for n in NOTEBOOKS},
    "bob": {NOTEBOOKS[1]: Student()},  # 01 not handed in; 02's written answer left blank
    "cy": {
        NOTEBOOKS[0]: Student(),
        NOTEBOOKS[1]: Student(
            written=f"The weights do not depend on T. {HOSTILE}",
            lost={"affinities": "swapped-qk"},
            hostile=True,
        ),
    },
}


def grades_csv(grades: list[NotebookGrade]) -> str:
    lines = ["student,notebook,score,max_score,status"]
    lines += [f"{g.student},{g.notebook},{g.score},{g.max_score},{g.status}" for g in grades]
    return "\n".join(lines) + "\n"


def graded_class(out: Path, klass: dict[str, dict[str, Student]] = CLASS) -> list[NotebookGrade]:
    """Write a graded class into `out` as the grader does; return its grades."""
    ms = masters()
    rows = []
    for student, handed in klass.items():
        for notebook in NOTEBOOKS:
            if notebook in handed:
                rows.append(
                    write_submission(out, student, notebook, handed[notebook], ms[notebook])
                )
            else:
                points = autograded_points(ms[notebook].nb)
                cells = [CellGrade(g, p) for g, p in points.items()]
                rows.append(NotebookGrade(student, notebook, Status.MISSING, cells=cells))
    write_gradebook(out / "gradebook.db", ms, rows)
    (out / "grades.csv").write_text(grades_csv(rows))
    return rows


@pytest.fixture
def out(tmp_path: Path) -> Path:
    target = tmp_path / "out"
    graded_class(target)
    return target


def by_student(finals: list[export.Final], notebook: str) -> dict[str, export.Final]:
    return {f.student: f for f in finals if f.notebook == notebook}


# ---- the gradebook as formgrader's API reads it -----------------------------------------------


def _build_folder(what: str) -> Path:
    return ROOT / "build" / f"{what}-{os.getpid()}-{time.monotonic_ns()}"


@pytest.fixture(scope="module")
def released_course() -> Iterator[Path]:
    """nbgrader's course directory with the assignment released, made once per module."""
    from autograder.course.release import ensure_course_dir

    folder = ensure_course_dir(_build_folder("course"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def course(released_course: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A throwaway course directory (in build/, inside the lab's root), as `make lab` sets up."""
    folder = _build_folder("formgrade")
    shutil.copytree(released_course, folder, symlinks=True)
    monkeypatch.setenv(formgrade.ENV_COURSE_DIR, str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def formgrader_api(course: Path):
    """NbGraderAPI configured as formgrader is: nbgrader_config.py's settings."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    from autograder.course.nbgrader_settings import configure_instructor

    return NbGraderAPI(config=configure_instructor(Config()))


def test_formgrader_lists_every_submission_with_written_answers_waiting(
    out: Path, course: Path
) -> None:
    formgrade.prepare(out)
    api = formgrader_api(course)
    assert api.coursedir.root == str(course.resolve())
    submissions = {s["student"]: s for s in api.get_submissions(ASSIGNMENT)}
    assert set(submissions) == set(CLASS)
    assert all(s["autograded"] and s["submitted"] for s in submissions.values())
    assert submissions["ada"]["needs_manual_grade"] and submissions["cy"]["needs_manual_grade"]
    assert not submissions["bob"]["needs_manual_grade"], "a blank written answer scores 0"
    nb02 = {s["student"]: s for s in api.get_notebook_submissions(ASSIGNMENT, NOTEBOOKS[1][:-6])}
    assert set(nb02) == set(CLASS), "every 02 submission has its executed notebook"
    points = autograded_points(masters()[NOTEBOOKS[1]].nb)
    assert nb02["ada"]["code_score"] == sum(points.values())
    assert nb02["cy"]["code_score"] == sum(points.values()) - points["affinities"]
    assert nb02["ada"]["max_written_score"] == manual_cells(masters()[NOTEBOOKS[1]].nb)[WRITTEN]
    assert nb02["ada"]["needs_manual_grade"] and not nb02["bob"]["needs_manual_grade"]
    nb01 = {s["student"] for s in api.get_notebook_submissions(ASSIGNMENT, NOTEBOOKS[0][:-6])}
    assert nb01 == {"ada", "cy"}, "bob handed in no 01: nothing to show"


def test_export_shows_waiting_hand_grading(out: Path) -> None:
    finals = by_student(export.collect(out), NOTEBOOKS[1])
    assert (
        finals["ada"].waiting == [WRITTEN] and finals["ada"].hand_grading == f"waiting: {WRITTEN}"
    )
    assert finals["bob"].hand_grading == "done" and finals["bob"].manual == 0
    missing = by_student(export.collect(out), NOTEBOOKS[0])["bob"]
    assert missing.status == "missing" and missing.score == 0
    assert missing.autograded_max == sum(autograded_points(masters()[NOTEBOOKS[0]].nb).values())


def _grade_by_hand(out: Path, student: str, score: float) -> None:
    """What formgrader's "save score" does, through nbgrader's API on OUT's gradebook."""
    from autograder.publish.gradebook import open_gradebook

    with open_gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        grade = gb.find_grade(WRITTEN, NOTEBOOKS[1][:-6], ASSIGNMENT, student)
        assert grade.needs_manual_grade, f"{student}'s written answer is not waiting"
        grade.manual_score, grade.needs_manual_grade = score, False
        gb.find_comment(WRITTEN, NOTEBOOKS[1][:-6], ASSIGNMENT, student).manual_comment = "ok"
        gb.db.commit()


def test_hand_grading_survives_a_regrade_unless_the_answer_changed(out: Path) -> None:
    _grade_by_hand(out, "ada", 1.0)
    _grade_by_hand(out, "cy", 0.5)
    changed = {**CLASS, "cy": {**CLASS["cy"], NOTEBOOKS[1]: Student(written="Something else.")}}
    graded_class(out, changed)  # the grader runs again; cy handed in a new written answer
    finals = by_student(export.collect(out), NOTEBOOKS[1])
    assert finals["ada"].manual == 1.0 and finals["ada"].hand_grading == "done"
    assert finals["cy"].waiting == [WRITTEN], "a changed answer must be graded again"
    from autograder.publish.gradebook import open_gradebook

    with open_gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        comment = gb.find_comment(WRITTEN, NOTEBOOKS[1][:-6], ASSIGNMENT, "ada")
        assert comment.manual_comment == "ok"


def test_nbgrader_is_patched_only_while_a_gradebook_is_open(out: Path) -> None:
    """The in-process schema check replaces nbgrader's `alembic heads` subprocess for the time a
    gradebook is open (or `nbgrader_api` is entered), and nbgrader's own is back after it, an
    error inside included."""
    import nbgrader.api

    from autograder.publish.gradebook import nbgrader_api, open_gradebook

    theirs = nbgrader.api.get_alembic_version
    with nbgrader_api() as api:
        assert api.get_alembic_version is not theirs
    assert nbgrader.api.get_alembic_version is theirs
    with pytest.raises(KeyError), open_gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        assert nbgrader.api.get_alembic_version is not theirs
        raise KeyError(gb.find_student("ada").id)
    assert nbgrader.api.get_alembic_version is theirs
    graded_class(out)  # write_gradebook: a new gradebook and the previous one read back
    assert nbgrader.api.get_alembic_version is theirs


def test_nbgrader_schema_is_the_one_the_gradebook_code_was_written_for(out: Path) -> None:
    """nbgrader's gradebook schema (the alembic head of the installed nbgrader, and the one it
    stamps in a gradebook) is `gradebook.NBGRADER_SCHEMA`: the tables this project fills and
    reads with its own SQL (gradebook, handgrading, export) are the ones it was written for."""
    from autograder.publish.gradebook import NBGRADER_SCHEMA, _alembic_head

    head = _alembic_head()
    assert head == NBGRADER_SCHEMA, (
        f"nbgrader's gradebook schema is now {head}, not {NBGRADER_SCHEMA}, the one "
        "autograder/publish/gradebook.py, handgrading.py and export.py were written for: read the "
        "new migrations in nbgrader/alembic/versions, check the tables and columns they use, "
        "then update gradebook.NBGRADER_SCHEMA (see the comment there)"
    )
    with closing(sqlite3.connect(out / "gradebook.db")) as db:
        stamped = db.execute("SELECT version_num FROM alembic_version").fetchall()
    assert stamped == [(NBGRADER_SCHEMA,)]


# ---- a real `grade` run's OUT -------------------------------------------------------------------


def _csv_rows(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    return {(r["student"], r["notebook"]): r for r in csv.DictReader(io.StringIO(path.read_text()))}


def _regrade_week_one(
    out: Path, submissions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`grade --assignment week1.txt` (01 only) into the same OUT: nothing left to grade."""
    from autograder.cli import main

    assignment = tmp_path / "week1.txt"
    assignment.write_text("# week 1: the uniform average\n01\n")
    capsys.readouterr()
    argv = ["grade", str(submissions), "--out", str(out), "--no-jail", "--assignment"]
    assert main([*argv, str(assignment)]) == 0
    printed = capsys.readouterr().out
    assert "resuming: 2 notebooks already graded" in printed, printed
    assert {n for _, n in _csv_rows(out / "grades.csv")} == {NB01}, "only 01 in this run"


@pytest.mark.slow
def test_a_graded_class_through_formgrader_to_export_and_a_regrade(
    course: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    klass = real.graded_class()
    out = tmp_path / "out"
    shutil.copytree(klass.out, out, symlinks=True)
    cells = _csv_rows(out / "grades.csv")
    assert cells[PARTIAL, NB02]["status"] == "unanswered" and cells[WRONG, NB02]["status"] == "ok"
    formgrade.prepare(out)
    submissions = {s["student"]: s for s in formgrader_api(course).get_submissions(ASSIGNMENT)}
    assert submissions[WRONG]["needs_manual_grade"], "a written answer waits for hand grading"
    assert not submissions[PARTIAL]["needs_manual_grade"], "the release's stub is no answer: 0"
    finals = by_student(export.collect(out), NB02)
    assert finals[WRONG].waiting == [WRITTEN] and finals[WRONG].autograded > 0
    assert (finals[PARTIAL].status, finals[PARTIAL].waiting) == ("unanswered", [])
    assert (finals[PARTIAL].score, finals[PARTIAL].hand_grading) == (0, "done")

    _grade_by_hand(out, WRONG, 1.0)
    _regrade_week_one(out, klass.submissions, tmp_path, capsys)
    assert cli.main(["export", str(out), "--format", "canvas"]) == 0
    final = _csv_rows(out / "final-grades.csv")
    wrong, partial = final[WRONG, NB02], final[PARTIAL, NB02]
    assert (wrong["manual"], wrong["hand_grading"], wrong["status"]) == ("1", "done", "ok")
    assert (partial["score"], partial["hand_grading"], partial["status"]) == (
        "0",
        "done",
        "unanswered",
    )
    assert final[WRONG, NB01]["status"] == "ok" and float(final[WRONG, NB01]["autograded"]) > 0
    canvas = list(csv.reader(io.StringIO((out / "canvas" / f"{NB02[:-6]}.csv").read_text())))
    by_login = {r[3]: r[5] for r in canvas[2:]}
    assert float(by_login[WRONG]) == float(wrong["score"]) == finals[WRONG].autograded + 1
    assert by_login[PARTIAL] == "0", "an unanswered notebook is a 0, not left out"
    assert STRIPPED not in by_login, "its written answer waits: left out, the platform keeps its"


# ---- the real thing: `make lab OUT=...`, formgrader's pages and API over HTTP ------------------


@dataclass
class Lab:
    process: subprocess.Popen
    url: str  # the address `make lab` printed, token included

    @property
    def base(self) -> str:
        return self.url.split("/lab?")[0]

    @property
    def token(self) -> str:
        return self.url.split("token=")[1]

    def call(self, path: str, method: str = "GET", body: dict | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(
            f"{self.base}/{path.lstrip('/')}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def json(self, path: str, method: str = "GET", body: dict | None = None):
        status, data = self.call(path, method, body)
        assert status == 200, (path, status, data[:500])
        return json.loads(data)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def make_lab(out: Path, course: Path, tmp_path: Path) -> Iterator[Lab]:
    """`make lab OUT=out PORT=<free>` with its own Jupyter dirs; the printed URL, up."""
    home = tmp_path / "home"
    env = dict(os.environ)
    for name, var in (
        ("config", "JUPYTER_CONFIG_DIR"),
        ("runtime", "JUPYTER_RUNTIME_DIR"),
        ("settings", "JUPYTERLAB_SETTINGS_DIR"),
        ("ws", "JUPYTERLAB_WORKSPACES_DIR"),
    ):
        (home / name).mkdir(parents=True)
        env[var] = str(home / name)
    log = (tmp_path / "lab.log").open("w+")
    process = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"OUT={out}", f"PORT={free_port()}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        url = ""
        deadline = time.monotonic() + 180
        while not url and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
            if "token=" in line:
                url = line.strip()
        log.seek(0)
        assert url.startswith("http://127.0.0.1:"), f"no URL printed:\n{log.read()[-3000:]}"
        lab = Lab(process, url)
        while time.monotonic() < deadline:
            try:
                if lab.call("api/status")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        yield lab
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


NOTIFICATION = "@jupyterlab/apputils-extension:notification"


def no_news_prompt(lab: Lab) -> None:
    """The lab asks no news question (an override), and nothing answers without the token."""
    status, body = lab.call(f"lab/api/settings/{NOTIFICATION}")
    assert status == 200, body[:300]
    settings = json.loads(body)
    assert not settings["settings"], "no user settings: what JupyterLab uses is the default"
    defaults = {k: v.get("default") for k, v in settings["schema"]["properties"].items()}
    assert defaults["fetchNews"] == "false", defaults  # "none" would ask the question
    assert defaults["checkForUpdates"] is False, defaults
    anonymous = urllib.request.Request(f"{lab.base}/api/status")
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(anonymous, timeout=10)


@pytest.mark.slow
def test_make_lab_formgrader_hand_grading_to_export(make_lab: Lab, out: Path) -> None:
    """The address `make lab OUT=...` prints opens the lab, formgrader grades, export reads it."""
    lab = make_lab
    assert lab.call("lab")[0] == 200
    no_news_prompt(lab)
    submitted = lab.json(f"formgrader/api/submitted_notebooks/{ASSIGNMENT}/{NOTEBOOKS[1][:-6]}")
    ids = {s["student"]: s["id"] for s in submitted}
    assert set(ids) == set(CLASS) and {s["needs_manual_grade"] for s in submitted} == {True, False}

    status, page = lab.call(f"formgrader/submissions/{ids['ada']}/")
    assert status == 200, page[:500]
    assert b"Each projection sees one token" in page and f'id="{WRITTEN}"'.encode() in page
    status, hostile = lab.call(f"formgrader/submissions/{ids['cy']}/")
    assert status == 200 and b"The weights do not depend on T." in hostile
    assert not ACTIVE.search(hostile), ACTIVE.search(hostile)

    grades = lab.json(f"formgrader/api/grades?submission_id={ids['ada']}")
    written = next(g for g in grades if g["name"] == WRITTEN)
    assert written["needs_manual_grade"] and written["auto_score"] is None
    saved = lab.json(f"formgrader/api/grade/{written['id']}", "PUT", {"manual_score": 1})
    assert saved["manual_score"] == 1 and not saved["needs_manual_grade"]

    assert cli.main(["export", str(out), "--format", "canvas"]) == 0
    rows = {
        (r["student"], r["notebook"]): r
        for r in csv.DictReader(io.StringIO((out / "final-grades.csv").read_text()))
    }
    ada = rows[("ada", NOTEBOOKS[1])]
    auto = sum(autograded_points(masters()[NOTEBOOKS[1]].nb).values())
    assert (float(ada["autograded"]), float(ada["manual"])) == (auto, 1.0)
    assert ada["hand_grading"] == "done" and float(ada["score"]) == auto + 1
    assert rows[("cy", NOTEBOOKS[1])]["hand_grading"] == f"waiting: {WRITTEN}"
    canvas = (out / "canvas" / f"{NOTEBOOKS[1][:-6]}.csv").read_text()
    by_login = {r[3]: r[5] for r in list(csv.reader(io.StringIO(canvas)))[2:]}
    assert float(by_login["ada"]) == auto + 1 and "cy" not in by_login, "cy still waits"


# ---- what a real class shows: the file graded, written answers recovered, hand grades back ----


@pytest.fixture
def real_out(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(real.graded_class().out, out, symlinks=True)
    return out


def _page(out: Path, student: str, notebook: str = NB02) -> str:
    text = (out / "feedback" / student / f"{notebook[:-6]}.html").read_text(encoding="utf-8")
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())


def _cells(out: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    rows = csv.DictReader(io.StringIO((out / "cells.csv").read_text()))
    return {(r["student"], r["notebook"], r["grade_id"]): r for r in rows}


def test_of_two_files_for_one_notebook_the_graded_one_is_named_everywhere(real_out: Path) -> None:
    """WRONG's folder holds the finished 02 and Colab's newer `Copy of ...` of the release: the
    finished one is graded, and the page, grades.csv and the report say which was left out."""
    row = _csv_rows(real_out / "grades.csv")[WRONG, NB02]
    assert row["note"] == f"graded {NB02}; left out {COPY}"
    assert float(row["score"]) == float(row["max_score"]) - float(row["manual_max"]) > 0
    page = _page(real_out, WRONG)
    n = len(answer_cells(masters()[NB02].nb))
    assert f"2 files could be {NB02}: graded {NB02} ({n} of {n} answers filled in)" in page
    assert f"left out {COPY} (0 of {n} answers filled in)" in page
    report = (real_out / "report.html").read_text()
    assert "Several files for one notebook" in report and f"<code>{COPY}</code>" in report


def test_a_written_answer_without_its_metadata_waits_for_hand_grading(
    real_out: Path, course: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _csv_rows(real_out / "grades.csv")[STRIPPED, NB02]["manual_state"] == "waiting"
    assert _cells(real_out)[STRIPPED, NB02, WRITTEN]["state"] == "waiting"
    assert f"{WRITTEN}: the written answer was found after its question" in _page(
        real_out, STRIPPED
    )
    capsys.readouterr()
    assert cli.main(["formgrade", str(real_out)]) == 0  # what `make lab OUT=...` runs and prints
    said = capsys.readouterr().out
    assert "2 written answers waiting) is under Nbgrader → Formgrader → Manual Grading" in said
    submissions = {s["student"]: s for s in formgrader_api(course).get_submissions(ASSIGNMENT)}
    assert submissions[STRIPPED]["needs_manual_grade"], "formgrader offers it"
    final = by_student(export.collect(real_out), NB02)[STRIPPED]
    assert final.waiting == [WRITTEN] and final.hand_grading == f"waiting: {WRITTEN}"


def _hand_grade(out: Path, student: str, cell: str, **values: object) -> None:
    """What formgrader saves: a score (the grade then no longer waits), a comment, extra credit."""
    from autograder.publish.gradebook import open_gradebook

    with open_gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        grade = gb.find_grade(cell, NB02[:-6], ASSIGNMENT, student)
        if "score" in values:
            grade.manual_score, grade.needs_manual_grade = values["score"], False
        grade.extra_credit = values.get("extra", grade.extra_credit)
        if "comment" in values:
            answer = cell.removeprefix("test-")
            gb.find_comment(answer, NB02[:-6], ASSIGNMENT, student).manual_comment = values[
                "comment"
            ]
        gb.db.commit()


@pytest.mark.slow
def test_hand_grades_flow_back_to_every_file_of_the_class(
    real_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hand grading in the gradebook, then `refresh`, the next `grade` run with the same OUT,
    and `export`: grades.csv, cells.csv, the report and the pages show points and comments."""
    from autograder.cli import main

    before = _csv_rows(real_out / "grades.csv")[WRONG, NB02]
    _hand_grade(real_out, WRONG, WRITTEN, score=0.5, comment="Say why the matrices\nare shared.")
    _hand_grade(real_out, STRIPPED, "test-affinities", extra=1.0, comment="Neat broadcasting.")
    capsys.readouterr()
    assert main(["refresh", str(real_out)]) == 0
    assert "2 notebooks; 2 feedback pages changed; 1 written answer still waiting" in (
        capsys.readouterr().out
    )

    def check(out: Path) -> None:
        rows = _csv_rows(out / "grades.csv")
        wrong, stripped = rows[WRONG, NB02], rows[STRIPPED, NB02]
        assert wrong["status"] == "ok", (wrong, (out / "grader.log").read_text()[-3000:])
        assert float(wrong["score"]) == float(before["score"]) + 0.5
        assert wrong["manual_state"] == "" and stripped["manual_state"] == "waiting"
        assert float(stripped["score"]) == float(before["score"]) + 1, "the extra credit counts"
        cell = _cells(out)[WRONG, NB02, WRITTEN]
        assert (cell["score"], cell["state"]) == ("0.5", "by hand")
        assert cell["comment"] == "Say why the matrices\nare shared."
        page = _page(out, WRONG)
        assert f"Score: {float(wrong['score']):g} / {float(wrong['max_score']):g}" in page
        assert "graded by your instructor" in page and "Say why the matrices are shared." in page
        assert "waiting for your instructor" not in page
        assert "Extra credit from your instructor: +1" in _page(out, STRIPPED)
        assert "Neat broadcasting." in _page(out, STRIPPED)
        assert "jp-Notebook" in (out / "feedback" / WRONG / f"{NB02[:-6]}.html").read_text(), (
            "the notebook under the summary is kept"
        )
        assert f">{float(wrong['score']):g}/{float(wrong['max_score']):g}<" in (
            (out / "report.html").read_text()
        )

    check(real_out)
    argv = ["grade", str(real.graded_class().submissions), "--out", str(real_out), "--no-jail"]
    assert main([*argv, "--notebooks", "01,02", "--quiet"]) == 0  # every notebook resumed
    check(real_out)
    _hand_grade(real_out, WRONG, WRITTEN, comment="Good: say why they are shared.")
    assert cli.main(["export", str(real_out)]) == 0
    assert "Good: say why they are shared." in _page(real_out, WRONG)
