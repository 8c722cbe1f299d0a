"""Final grades and the gradebook-import CSVs of Canvas and Moodle.

The platforms' column rules, as their import code and documentation state them:
- Canvas (Grades > Import): the columns Student, ID, SIS User ID, SIS Login ID, Section come
  first; a student is matched on one of the id columns; every further column is an
  assignment (a new name creates one); an optional "Points Possible" row follows the header;
  a score is a number, an empty cell leaves the grade as it is.
- Moodle (Grades > Import > CSV file): a header row of distinct names; one column is mapped
  to a user field (username, ID number or email) and may not be empty in any row (an unknown
  or empty user aborts the whole import); a grade is a number, or empty / "-" for no grade;
  lines with a single field are skipped.
Neither reads a blank as "keep": Canvas removes a score where the file has a blank, Moodle
clears an existing grade (and stores 0 in a grade item the import creates). The export writes
one file per notebook and leaves out the students whose grade for it is not known.
"""

from __future__ import annotations

import argparse
import csv
import io
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from autograder import cli
from autograder.publish import export
from tests.e2e.test_hand_grading import CLASS, NOTEBOOKS, WRITTEN, graded_class


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _is_grade(cell: str, blank: tuple[str, ...] = ("",)) -> bool:
    if cell in blank:
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def canvas_problems(text: str, id_column: str) -> list[str]:
    rows = _rows(text)
    header = rows[0]
    problems = []
    if tuple(header[:5]) != export.CANVAS_FIXED:
        problems.append(f"first columns {header[:5]}")
    assignments = header[5:]
    if not assignments or len(set(assignments)) != len(assignments) or "" in assignments:
        problems.append(f"assignment columns {assignments}")
    body = rows[1:]
    if body and body[0][0].strip() == "Points Possible":
        if not all(_is_grade(c, ()) for c in body[0][5:]):
            problems.append(f"points possible {body[0]}")
        body = body[1:]
    col = header.index(id_column)
    ids = [r[col] for r in body]
    if any(not i for i in ids) or len(set(ids)) != len(ids):
        problems.append(f"student ids {ids}")
    problems += [f"row {r}" for r in body if len(r) != len(header)]
    problems += [f"grade {c!r}" for r in body for c in r[5:] if not _is_grade(c)]
    return problems


def moodle_problems(text: str) -> list[str]:
    rows = [r for r in _rows(text) if len(r) > 1]
    header = [h.strip() for h in rows[0]]
    problems = []
    if len(set(header)) != len(header) or "" in header:
        problems.append(f"header {header}")
    ids = [r[0].strip() for r in rows[1:]]
    if any(not i for i in ids) or len(set(ids)) != len(ids):
        problems.append(f"user ids {ids}")
    problems += [f"row {r}" for r in rows[1:] if len(r) != len(header)]
    problems += [f"grade {c!r}" for r in rows[1:] for c in r[1:] if not _is_grade(c, ("", "-"))]
    return problems


def test_the_rule_checkers_reject_broken_files() -> None:
    good = "Student,ID,SIS User ID,SIS Login ID,Section,a\nPoints Possible,,,,,5\nx,,,x1,,4\n"
    assert canvas_problems(good, "SIS Login ID") == []
    assert canvas_problems(good.replace("x1", ""), "SIS Login ID")
    assert canvas_problems(good.replace(",4", ",four"), "SIS Login ID")
    assert canvas_problems(good.replace("Student,ID", "Name,ID"), "SIS Login ID")
    assert moodle_problems("Username,a\nx,4\n") == []
    assert moodle_problems("Username,a\n,4\n") and moodle_problems("Username,a\nx,A+\n")
    assert moodle_problems("Username,a,a\nx,4,4\n")


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("class") / "out"
    graded_class(target)
    return target


def finals(out: Path) -> list[export.Final]:
    return export.collect(out)


def test_final_grades_have_autograded_and_manual_side_by_side(out: Path) -> None:
    assert cli.main(["export", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO((out / "final-grades.csv").read_text())))
    assert len(rows) == len(CLASS) * len(NOTEBOOKS)
    for row in rows:
        total = float(row["autograded"]) + float(row["manual"]) + float(row["extra_credit"])
        assert float(row["score"]) == pytest.approx(total)
        assert float(row["max_score"]) == float(row["autograded_max"]) + float(row["manual_max"])
    nb02 = {r["student"]: r for r in rows if r["notebook"] == NOTEBOOKS[1]}
    assert nb02["ada"]["hand_grading"] == f"waiting: {WRITTEN}"
    assert float(nb02["ada"]["manual_max"]) > 0 and nb02["ada"]["status"] == "ok"
    nb01 = {r["student"]: r for r in rows if r["notebook"] == NOTEBOOKS[0]}
    assert nb01["ada"]["hand_grading"] == "none" and nb01["bob"]["status"] == "missing"


def notebook_file(text: str) -> dict[str, str]:
    """A one-notebook import file: platform id (last id column for Canvas) -> grade."""
    rows = _rows(text)
    if rows[0][: len(export.CANVAS_FIXED)] == list(export.CANVAS_FIXED):
        filled = [c for c in export.CANVAS_IDS if any(r[rows[0].index(c)] for r in rows[2:])]
        column = rows[0].index(filled[0]) if filled else 1
        return {r[column]: r[-1] for r in rows[2:]}
    return {r[0]: r[1] for r in rows[1:]}


@pytest.mark.parametrize("id_column", export.CANVAS_IDS)
def test_canvas_import_files_follow_canvas_column_rules(out: Path, id_column: str) -> None:
    result = export.platform_files(finals(out), export.Platform("canvas", id_column))
    assert set(result.files) == {nb.removesuffix(".ipynb") for nb in NOTEBOOKS}
    maxima = {Path(f.notebook).stem: f.max_score for f in finals(out)}
    for notebook, text in result.files.items():
        assert canvas_problems(text, id_column) == []
        rows = _rows(text)
        assert rows[0][5:] == [notebook] and float(rows[1][5]) == maxima[notebook]
        others = [c for c in export.CANVAS_IDS if c != id_column]
        assert all(r[rows[0].index(c)] == "" for r in rows[2:] for c in others)


def test_no_platform_file_holds_a_blank_a_grade_not_known_is_left_out(out: Path) -> None:
    """Canvas removes a score where the file has a blank, Moodle clears it (or stores 0 in a
    new grade item): a student whose grade is not final is not in that notebook's file."""
    for kind, column in (("canvas", "SIS Login ID"), ("moodle", "username")):
        result = export.platform_files(finals(out), export.Platform(kind, column))
        grades = {nb: notebook_file(text) for nb, text in result.files.items()}
        nb01, nb02 = (nb.removesuffix(".ipynb") for nb in NOTEBOOKS)
        assert all(v != "" and v.strip() != "-" for g in grades.values() for v in g.values())
        assert "ada" not in grades[nb02], "02 waits for hand grading: left out, not blank"
        assert "bob" not in grades[nb01], "01 not handed in: left out unless --missing-zero"
        assert set(grades[nb01]) == {"ada", "cy"} and set(grades[nb02]) == {"bob"}
        waiting = [f"{s} (hand grading not done)" for s in ("ada", "cy")]
        assert result.left_out[nb02] == waiting
        assert result.left_out[nb01] == ["bob (not handed in)"]


def test_partial_and_missing_zero(out: Path) -> None:
    p = export.Platform("canvas", "SIS Login ID", partial=True, missing_zero=True)
    files = export.platform_files(finals(out), p).files
    ada = {f.notebook: f for f in finals(out) if f.student == "ada"}
    nb01, nb02 = (nb.removesuffix(".ipynb") for nb in NOTEBOOKS)
    assert float(notebook_file(files[nb02])["ada"]) == ada[NOTEBOOKS[1]].autograded
    assert notebook_file(files[nb01])["bob"] == "0"


@pytest.mark.parametrize("id_column", list(export.MOODLE_IDS))
def test_moodle_import_files_follow_moodle_column_rules(
    out: Path, tmp_path: Path, id_column: str
) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "student,name,email,idnumber,username\n"
        + "".join(
            f"{s},{s.title()} X,{s}@uni.example,{1000 + i},{s}.x\n" for i, s in enumerate(CLASS)
        )
    )
    source = {"username": "username", "idnumber": "idnumber", "email": "email"}[id_column]
    p = export.Platform("moodle", id_column, export.read_roster(roster), id_from=source)
    result = export.platform_files(finals(out), p)
    nb01 = NOTEBOOKS[0].removesuffix(".ipynb")
    for notebook, text in result.files.items():
        assert moodle_problems(text) == []
        assert _rows(text)[0] == [export.MOODLE_IDS[id_column], notebook]
    expected = {"username": "ada.x", "idnumber": "1000", "email": "ada@uni.example"}[id_column]
    assert expected in notebook_file(result.files[nb01])


def test_moodle_grades_fit_the_grade_item_maximum_or_are_percentages(out: Path) -> None:
    """A grade item the import creates has a maximum of 100 and Moodle refuses a grade above
    it: points need the item's maximum set to the notebook's, percentages fit 100."""
    fs = {(f.student, Path(f.notebook).stem): f for f in finals(out)}
    points = export.platform_files(finals(out), export.Platform("moodle", "username"))
    percent = export.platform_files(
        finals(out), export.Platform("moodle", "username", percent=True)
    )
    for notebook, text in percent.files.items():
        for student, value in notebook_file(text).items():
            f = fs[student, notebook]
            assert float(value) == pytest.approx(100 * f.score / f.max_score, abs=0.01)
            assert 0 <= float(value) <= 100
            assert float(notebook_file(points.files[notebook])[student]) == f.score
    assert points.maxima == {nb: fs["ada", nb].max_score for nb in points.maxima}


def test_students_missing_from_the_roster_or_with_formula_ids_are_left_out(
    out: Path, tmp_path: Path
) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("student,login\nada,=cmd|' /C calc'!A0\nbob,bob1\n")
    p = export.Platform("moodle", "username", export.read_roster(roster), id_from="login")
    result = export.platform_files(finals(out), p)
    ids = {pid for text in result.files.values() for pid in notebook_file(text)}
    assert ids == {"bob1"}
    assert any(w.startswith("cy:") and "roster" in w for w in result.warnings)
    assert any(w.startswith("ada:") and "formula" in w for w in result.warnings)


def test_roster_ids_are_compared_in_unicode_nfc_and_shared_ids_are_left_out(
    out: Path, tmp_path: Path
) -> None:
    """A folder named on macOS (NFD) is the roster's name (NFC); a roster that gives two
    students one login (case ignored, as Moodle's user names) leaves both out."""
    nfd = unicodedata.normalize("NFD", "Zoé")
    roster = tmp_path / "roster.csv"
    roster.write_text("student,login\nZoé,zoe\nADA,ada1\nbob,Ada1\n", encoding="utf-8")
    matched, notes = export.match_roster(export.read_roster(roster), [nfd, "ada", "bob"])
    assert matched[nfd]["login"] == "zoe" and matched["ada"]["login"] == "ada1"
    assert notes == ["ada: matched the roster's 'ADA' ignoring case"]
    p = export.Platform("moodle", "username", matched, id_from="login")
    result = export.platform_files(finals(out), p)
    ids = {pid for text in result.files.values() for pid in notebook_file(text)}
    assert not ids & {"ada1", "Ada1"}
    assert any("one username for several students" in w for w in result.warnings)


def test_cli_writes_one_file_per_notebook_and_says_what_to_set(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["export", str(out), "--format", "moodle", "--id-column", "SIS Login ID"]) == 2
    assert "--id-column" in capsys.readouterr().err
    assert cli.main(["export", str(out), "--format", "canvas", "--percent"]) == 2
    assert cli.main(["export", str(out), "--format", "moodle"]) == 0
    said = capsys.readouterr()
    nb01 = NOTEBOOKS[0].removesuffix(".ipynb")
    maximum = next(f.max_score for f in finals(out) if f.notebook == NOTEBOOKS[0])
    assert f"moodle/{nb01}.csv: 2 students" in said.out
    assert f"needs a maximum grade of {maximum:g}" in said.out
    assert "left out, the platform keeps what it has: bob (not handed in)" in said.err
    assert (
        not (out / "moodle.csv").exists()
        and moodle_problems((out / "moodle" / f"{nb01}.csv").read_text()) == []
    )
    assert cli.main(["export", str(out), "--format", "canvas", "--id-column", "ID"]) == 0
    assert canvas_problems((out / "canvas" / f"{nb01}.csv").read_text(), "ID") == []
    assert cli.main(["export", str(out / "nowhere")]) == 2


def test_the_formats_are_the_registered_platforms() -> None:
    assert set(export.PLATFORMS) == {"canvas", "moodle"}
    p = argparse.ArgumentParser()
    export.add_arguments(p)
    action = next(a for a in p._actions if a.dest == "format")
    assert list(action.choices) == sorted(export.PLATFORMS)
    canvas = export.Platform("canvas", "ID")
    assert type(canvas) is export.Canvas and canvas.name == "canvas"
    assert type(export.Platform("moodle", "email", percent=True)) is export.Moodle
    with pytest.raises(ValueError, match="no platform 'blackboard'"):
        export.Platform("blackboard", "ID")
    with pytest.raises(ValueError, match="not 'moodle'"):
        export.Canvas("moodle", "ID")


def test_a_new_platform_is_one_class(
    out: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Registered with @platform: --format takes it, its header and rows make the file, its
    note is printed, and the shared rules (who is left out, formula ids) hold for it too."""
    monkeypatch.setattr(export, "PLATFORMS", dict(export.PLATFORMS))

    @export.platform("plain")
    @dataclass(frozen=True)
    class Plain(export.Platform):
        id_columns: ClassVar[tuple[str, ...]] = ("login",)

        def header(self, notebook: str, maximum: float) -> list[list[str]]:
            return [["login", "name", notebook], ["#max", "", export.number(maximum)]]

        def row(self, pid: str, name: str, value: str) -> list[str]:
            return [pid, name, value]

        def maximum_note(self, maximum: float) -> str:
            return f"out of {export.number(maximum)}"

    assert cli.main(["export", str(out), "--format", "plain"]) == 0
    said = capsys.readouterr().out
    nb01 = NOTEBOOKS[0].removesuffix(".ipynb")
    rows = _rows((out / "plain" / f"{nb01}.csv").read_text())
    maximum = next(f.max_score for f in finals(out) if f.notebook == NOTEBOOKS[0])
    assert rows[0] == ["login", "name", nb01] and rows[1] == ["#max", "", f"{maximum:g}"]
    known = {f.student for f in finals(out) if f.notebook == NOTEBOOKS[0]} - {"bob"}
    assert {r[0] for r in rows[2:]} == known, "bob's notebook is missing: left out"
    assert f"plain/{nb01}.csv: {len(known)} students, matched on login; out of" in said
    assert cli.main(["export", str(out), "--format", "plain", "--id-column", "ID"]) == 2


def test_one_formula_guard_for_every_csv() -> None:
    """final-grades.csv, the import files and outputs.py's CSVs share autograder/publish/csvs.py."""
    from autograder.publish import csvs, outputs

    assert outputs.neutral is csvs.neutral and export.neutral is csvs.neutral
    for start in csvs.FORMULA_STARTS:
        student = f"{start}SUM(A1)"
        text = export.final_grades_csv([export.Final(student, "01_a.ipynb", "ok")])
        assert text.split("\n")[1].startswith(f"'{student},")
        canvas = export.Platform("canvas", "SIS Login ID")
        assert canvas.row("id", student, "1")[0] == "'" + student
    assert csvs.neutral("ada") == "ada" and csvs.neutral(-1.5) == "'-1.5"
