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
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from autograder import export
from tests.test_hand_grading import CLASS, NOTEBOOKS, WRITTEN, graded_class


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
    assert export.main([str(out)]) == 0
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


@pytest.mark.parametrize("id_column", export.CANVAS_IDS)
def test_canvas_import_file_follows_canvas_column_rules(out: Path, id_column: str) -> None:
    text, warnings = export.platform_csv(finals(out), export.Platform("canvas", id_column))
    assert canvas_problems(text, id_column) == []
    rows = _rows(text)
    assert rows[0][5:] == [nb.removesuffix(".ipynb") for nb in NOTEBOOKS]
    maxima = {f.notebook: f.max_score for f in finals(out)}
    assert [float(x) for x in rows[1][5:]] == [maxima[nb] for nb in NOTEBOOKS]
    by_id = {r[rows[0].index(id_column)]: r for r in rows[2:]}
    assert set(by_id) == set(CLASS)
    others = [c for c in export.CANVAS_IDS if c != id_column]
    assert all(r[rows[0].index(c)] == "" for r in rows[2:] for c in others)
    assert by_id["ada"][6] == "", "02 waits for hand grading: left blank"
    assert by_id["bob"][5] == "", "01 not handed in: blank unless --missing-zero"
    assert any("ada" in w and "hand grading" in w for w in warnings)


def test_partial_and_missing_zero(out: Path) -> None:
    p = export.Platform("canvas", "SIS Login ID", partial=True, missing_zero=True)
    text, _ = export.platform_csv(finals(out), p)
    assert canvas_problems(text, "SIS Login ID") == []
    by_id = {r[3]: r for r in _rows(text)[2:]}
    ada = {f.notebook: f for f in finals(out) if f.student == "ada"}
    assert float(by_id["ada"][6]) == ada[NOTEBOOKS[1]].autograded
    assert by_id["bob"][5] == "0"


@pytest.mark.parametrize("id_column", list(export.MOODLE_IDS))
def test_moodle_import_file_follows_moodle_column_rules(
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
    text, warnings = export.platform_csv(finals(out), p)
    assert moodle_problems(text) == []
    rows = _rows(text)
    assert rows[0] == [
        export.MOODLE_IDS[id_column],
        *(nb.removesuffix(".ipynb") for nb in NOTEBOOKS),
    ]
    expected = {"username": "ada.x", "idnumber": "1000", "email": "ada@uni.example"}[id_column]
    assert expected in {r[0] for r in rows[1:]}


def test_students_missing_from_the_roster_or_with_formula_ids_are_left_out(
    out: Path, tmp_path: Path
) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("student,login\nada,=cmd|' /C calc'!A0\nbob,bob1\n")
    p = export.Platform("moodle", "username", export.read_roster(roster), id_from="login")
    text, warnings = export.platform_csv(finals(out), p)
    assert moodle_problems(text) == []
    assert [r[0] for r in _rows(text)[1:]] == ["bob1"]
    assert any(w.startswith("cy:") and "roster" in w for w in warnings)
    assert any(w.startswith("ada:") and "formula" in w for w in warnings)


def test_cli_writes_the_platform_file_and_checks_the_id_column(out: Path, capsys) -> None:
    assert export.main([str(out), "--format", "moodle", "--id-column", "SIS Login ID"]) == 2
    assert "--id-column" in capsys.readouterr().err
    assert export.main([str(out), "--format", "canvas", "--id-column", "ID"]) == 0
    assert canvas_problems((out / "canvas.csv").read_text(), "ID") == []
    assert export.main([str(out / "nowhere")]) == 2
