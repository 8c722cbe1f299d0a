"""Classes as the platforms hand them out, through the command line, without a kernel.

Sample downloads are laid out as each platform's own code names the files (see
autograder/intake/intake.py): Canvas's flat `<sortable name>_[LATE_]<user id>_<upload id>_<file>`,
Moodle's `<full name>_<participant id>_assignsubmission_file/<file>` folders (a name written
in NFD, as macOS writes file names) and flat files, nbgrader's `submitted/<student>/
<assignment>/` and its exchange's `inbound/<student>+<assignment>+<timestamp>/`. The
notebooks in them are the untouched release (graded `unanswered` without starting a kernel)
or not JSON (`invalid`), so the run is about reading the class: who is who, which file is
whose notebook, and which one of several is graded.
"""

from __future__ import annotations

import csv
import io
import unicodedata
import zipfile
from pathlib import Path

import pytest

from autograder import cli
from autograder.cli import main
from autograder.intake import intake
from autograder.intake.discover import read_class
from autograder.model.course import load_masters
from examples.build import dump, release

NB02 = "02_queries_and_keys.ipynb"
RELEASED = dump(release(NB02))
BROKEN = b"{ not a notebook"


def grade(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """`python -m autograder grade ...` in this process: (exit code, what it printed)."""
    capsys.readouterr()
    code = main(["grade", *argv, "--no-jail", "--notebooks", "02", "--quiet"])
    said = capsys.readouterr()
    return code, said.out + said.err


def grades(out: Path) -> dict[str, dict[str, str]]:
    return {r["student"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}


def write_zip(path: Path, members: dict[str, tuple[bytes, tuple[int, ...]]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, (data, when) in members.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=when), data)
    return path


DAY1, DAY2 = (2026, 3, 1, 9, 0, 0), (2026, 3, 2, 9, 0, 0)


@pytest.mark.slow  # the grade command: a worker starts
def test_a_canvas_download_is_read_by_user_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = write_zip(
        tmp_path / "submissions.zip",
        {
            f"martínzoé_101_5001_{NB02}": (RELEASED, DAY1),
            f"leeann_LATE_102_5003_{NB02}": (BROKEN, DAY1),
            "anon_Ab3xZ_5004_homework.ipynb": (RELEASED, DAY1),
            "notes.ipynb": (RELEASED, DAY1),
        },
    )
    out = tmp_path / "out"
    code, said = grade(capsys, str(archive), "--out", str(out))
    assert code == 0, said
    assert f"{archive} is laid out as Canvas's download" in said and "--pattern canvas" in said
    assert "notes.ipynb" in said and "not graded" in said
    assert ".submissions" not in said, "a message names a folder of OUT"
    rows = grades(out)
    assert {s: r["status"] for s, r in rows.items()} == {
        "101": "unanswered",
        "102": "invalid",
        "anon_Ab3xZ": "unanswered",
    }
    assert rows["anon_Ab3xZ"]["note"] == "graded anon_Ab3xZ_5004_homework.ipynb"
    assert cli.main(["export", str(out), "--format", "canvas", "--id-column", "ID"]) == 0
    imported = (out / "canvas" / f"{NB02[:-6]}.csv").read_text()
    assert {r[1] for r in csv.reader(io.StringIO(imported))} >= {"101", "102"}


@pytest.mark.slow  # the grade command: a worker starts
def test_a_moodle_download_is_read_by_full_name_in_nfc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zoe = unicodedata.normalize("NFD", "Zoé Martín")  # as a Mac writes the folder's name
    folder = f"{zoe}_1234567_assignsubmission_file"
    archive = write_zip(
        tmp_path / "course-assignment-42.zip",
        {
            f"{folder}/{NB02}": (RELEASED, DAY1),
            f"{folder}/sub/{NB02[:-6]} (1).ipynb": (RELEASED, DAY2),
            f"{folder}_onlinetext/onlinetext.html": (b"<p>hi</p>", DAY1),
            f"Ann Lee_2345678_assignsubmission_file/{NB02}": (BROKEN, DAY1),
        },
    )
    out = tmp_path / "out"
    code, said = grade(capsys, str(archive), "--out", str(out))
    assert code == 0, said
    assert "laid out as Moodle's download" in said
    assert "the same id in another Unicode form" in said and "'Zoé Martín'" in said
    assert "the same id in another Unicode form" in (out / "grader.log").read_text()
    rows = grades(out)
    assert set(rows) == {"Zoé Martín", "Ann Lee"} and rows["Ann Lee"]["status"] == "invalid"
    assert unicodedata.is_normalized("NFC", next(iter(rows)))
    copy = f"{folder}/sub/{NB02[:-6]} (1).ipynb"
    assert rows["Zoé Martín"]["note"] == f"graded {unicodedata.normalize('NFD', copy)}; " + (
        f"left out {folder}/{NB02}"
    ), "two untouched files: the newer one is graded, and grades.csv says which"
    roster = tmp_path / "roster.csv"
    roster.write_text("student,username\nZoé Martín,zmartin\nAnn Lee,alee\n", encoding="utf-8")
    argv = [str(out), "--format", "moodle", "--roster", str(roster), "--id-from", "username"]
    assert cli.main(["export", *argv]) == 0
    imported = (out / "moodle" / f"{NB02[:-6]}.csv").read_text()
    assert dict(csv.reader(io.StringIO(imported))) == {
        "Username": NB02[:-6],
        "zmartin": "0",
        "alee": "0",
    }


@pytest.mark.slow  # the grade command: a worker starts
def test_two_people_of_one_name_in_a_moodle_download_stop_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "download"
    for participant in ("111", "222"):
        (root / f"Sam Roe_{participant}_assignsubmission_file").mkdir(parents=True)
        (root / f"Sam Roe_{participant}_assignsubmission_file" / NB02).write_bytes(RELEASED)
    code, said = grade(capsys, str(root), "--out", str(tmp_path / "out"), "--pattern", "moodle")
    assert code == 2 and "share a name" in said and "--pattern moodle-id" in said
    code, said = grade(capsys, str(root), "--out", str(tmp_path / "o2"), "--pattern", "moodle-id")
    assert code == 0, said
    assert set(grades(tmp_path / "o2")) == {"Sam Roe_111", "Sam Roe_222"}


@pytest.mark.slow  # the grade command: a worker starts
def test_nbgrader_submitted_and_exchange_layouts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SUBMISSIONS holds nbgrader's `submitted/` and an exchange's `inbound/`: JupyterHub user
    names ignore case, and of two hand-ins the later timestamp is graded (both untouched)."""
    root = tmp_path / "course"
    (root / "submitted" / "alice" / "self-attention").mkdir(parents=True)
    (root / "submitted" / "alice" / "self-attention" / NB02).write_bytes(RELEASED)
    (root / "autograded" / "mallory" / "self-attention").mkdir(parents=True)
    (root / "autograded" / "mallory" / "self-attention" / NB02).write_bytes(RELEASED)
    for who, day in (("Bob", "01"), ("bob", "02")):
        hand_in = root / "inbound" / f"{who}+self-attention+2026-03-{day} 09:00:00.000000 UTC+ab"
        hand_in.mkdir(parents=True)
        (hand_in / NB02).write_bytes(RELEASED)
    (root / "inbound" / "bob+self-attention+2026-03-03 09:00:00.000000 UTC").mkdir()  # no file
    out = tmp_path / "out"
    code, said = grade(capsys, str(root), "--out", str(out))
    assert code == 0, said
    assert "laid out as nbgrader" in said and "the same id in another Unicode form or case" in said
    rows = grades(out)
    assert {s.casefold() for s in rows} == {"alice", "bob"}, "autograded/ is not a hand-in"
    bob = next(r for s, r in rows.items() if s.casefold() == "bob")
    assert bob["note"].startswith("graded inbound/bob+self-attention+2026-03-02")


def test_a_pattern_of_ones_own_and_bad_patterns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "flat"
    root.mkdir()
    (root / f"alice-{NB02}").write_bytes(RELEASED)
    (root / "bob-hw2.ipynb").write_bytes(RELEASED)
    pattern = intake.parse_pattern(r"(?P<student>[^/-]+)-(?P<file>[^/]+)")
    klass = read_class(root, load_masters(notebooks=(NB02,)), pattern=pattern)
    files = {s.student: s.files for s in klass.submissions}
    assert files == {"alice": {NB02: root / f"alice-{NB02}"}, "bob": {NB02: root / "bob-hw2.ipynb"}}
    for bad, words in (("(?P<student>.*)", "(?P<file>...)"), ("(?P<student", "not a regular")):
        code, said = grade(capsys, str(root), "--out", str(tmp_path / "o"), "--pattern", bad)
        assert code == 2 and words in said and "Traceback" not in said


def test_a_zip_without_students_is_named_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = write_zip(tmp_path / "empty.zip", {"readme.txt": (b"hello", DAY1)})
    code, said = grade(capsys, str(archive), "--out", str(tmp_path / "out"))
    assert code == 2 and f"{archive} holds no student folders" in said
    assert ".submissions" not in said
