"""The command line's input handling and the class outputs, without kernels."""

from __future__ import annotations

import csv
import io
import json
import stat
import zipfile
from pathlib import Path

import pytest

from autograder.cli import class_root, extract_zip, main
from autograder.grade import discover, load_masters, state_path, write_outputs
from tests.corpus import hostile


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "required"),
        (["nowhere", "--out", "o"], "does not exist"),
        (["{file}", "--out", "o"], "not a .zip"),
        (["{dir}", "--out", "o", "--jobs", "0"], "must be positive"),
        (["{dir}", "--out", "o", "--timeout", "soon"], "expected a number"),
        (["{dir}", "--out", "{file}"], "not a folder"),
        (["{zip}", "--out", "o"], "not a readable zip"),
        (["{dir}", "--out", "o"], "no student folders"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "bad.zip").write_text("not a zip")
    (tmp_path / "empty").mkdir()
    names = {"file": tmp_path / "file.txt", "dir": tmp_path / "empty", "zip": tmp_path / "bad.zip"}
    argv = [a.format(**names) if "{" in a else a for a in argv]
    argv = [str(tmp_path / a) if a == "o" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_zip_extraction_never_leaves_the_target(tmp_path: Path) -> None:
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("class/alice/01.ipynb", "{}")
        zf.writestr("class/bob/01.ipynb", "{}")
        zf.writestr("../escape.txt", "x")
        zf.writestr("/abs/escape.txt", "x")
        zf.writestr("class/../../up.txt", "x")
        link = zipfile.ZipInfo("class/alice/link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    dest = tmp_path / "out" / "x"
    dest.mkdir(parents=True)
    warnings = extract_zip(archive, dest)
    assert len(warnings) == 4 and all("unsafe" in w for w in warnings)
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "out" / "up.txt").exists()
    assert not (dest / "class" / "alice" / "link").exists()
    assert class_root(dest) == dest / "class"
    assert [s.name for s in sorted((dest / "class").iterdir())] == ["alice", "bob"]


def test_a_zip_of_one_student_folder_is_a_class_of_one(tmp_path: Path) -> None:
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "01.ipynb").write_text("{}")
    assert class_root(tmp_path) == tmp_path


def fake_state(
    out: Path, student: str, notebook: str, sub, masters, status: str, lose: dict
) -> None:
    from autograder.grade import submission_key

    master = masters[notebook]
    cells = []
    for gid, points in master.graded.items():
        lost = gid in lose
        cells.append(
            {
                "grade_id": gid,
                "score": 0.0 if lost else points,
                "max_score": points,
                "mistakes": [lose[gid]] if lost else [],
                "anchor": gid,
                "result": {
                    "grade_id": gid,
                    "checks": [
                        {
                            "name": "c",
                            "points": points,
                            "earned": 0.0 if lost else points,
                            "detail": "",
                        }
                    ],
                    "mistakes": [lose[gid]] if lost else [],
                    "problem": "",
                },
            }
        )
    state = {
        "student": student,
        "notebook": notebook,
        "key": submission_key(sub.files[notebook], master),
        "status": status,
        "detail": "",
        "notes": [],
        "cells": cells,
        "score": sum(c["score"] for c in cells),
        "max_score": master.max_score,
    }
    path = state_path(out, student, notebook)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state))


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_outputs_from_states(tmp_path: Path) -> None:
    masters = load_masters()
    first = hostile.course_notebooks()[0]
    gid = next(iter(masters[first].graded))
    klass, out = tmp_path / "class", tmp_path / "out"
    for student in ("ann", "ben", "cid"):
        (klass / student).mkdir(parents=True)
    (klass / "ann" / first).write_bytes(hostile.dump(hostile.correct(first)))
    (klass / "ben" / first).write_bytes(hostile.dump(hostile.release(first)))
    subs = discover(klass, masters)
    fake_state(out, "ann", first, subs[0], masters, "ok", {})
    fake_state(out, "ben", first, subs[1], masters, "timeout", {gid: "loop-exclusive"})
    write_outputs(out, subs, masters)

    grades = read_csv(out / "grades.csv")
    assert len(grades) == 3 * len(masters)
    by = {(r["student"], r["notebook"]): r for r in grades}
    assert by[("ann", first)]["status"] == "ok"
    assert float(by[("ann", first)]["score"]) == masters[first].max_score
    assert by[("ben", first)]["status"] == "timeout"
    assert all(by[("cid", nb)]["status"] == "missing" for nb in masters)
    assert read_csv(out / "diagnoses.csv") == [
        {"student": "ben", "notebook": first, "grade_id": gid, "mistake": "loop-exclusive"}
    ]
    cells = read_csv(out / "cells.csv")
    assert len(cells) == 3 * sum(len(m.graded) for m in masters.values())
    for name in ("scores.png", "pass_rates.png", "mistakes.png"):
        assert (out / "report" / name).read_bytes()[:4] == b"\x89PNG"
    report = (out / "report.html").read_text()
    assert "loop-exclusive" in report and 'src="report/scores.png"' in report
    assert (out / "feedback" / "cid" / f"{Path(first).stem}.html").is_file()

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}", course_id="self-attention") as gb:
        assert {s.id for s in gb.students} == {"ann", "ben", "cid"}
        name = Path(first).stem
        ann = gb.find_submission_notebook(name, "self-attention", "ann")
        ben = gb.find_submission_notebook(name, "self-attention", "ben")
        assert ann.score == masters[first].max_score and not ann.flagged
        assert ben.score == masters[first].max_score - masters[first].graded[gid] and ben.flagged


def test_bundled_examples_are_up_to_date(tmp_path: Path) -> None:
    import importlib.util

    from autograder.paths import EXAMPLES, ROOT

    spec = importlib.util.spec_from_file_location(
        "make_examples", ROOT / "examples" / "make_examples.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write(tmp_path / "fresh")

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    fresh, committed = files(tmp_path / "fresh"), files(EXAMPLES)
    stale = sorted(set(fresh) ^ set(committed) | {k for k in fresh if fresh[k] != committed.get(k)})
    assert not stale, f"run `python examples/make_examples.py`: stale {stale[:5]}"
