"""The Gradescope autograder's parts without a kernel: the zip, its lock, results.json and the
schema written from Gradescope's specification (tests/e2e/test_gradescope_run.py runs the zip)."""

from __future__ import annotations

import json
import re
import stat
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from autograder import cli
from autograder.checks.base import CellResult, Check
from autograder.checks.catalog import describe
from autograder.gradescope import build
from autograder.gradescope.results import STUB, failure, results
from autograder.gradescope.schema import problems
from autograder.model.course import InputError
from autograder.model.enums import Reason
from autograder.model.grades import CellGrade, NotebookGrade, zero
from autograder.model.settings import LIMITS, Limits
from autograder.publish.wording import status_words

NB02 = "02_queries_and_keys.ipynb"


# ---- the schema can fail -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc, where",
    [
        ({"tests": [{"name": "a", "max_score": 1}]}, "(top)"),  # no score anywhere
        ({"score": 1, "tests": [{"status": "ok"}]}, "tests/0/status"),
        ({"score": 1, "visibility": "students"}, "visibility"),
        ({"score": 1, "tests": [{"max_score": -1}]}, "tests/0/max_score"),
        ({"score": 1, "tests": [{"outptu": "typo"}]}, "tests/0"),
        ({"score": "10"}, "score"),
        ({"score": 1, "leaderboard": [{"value": 3}]}, "leaderboard/0"),
    ],
)
def test_the_schema_refuses_what_the_specification_does_not_allow(doc: dict, where: str) -> None:
    found = problems(doc)
    assert found and any(line.startswith(where) for line in found), found


def test_the_schema_takes_the_specifications_own_shapes() -> None:
    assert problems({"score": 44.0, "execution_time": 136, "output": "x"}) == []
    every_test_scored = {"tests": [{"score": 2.0, "max_score": 2.0, "status": "passed"}]}
    assert problems(every_test_scored) == []
    assert problems(failure("a reason", 1.5)) == []


# ---- results.json from grades ------------------------------------------------------------------


def _cell(gid: str, points: float, ok: bool, mistake: str = "", detail: str = "") -> CellGrade:
    result = CellResult(gid, [Check("first check", points, points if ok else 0.0, detail)])
    if mistake:
        result.mistakes.append(mistake)
    return CellGrade.judged(result, points, gid)


def test_each_graded_cell_is_a_test_with_the_pages_words() -> None:
    grade = NotebookGrade("s", NB02, "ok", cells=[
        _cell("affinities", 3, False, "swapped-qk", "the scores are transposed"),
        _cell("param-count", 1, True),
        CellGrade("why-not-T", 1.0, manual=True, state="waiting"),
        CellGrade("other-words", 2.0, manual=True, state="unanswered"),
        CellGrade.judged(zero("shape-table", 4, Reason.UNANSWERED, "the stub"), 4, "x"),
    ])  # fmt: skip
    doc = results([grade], 12.34, "isolated somehow", "after_due_date")
    assert problems(doc) == []
    tests = {t["name"]: t for t in doc["tests"]}
    wrong = tests["02_queries_and_keys · affinities"]
    assert (wrong["score"], wrong["max_score"], wrong["status"]) == (0.0, 3.0, "failed")
    assert describe("swapped-qk", "affinities") in wrong["output"]
    assert (
        "the scores are transposed" in wrong["output"] and "failed · first check" in wrong["output"]
    )
    right = tests["02_queries_and_keys · param-count"]
    assert (right["score"], right["status"]) == (1.0, "passed")
    waiting = tests["02_queries_and_keys · why-not-T"]
    assert "score" not in waiting and "status" not in waiting and waiting["max_score"] == 1.0
    assert tests["02_queries_and_keys · other-words"]["score"] == 0.0
    assert STUB in tests["02_queries_and_keys · shape-table"]["output"]
    assert {t["visibility"] for t in doc["tests"]} == {"after_due_date"}
    assert [t["number"] for t in doc["tests"]] == ["02.1", "02.2", "02.3", "02.4", "02.5"]
    assert doc["score"] == grade.score == 1.0 and doc["execution_time"] == 12.3
    assert status_words(grade) in doc["output"] and "isolated somehow" in doc["output"]
    assert "3 more points are for written answers" in doc["output"]


# ---- the zip -----------------------------------------------------------------------------------


def test_the_lock_pins_the_cpu_torch_and_every_package_of_the_grader() -> None:
    locked = build.lock()
    pins = dict(line.split("==", 1) for line in locked.lines)
    assert all(re.fullmatch(r"[a-z0-9-]+==\S+", line) for line in locked.lines), locked.lines
    assert pins["torch"] == metadata.version("torch").split("+")[0] + "+cpu"
    for name in ("nbgrader", "nbclient", "distributed", "ipykernel", "numpy", "matplotlib"):
        assert pins[name] == metadata.version(name), name
    assert not [n for n in pins if n.startswith(("nvidia-", "triton"))]
    assert "rfc3987-syntax" not in pins and "pytest" not in pins and "ruff" not in pins
    assert "fqdn" in pins, "a package asked for through an extra (jsonschema[format-nongpl])"


def test_the_zip_holds_the_scripts_the_grader_and_only_the_chosen_masters(
    tmp_path: Path, capsys
) -> None:
    out = tmp_path / "autograder.zip"
    assert (
        cli.main(["gradescope", "--notebooks", "02", "--out", str(out), "--memory-mb", "1536"]) == 0
    )
    printed = capsys.readouterr().out
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        config = json.loads(zf.read("gradescope.json"))
        setup = zf.read("setup.sh").decode()
    for script in ("setup.sh", "run_autograder"):
        assert stat.S_ISREG(modes[script]) and modes[script] & 0o111, script
    assert {
        "requirements.lock",
        "autograder/gradescope/run.py",
        "attention_course/__init__.py",
    } <= names
    assert "autograder/checks/nb02.py" in names and "attention_course/plots.py" in names
    assert [n for n in names if n.startswith("solutions/")] == [f"solutions/{NB02}"]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith(("tests/", "examples/", "notebooks/"))]
    assert config["notebooks"] == [NB02] and config["limits"]["memory_mb"] == 1536
    advice = config["gradescope_settings"]
    assert advice == {"timeout_seconds": 300 + 120, "memory_mb": 2 * 1536 + 1024}
    assert "Ubuntu 22.04" in setup and "python3.11" in setup and "bubblewrap" in setup
    assert "memory at least 4.0 GB; timeout at least 420 s" in printed


def test_bad_choices_are_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert cli.main(["gradescope", "--notebooks", "09", "--out", str(tmp_path / "a.zip")]) == 2
    assert (
        cli.main(
            ["gradescope", "--notebooks", "02", "--out", str(tmp_path / "a.zip"), "--timeout", "0"]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("python -m autograder gradescope") for line in err)
    assert not (tmp_path / "a.zip").exists()


def test_a_notebook_that_trains_needs_the_data_set_in_the_zip(tmp_path: Path, monkeypatch) -> None:
    notebook = "06_experiments.ipynb"
    assert build.needs_data([notebook]) and not build.needs_data([NB02])
    monkeypatch.setattr(build, "data_file", lambda: None)
    with pytest.raises(InputError, match="tiny Shakespeare"):
        build.build([notebook], tmp_path / "a.zip", Limits())
    assert not (tmp_path / "a.zip").exists()


def test_the_readme_states_the_settings_the_command_prints() -> None:
    from autograder.model.paths import ROOT

    memory_mb = LIMITS.gradescope.memory_mb

    text = (ROOT / "README.md").read_text()
    section = " ".join(text.split("## Grading on Gradescope", 1)[1].split("\n## ", 1)[0].split())
    limits = Limits(memory_mb=memory_mb)
    one, seven = build.settings_advice(1, limits), build.settings_advice(7, limits)
    assert f"{one['timeout_seconds']} s for one notebook" in section
    assert f"{seven['timeout_seconds']:,} s for all seven" in section
    assert seven["timeout_seconds"] <= 40 * 60, "Gradescope's longest timeout"
    assert (
        f"{one['memory_mb'] // 1024} GB with the zip's default `--memory-mb {memory_mb}`" in section
    )
    assert f"`grade`'s {Limits().memory_mb}" in section
    assert f"{build.settings_advice(1, Limits())['memory_mb'] // 1024} GB" in section
    for command in ("make gradescope NOTEBOOKS=02", "-m autograder gradescope --notebooks 02"):
        assert command in section
    assert build.IMAGE in section and f"Python {build.PYTHON}" in section


def test_make_gradescope_runs_the_same_command() -> None:
    import subprocess

    from autograder.model.paths import ROOT

    dry = subprocess.run(
        ["make", "-n", "gradescope", "NOTEBOOKS=02"], cwd=ROOT, capture_output=True, text=True
    )
    assert dry.returncode == 0, dry.stderr
    command = " ".join(dry.stdout.replace("\\\n", " ").split())
    assert "-m autograder gradescope --notebooks 02 --out build/autograder.zip" in command


def test_processes_left_behind_are_killed_before_the_results(tmp_path: Path) -> None:
    """An orphan (a shell's background child whose shell is gone) comes back to the grader,
    a child subreaper, and `reap` kills it; the grader's resource tracker is not named."""
    import subprocess
    import sys

    script = (
        "import subprocess, time, psutil\n"
        "from autograder.gradescope.run import _become_subreaper, reap\n"
        "_become_subreaper()\n"
        "subprocess.run(['sh', '-c', 'sleep 300 & echo $! > pid'], check=True)\n"
        "pid = int(open('pid').read())\n"
        "assert psutil.Process(pid).ppid() == psutil.Process().pid, 'not re-parented here'\n"
        "names = reap()\n"
        "assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == 'zombie'\n"
        "print(names)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "sleep 300" in done.stdout


def test_the_readme_quotes_the_results_own_words_for_the_container() -> None:
    from autograder.gradescope.run import CONTAINED
    from autograder.model.paths import ROOT

    section = (ROOT / "README.md").read_text().split("## Grading on Gradescope", 1)[1]
    quoted = "without the grader's inner jail"
    assert quoted in CONTAINED and f'("{quoted}")' in " ".join(section.split())
