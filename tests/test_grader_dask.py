"""Workers that die or differ. A class graded on a real Dask deployment (`dask scheduler` and
two `dask worker` processes on 127.0.0.1, random ports), one of them killed mid-class: every
student is graded exactly once, with the same scores as `--jobs 1` on this machine. A notebook
that kills its worker every time is `error`, and the class goes on. A worker with another
checkout grades nothing. (--no-jail throughout: the jail is not what this is about.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from autograder.examples import MISTAKES, with_mistakes
from tests.corpus import hostile

pytestmark = pytest.mark.slow
NOTEBOOK = hostile.course_notebooks()[0]
DASK = Path(sys.executable).parent / "dask"


def klass() -> list[hostile.Case]:
    wrong = [m for m in MISTAKES if m.notebook == NOTEBOOK]
    cases = [
        hostile.Case(f"s{i}_correct", "", {NOTEBOOK: hostile.dump(hostile.correct(NOTEBOOK))},
                     {NOTEBOOK: hostile.Expect("ok")})
        for i in range(2)
    ]  # fmt: skip
    for i, m in enumerate(wrong):
        cases.append(
            hostile.Case(f"s{i}_wrong", "", {NOTEBOOK: hostile.dump(with_mistakes(NOTEBOOK, [m]))},
                         {NOTEBOOK: hostile.Expect("ok", frozenset({m.grade_id}))})
        )  # fmt: skip
    return cases


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "wb") as f:
        return subprocess.Popen(
            [str(DASK), *args], env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def scores(out: Path) -> dict[tuple[str, str, str], str]:
    return {
        (r["student"], r["notebook"], r["status"]): r["score"]
        for r in hostile.read_csv(out / "grades.csv")
    }


def test_a_killed_worker_loses_nothing_and_grades_nothing_twice(tmp_path: Path) -> None:
    cases = klass()
    hostile.write_class(tmp_path / "class", cases)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    address_file = tmp_path / "scheduler.json"
    procs = [
        start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
               "--scheduler-file", str(address_file)], env, tmp_path / "scheduler.log"),
    ]  # fmt: skip
    try:
        wait_for(address_file.exists, 60, "the scheduler")
        for i in range(2):
            procs.append(
                start(["worker", "--scheduler-file", str(address_file), "--nthreads", "1",
                       "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"],
                      env, tmp_path / f"worker{i}.log")
            )  # fmt: skip
        address = json.loads(address_file.read_text())["address"]
        out = tmp_path / "out"
        cmd = hostile.grade_command(tmp_path / "class", out, "--scheduler", address, "--no-jail",
                                    "--notebooks", NOTEBOOK[:2], "--quiet")  # fmt: skip
        grading = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: list((out / ".state").glob("*/*.json")), 300, "the first grade")
        victim = procs[1]
        os.killpg(victim.pid, signal.SIGKILL)  # as the system's OOM killer would
        victim.wait(10)
        _, err = grading.communicate(timeout=600)
        assert grading.returncode == 0, err.decode()[-3000:]
    finally:
        for proc in procs[::-1]:
            stop(proc)
    assert "Remove worker" in (tmp_path / "scheduler.log").read_text()  # it saw the death
    log = (out / "grader.log").read_text()
    graded = [line.split(" graded ", 1)[1] for line in log.splitlines() if " graded " in line]
    written = Counter(line.split(":", 1)[0] for line in graded)
    assert written == Counter({f"{c.student}/{NOTEBOOK}": 1 for c in cases}), written
    problems = hostile.check(out, cases)
    assert not problems, "\n".join(problems)

    local = tmp_path / "out-local"
    result = hostile.grade(tmp_path / "class", local, "--jobs", "1", "--no-jail",
                           "--notebooks", NOTEBOOK[:2], env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert scores(out) == scores(local)


def test_a_worker_with_another_checkout_refuses_its_tasks(tmp_path: Path, monkeypatch) -> None:
    """The README's promise: a worker whose course or grader differs from the grading
    process's grades nothing; the notebook is reported `error` and a rerun grades it."""
    import autograder.discover
    from autograder.cli import main

    case = klass()[0]
    hostile.write_class(tmp_path / "class", [case])
    out = tmp_path / "out"
    argv = ["grade", str(tmp_path / "class"), "--out", str(out), "--jobs", "1", "--no-jail",
            "--notebooks", NOTEBOOK[:2], "--quiet"]  # fmt: skip
    with monkeypatch.context() as patched:  # the grading process's grader differs, not its worker's
        patched.setattr(autograder.discover, "grader_hash", lambda: "an older grader")
        assert main(argv) == 0
    rows = hostile.read_csv(out / "grades.csv")
    assert [(r["student"], r["notebook"], r["status"]) for r in rows] == [
        (case.student, NOTEBOOK, "error")
    ]
    assert "another version of the course or grader" in (out / "grader.log").read_text()
    assert not list((out / ".state").glob("*/*.json"))  # nothing graded, nothing trusted later

    assert main(argv) == 0  # the same checkout on both sides: graded now
    assert [r["status"] for r in hostile.read_csv(out / "grades.csv")] == ["ok"]


def test_a_notebook_that_kills_its_worker_twice_is_error_and_the_class_goes_on(
    tmp_path: Path,
) -> None:
    """Without the jail a kernel can kill the worker that started it. The scheduler gives the
    notebook to a fresh worker once (`Limits.worker_retries`), then reports it `error`; the
    other students are graded as usual."""
    honest = klass()[0]
    gid = next(iter(hostile.solutions(NOTEBOOK)))
    killer = hostile.Case(
        "s9_kills_its_worker", "",
        {NOTEBOOK: hostile.dump(hostile.appended(
            NOTEBOOK, gid, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"))},
        {NOTEBOOK: hostile.Expect("error")},
    )  # fmt: skip
    hostile.write_class(tmp_path / "class", [honest, killer])
    out = tmp_path / "out"
    result = hostile.grade(tmp_path / "class", out, "--jobs", "1", "--no-jail",
                           "--notebooks", NOTEBOOK[:2], timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    statuses = {r["student"]: r["status"] for r in hostile.read_csv(out / "grades.csv")}
    assert statuses == {honest.student: "ok", killer.student: "error"}
    log = (out / "grader.log").read_text()
    assert f"{killer.student}/{NOTEBOOK}: not graded (KilledWorker)" in log
