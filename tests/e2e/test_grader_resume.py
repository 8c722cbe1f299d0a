"""An interrupted run (kill -9 of the whole command, mid-class) resumes and loses nothing;
a state edited in OUT is not trusted: that notebook is graded again, to its honest score.

The jail is not what this is about: the class runs with --no-jail (honest submissions only).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from autograder.publish.outdir import state_path
from autograder.publish.state import StateStore
from tests.corpus import hostile

# pytest-timeout: a class graded, killed and graded again (setup counts)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
NOTEBOOK = hostile.course_notebooks()[0]


def resume_class() -> list[hostile.Case]:
    correct = hostile.dump(hostile.correct(NOTEBOOK))
    first = hostile.rounds(NOTEBOOK)[0]
    return [
        hostile.Case("a_correct", "", {NOTEBOOK: correct}, {NOTEBOOK: hostile.Expect("ok")}),
        hostile.Case(
            "b_release",
            "",
            {NOTEBOOK: hostile.dump(hostile.release(NOTEBOOK))},
            {NOTEBOOK: hostile.Expect("unanswered", None)},
        ),
        hostile.Case(
            "c_mutants",
            "",
            {NOTEBOOK: hostile.dump(hostile.mutated(NOTEBOOK, first))},
            {NOTEBOOK: hostile.expect_mutations(first)},
        ),
        hostile.Case("d_correct", "", {NOTEBOOK: correct}, {NOTEBOOK: hostile.Expect("ok")}),
    ]


def strays(scratch: Path) -> list[int]:
    found = []
    for proc in psutil.process_iter(["pid", "cwd"]):
        if (proc.info.get("cwd") or "").startswith(str(scratch)):
            found.append(proc.info["pid"])
    return found


def test_kill_mid_class_then_resume(tmp_path: Path) -> None:
    cases = resume_class()
    hostile.write_class(tmp_path / "class", cases)
    out, scratch = tmp_path / "out", tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    cmd = hostile.grade_command(tmp_path / "class", out, "--jobs", "1", "--no-jail")
    proc = subprocess.Popen(
        cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    states = out / ".state"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not list(states.glob("*/*.json")):
        assert proc.poll() is None, "the run ended before it could be interrupted"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # kill -9 of the command, as a crashed terminal would
    proc.wait(10)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in states.glob("*/*.json")}
    assert 0 < len(before) < len(cases)
    for _, data in before.values():
        json.loads(data)  # complete, never half written

    for _ in range(50):  # workers, kernels and sandboxes notice and go away
        if not strays(scratch):
            break
        time.sleep(0.2)
    assert not strays(scratch)

    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    assert f"resuming: {len(before)} notebooks already graded" in result.stdout
    for p, (mtime, data) in before.items():
        assert p.stat().st_mtime_ns == mtime and p.read_bytes() == data, (
            "a graded notebook was regraded"
        )
    problems = hostile.check(out, cases)
    assert not problems, "\n".join(problems)

    assert "Graded without the jail" in (out / "report.html").read_text()  # --no-jail, in red

    grades = (out / "grades.csv").read_bytes()
    edited = forge_full_marks(state_path(out, "b_release", NOTEBOOK))
    kept = {p: p.stat().st_mtime_ns for p in states.glob("*/*.json") if p != edited}
    again = hostile.grade(tmp_path / "class", out, "--jobs", "1", "--no-jail", env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (out / "grades.csv").read_bytes() == grades  # graded again: the honest score
    regraded = StateStore(out).load("b_release", NOTEBOOK)
    assert regraded is not None and regraded.status == "unanswered" and regraded.score == 0
    log = (out / "grader.log").read_text()
    assert f"b_release/{NOTEBOOK}: state not trusted (its MAC does not verify)" in log
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # the others resumed
    assert len(list(states.glob("*/*.json"))) == len(cases)


def forge_full_marks(path: Path) -> Path:
    """Edit a state in OUT to full marks, as a student who could write OUT would; its MAC
    is left as it was (the key is not theirs)."""
    doc = json.loads(path.read_text())
    grade = doc["grade"]
    assert grade["status"] == "unanswered" and grade["score"] < grade["max_score"]
    for cell in grade["cells"]:
        cell["score"] = cell["max_score"]
    grade.update(status="ok", score=grade["max_score"])
    path.write_text(json.dumps(doc))
    return path
