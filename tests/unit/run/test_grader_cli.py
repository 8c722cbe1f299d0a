"""The command line's input handling, state files and the class outputs, without kernels."""

from __future__ import annotations

import copy
import csv
import html
import io
import json
import os
import re
import shutil
import stat
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_output

from autograder.checks.base import CellResult, Check
from autograder.cli import main
from autograder.intake.discover import class_root, discover, extract_zip
from autograder.model.course import InputError, load_masters, select_notebooks
from autograder.model.enums import Reason, Status
from autograder.model.grades import CellGrade, NotebookGrade
from autograder.model.settings import Limits, explain, fields
from autograder.publish.feedback import active_content, page, prepare_notebook
from autograder.publish.outdir import state_path
from autograder.publish.outputs import collect, neutral, write_outputs
from autograder.publish.state import StateStore
from autograder.run.grade import submission_key
from autograder.worker.task import Task
from examples.build import correct, course_notebooks, dump, release

FIRST = course_notebooks()[0]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["grade"], "required"),
        (["grade", "nowhere", "--out", "o"], "does not exist"),
        (["grade", "{file}", "--out", "o"], "not a .zip"),
        (["grade", "{dir}", "--out", "o", "--jobs", "0"], "must be positive"),
        (["grade", "{dir}", "--out", "o", "--timeout", "soon"], "expected a number"),
        (["grade", "{dir}", "--out", "{file}"], "not a folder"),
        (["grade", "{zip}", "--out", "o"], "not a readable zip"),
        (["grade", "{dir}", "--out", "o", "--no-jail"], "no student folders"),
        (["grade", "{dir}", "--out", "o", "--notebooks", "09"], "not a course notebook"),
        (
            ["grade", "{dir}", "--out", "o", "--jobs", "2", "--scheduler", "tcp://x:1"],
            "not allowed",
        ),
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
    assert err.strip().splitlines()[-1].startswith("python -m autograder grade: error:")


def test_no_command_prints_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2  # no command: the usage
    assert "grade" in capsys.readouterr().out


def test_limits_are_explained_one_by_one(capsys: pytest.CaptureFixture[str]) -> None:
    text = explain()
    for name, _, _ in fields():  # the run's limits and the groups' (jail.shm_bytes, ...)
        assert f"\n{name} = " in "\n" + text
    assert main(["grade", "--limits"]) == 0
    assert "zip_ratio" in capsys.readouterr().out


def test_notebooks_are_chosen_by_number_or_name(tmp_path: Path) -> None:
    assert (
        select_notebooks("01,02")
        == select_notebooks(f"2 {FIRST}\n")
        == tuple(course_notebooks()[:2])
    )
    assert select_notebooks("01, 3") == (FIRST, course_notebooks()[2])
    assert select_notebooks("# the first\n01  # due Monday\n") == (FIRST,)
    with pytest.raises(InputError):
        select_notebooks("# nothing\n")


def test_zip_extraction_never_leaves_the_target_and_refuses_bombs(tmp_path: Path) -> None:
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("class/alice/01.ipynb", "{}")
        zf.writestr("class/bob/01.ipynb", "{}")
        zf.writestr("class/bob/bomb.ipynb", b"0" * (8 * 2**20))
        zf.writestr("class/bob/notes.txt", "not extracted")
        zf.writestr("../escape.ipynb", "x")
        zf.writestr("/abs/escape.ipynb", "x")
        zf.writestr("class/../../up.ipynb", "x")
        link = zipfile.ZipInfo("class/alice/link.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    dest = tmp_path / "out" / "x"
    dest.mkdir(parents=True)
    warnings, refused = extract_zip(archive, dest, Limits(zip_ratio=100))
    assert sum("unsafe" in w for w in warnings) == 4
    assert not (tmp_path / "escape.ipynb").exists() and not (tmp_path / "out" / "up.ipynb").exists()
    assert not (dest / "class" / "alice" / "link.ipynb").exists()
    bomb = (dest / "class" / "bob" / "bomb.ipynb").resolve()
    assert "zip bomb" in refused[bomb] and bomb.stat().st_size == 0
    assert not (dest / "class" / "bob" / "notes.txt").exists()
    assert class_root(dest) == dest / "class"
    with pytest.raises(InputError):
        extract_zip(archive, dest, Limits(zip_bytes=100))


def test_a_zip_of_one_student_folder_is_a_class_of_one(tmp_path: Path) -> None:
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "01.ipynb").write_text("{}")
    assert class_root(tmp_path) == tmp_path


def graded(
    student: str, notebook: str, key: str, status: str, lose: dict[str, str]
) -> NotebookGrade:
    """A grade as a worker returns it, every check passed except the cells in `lose`."""
    master = load_masters()[notebook]
    cells = []
    for gid, points in master.graded.items():
        earned = 0.0 if gid in lose else points
        result = CellResult(gid, [Check("c", points, earned)], [lose[gid]] if gid in lose else [])
        cells.append(CellGrade.judged(result, points, gid))
    cells += [CellGrade(g, p, 0.0, None, g, True, "waiting") for g, p in master.manual.items()]
    return NotebookGrade(student, notebook, status, key=key, cells=cells)


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def write_class(tmp_path: Path) -> tuple[Path, Path, dict, list]:
    masters = load_masters()
    klass, out = tmp_path / "class", tmp_path / "out"
    for student in ("ann", "ben", "cid"):
        (klass / student).mkdir(parents=True)
    (klass / "ann" / FIRST).write_bytes(dump(correct(FIRST)))
    (klass / "ben" / FIRST).write_bytes(dump(release(FIRST)))
    return klass, out, masters, discover(klass, masters)


def keys_of(subs: list, masters: dict) -> dict[tuple[str, str], str]:
    return {
        (s.student, nb): submission_key(p.read_bytes(), masters[nb])
        for s in subs
        for nb, p in s.files.items()
    }


def test_grades_round_trip_through_json() -> None:
    grade = graded("ann", FIRST, "k", "timeout", {next(iter(load_masters()[FIRST].graded)): "x"})
    back = NotebookGrade.from_json(json.loads(json.dumps(grade.to_json())))
    assert back == grade and back.score == grade.score and back.max_score == grade.max_score
    with pytest.raises(ValueError):
        NotebookGrade("ann", FIRST, "great")


def test_states_are_authenticated_and_forgeries_regraded(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    key_file = tmp_path / ".state" / "key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    grade = graded("ann", FIRST, "k1", "ok", {})
    store.save(grade)
    assert store.load("ann", FIRST, "k1") == grade
    assert store.load("ann", FIRST, "k2") is None  # another submission: graded again
    path = state_path(tmp_path, "ann", FIRST)
    doc = json.loads(path.read_text())
    doc["grade"]["cells"][0]["score"] = 99.0  # an edit without the key
    path.write_text(json.dumps(doc))
    assert store.check("ann", FIRST, "k1") == (None, "its MAC does not verify")
    other = StateStore(tmp_path / "elsewhere")  # a MAC made with another key
    other.save(graded("ann", FIRST, "k1", "ok", {}))
    path.write_bytes(state_path(tmp_path / "elsewhere", "ann", FIRST).read_bytes())
    assert store.load("ann", FIRST, "k1") is None
    store.save(graded("ben", FIRST, "k1", "ok", {}))  # someone else's state under ann's name
    os.replace(state_path(tmp_path, "ben", FIRST), path)
    assert store.check("ann", FIRST, "k1") == (None, "it is another notebook's")
    assert StateStore(tmp_path).load("ben", FIRST) is None  # the key is kept, ben's moved


def test_outputs_from_states(tmp_path: Path) -> None:
    klass, out, masters, subs = write_class(tmp_path)
    gid = next(iter(masters[FIRST].graded))
    keys = keys_of(subs, masters)
    store = StateStore(out)
    store.save(graded("ann", FIRST, keys["ann", FIRST], "ok", {}))
    store.save(graded("ben", FIRST, keys["ben", FIRST], "timeout", {gid: "loop-exclusive"}))
    write_outputs(out, collect(subs, masters, store, keys), masters)

    grades = read_csv(out / "grades.csv")
    assert list(grades[0])[:5] == ["student", "notebook", "score", "max_score", "status"]
    assert len(grades) == 3 * len(masters)
    by = {(r["student"], r["notebook"]): r for r in grades}
    assert by["ann", FIRST]["status"] == "ok"
    assert float(by["ann", FIRST]["score"]) == sum(masters[FIRST].graded.values())
    assert float(by["ann", FIRST]["max_score"]) == masters[FIRST].max_score
    assert by["ben", FIRST]["status"] == "timeout"
    assert all(by["cid", nb]["status"] == "missing" for nb in masters)
    assert read_csv(out / "diagnoses.csv") == [
        {"student": "ben", "notebook": FIRST, "grade_id": gid, "mistake": "loop-exclusive"}
    ]
    cells = read_csv(out / "cells.csv")
    per_student = sum(len(m.graded) + len(m.manual) for m in masters.values())
    assert len(cells) == 3 * per_student
    for name in ("scores.png", "pass_rates.png", "mistakes.png"):
        assert (out / "report" / name).read_bytes()[:4] == b"\x89PNG"
    report = (out / "report.html").read_text()
    assert "loop-exclusive" in report and report.count('src="data:image/png;base64,') == 3
    assert report.count("Pass rate per graded cell") == 0 and "1 of 2 who handed it in" in report
    assert (out / "feedback" / "cid" / f"{Path(FIRST).stem}.html").is_file()
    gradebook(out, masters, gid)


def test_refresh_brings_hand_grading_into_the_class_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Points that replace an autograded cell's and a comment, saved in the gradebook as
    formgrader saves them, reach grades.csv, cells.csv, the report and the page with `refresh`."""
    from autograder.model.contract import ASSIGNMENT, test_cell_id
    from autograder.publish.feedback import summary_page
    from autograder.publish.gradebook import open_gradebook
    from autograder.publish.outdir import feedback_path
    from autograder.publish.state import atomic_write

    klass, out, masters, subs = write_class(tmp_path)
    keys = keys_of(subs, masters)
    store = StateStore(out)
    ann = graded("ann", FIRST, keys["ann", FIRST], "ok", {})
    store.save(ann)
    store.save(graded("ben", FIRST, keys["ben", FIRST], "ok", {}))
    atomic_write(feedback_path(out, "ann", FIRST), summary_page(ann))  # as a worker leaves it
    write_outputs(out, collect(subs, masters, store, keys), masters)
    gid, points = next(iter(masters[FIRST].graded.items()))
    with open_gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        grade = gb.find_grade(test_cell_id(gid), FIRST[:-6], ASSIGNMENT, "ann")
        grade.manual_score, grade.needs_manual_grade = points - 1, False
        gb.find_comment(gid, FIRST[:-6], ASSIGNMENT, "ann").manual_comment = "=1+1 off by one"
        gb.db.commit()
    capsys.readouterr()
    assert main(["refresh", str(out)]) == 0
    assert "hand grading of 1 notebook; 1 feedback page changed" in capsys.readouterr().out
    by = {(r["student"], r["notebook"]): r for r in read_csv(out / "grades.csv")}
    assert float(by["ann", FIRST]["score"]) == sum(masters[FIRST].graded.values()) - 1
    assert float(by["ben", FIRST]["score"]) == sum(masters[FIRST].graded.values())
    cell = next(r for r in read_csv(out / "cells.csv") if r["student"] == "ann")
    assert (cell["grade_id"], cell["state"], cell["comment"]) == (
        gid,
        "by hand",
        "'=1+1 off by one",
    )
    page = " ".join(re.sub(r"<[^>]+>", " ", feedback_path(out, "ann", FIRST).read_text()).split())
    assert f"graded by your instructor · the grader gave {points:g} / {points:g}" in page
    assert "=1+1 off by one" in page and f"{points - 1:g} / {points:g}" in page
    assert main(["refresh", str(tmp_path / "nothing")]) == 2
    assert "holds no class graded by this grader" in capsys.readouterr().err


def gradebook(out: Path, masters: dict, gid: str) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}", course_id="self-attention") as gb:
        assert {s.id for s in gb.students} == {"ann", "ben", "cid"}
        name = Path(FIRST).stem
        ann = gb.find_submission_notebook(name, "self-attention", "ann")
        ben = gb.find_submission_notebook(name, "self-attention", "ben")
        full = sum(masters[FIRST].graded.values())
        assert ann.score == full and not ann.flagged
        assert ben.score == full - masters[FIRST].graded[gid] and ben.flagged


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def with_widgets(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """03 as its kernel leaves it: the explorer's view in the cell's output and the widgets'
    state in the notebook's metadata, in the shapes nbclient writes them."""
    nb = copy.deepcopy(nb)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "explorer(" in c.source)
    view = {"version_major": 2, "version_minor": 0, "model_id": "m1"}
    cell.outputs = [new_output("display_data", {"text/plain": "VBox(...)", WIDGET_VIEW: view})]
    model = {"model_name": "VBoxModel", "model_module": "@jupyter-widgets/controls", "state": {}}
    state = {"state": {"m1": model}, "version_major": 2, "version_minor": 0}
    nb.metadata["widgets"] = {WIDGET_STATE: state}
    return nb


def test_a_notebook_with_widgets_is_shown_without_any_script() -> None:
    notebook = "03_mask_then_softmax.ipynb"
    master = load_masters(notebooks=(notebook,))[notebook]
    grade = graded("ann", notebook, "k", "ok", {})
    text = page(grade, prepare_notebook(with_widgets(master.nb), {}))
    assert "not shown" not in text and 'class="rule"' in text, "the notebook must be shown"
    words = html.unescape(re.sub(r"<[^>]+>", "", text))
    assert "explorer(scores[0]" in words and "VBox(...)" in words
    assert "<script" not in text.lower() and not active_content(text)
    assert WIDGET_STATE not in text and WIDGET_VIEW not in text
    assert 'http-equiv="Content-Security-Policy"' in text


def test_the_report_counts_in_whole_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few students and mistakes: the count axes still tick 0, 1, 2, never 0.5."""
    from collections import Counter

    from autograder.publish import report

    ticks: dict[str, list[float]] = {}
    save = report._save

    def keep_ticks(fig, path: Path) -> None:
        fig.canvas.draw()
        ax = fig.axes[0]
        axis = ax.yaxis if path.name == "scores.png" else ax.xaxis
        ticks[path.name] = [float(t) for t in axis.get_ticklocs()]
        save(fig, path)

    monkeypatch.setattr(report, "_save", keep_ticks)
    numbers = report.ClassNumbers(
        totals={"ann": [3.0, 4.0, 5.0], "ben": [1.0, 4.0, 5.0]},
        mistakes=Counter({"loop-exclusive": 2, "swapped-qk": 1}),
    )
    report.figures(tmp_path, numbers)
    for name in ("scores.png", "mistakes.png"):
        assert ticks[name] and all(t.is_integer() for t in ticks[name]), (name, ticks[name])


def test_only_the_chosen_notebooks_count(tmp_path: Path) -> None:
    klass, out, _, _ = write_class(tmp_path)
    masters = load_masters(notebooks=(FIRST,))
    subs = discover(klass, masters)
    write_outputs(out, collect(subs, masters, StateStore(out), keys_of(subs, masters)), masters)
    assert {r["notebook"] for r in read_csv(out / "grades.csv")} == {FIRST}
    assert "3 students, 1 notebook" in " ".join((out / "report.html").read_text().split())


def test_a_class_of_one_reads_in_the_singular(tmp_path: Path) -> None:
    klass, out, _, _ = write_class(tmp_path)
    for student in ("ben", "cid"):
        shutil.rmtree(klass / student)
    masters = load_masters(notebooks=(FIRST,))
    subs = discover(klass, masters)
    write_outputs(out, collect(subs, masters, StateStore(out), keys_of(subs, masters)), masters)
    assert "1 student, 1 notebook counted" in " ".join((out / "report.html").read_text().split())


def test_spreadsheet_formulas_are_neutralised() -> None:
    for text in ('=HYPERLINK("x")', "+1", "-2", "@SUM(A1)", "\tx", "\rx"):
        assert neutral(text) == "'" + text
    assert neutral("ann") == "ann" and neutral(3.5) == "3.5"


def test_bundled_examples_are_up_to_date(tmp_path: Path) -> None:
    from autograder.model.paths import EXAMPLES
    from examples.build import write

    write(tmp_path / "fresh")

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    fresh, committed = files(tmp_path / "fresh"), files(EXAMPLES)
    stale = sorted(set(fresh) ^ set(committed) | {k for k in fresh if fresh[k] != committed.get(k)})
    assert not stale, f"run `python -m autograder examples`: stale {stale[:5]}"


def test_a_notebook_whose_time_is_spent_gets_the_summary_without_the_notebook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """README, Instructors 5: "`--timeout` bounds each notebook (kernel, probes and its
    feedback page together)". When the kernel and the probes leave too little of the budget to
    render the notebook, the student's page is the summary alone and says why; with time left
    it shows the notebook. The pipeline's own path, with the kernel and the probes faked."""
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from autograder.publish.feedback import summary_page
    from autograder.worker import pipeline

    masters = load_masters(notebooks=(FIRST,))
    master = masters[FIRST]

    class FakeJudge:  # every code cell judged at once: zeros, the page needs only a result
        def __init__(self, *args: object) -> None:
            self.notes: list[str] = []
            self.out_of_memory: list[str] = []

        def all(self, code_answers: dict[str, str | None]) -> dict:
            return pipeline._zeros(master, Reason.GRADER_ERROR, "judged by a fake")

    def execute(nb: nbformat.NotebookNode, **kwargs: object) -> SimpleNamespace:
        return SimpleNamespace(status=Status.OK, detail="", notebook=nb, seconds=0.0, waited=0.0)

    monkeypatch.setattr(pipeline, "Judge", FakeJudge)
    limits = Limits(timeout=60.0)
    scorer = ThreadPoolExecutor(1)
    runtime = SimpleNamespace(
        limits=limits, masters=masters, sandbox=None, scorer=scorer, jailed=True,
        runner=SimpleNamespace(execute=execute),
    )  # fmt: skip
    task = Task("alice", FIRST, FIRST, dump(correct(FIRST)), "key", master.key)
    words = "The notebook itself is not shown: grading used up its time."
    shown = next(  # a sentence of the notebook's own text, found only where it is shown
        line
        for c in master.nb.cells
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if re.fullmatch(r"[A-Za-z ,]{30,}", line)
    )
    try:
        spent = pipeline._grade(task, runtime, time.monotonic() - limits.timeout)
        left = pipeline._grade(task, runtime, time.monotonic())
    finally:
        scorer.shutdown()
    assert words in spent.grade.notes and html.escape(words) in spent.feedback
    assert spent.feedback == summary_page(spent.grade)
    assert shown not in spent.feedback
    assert words not in left.grade.notes and html.escape(words) not in left.feedback
    assert shown in left.feedback, "with time left the page shows the notebook"
