"""A grader that cannot grade says so before it grades anyone (autograder/run/proof.py).

Through the command line, as an instructor runs it: a Python environment whose packages live
outside what the jail shows (a venv layered on the project's through a .pth file, or reaching
it through PYTHONPATH) stops at once with one line naming the package, where it lives and how
it got there, and nothing is graded; workers that grade with another version make the masters'
proof fail, and the run stops with that cause; a working grader proves itself once (the master
of notebook 01, jailed) and the second run finds the proof in its cache (`AUTOGRADER_CACHE`)
and grades without proving again, as does `python -m autograder prove`. The other grading
tests warm the user's cache, so they pay for the proof once per grader and environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from autograder.model.course import load_masters
from autograder.model.grades import NotebookGrade
from autograder.model.settings import LIMITS, Settings
from autograder.run import proof
from autograder.worker.task import Outcome
from tests.corpus import hostile

# pytest-timeout: master solutions proved in subprocesses (setup counts)
pytestmark = pytest.mark.timeout(900)

NOTEBOOK = hostile.course_notebooks()[0]
ROOT = Path(__file__).resolve().parents[3]


def one_student(folder: Path) -> Path:
    case = hostile.Case("ann", "", {NOTEBOOK: hostile.dump(hostile.correct(NOTEBOOK))})
    hostile.write_class(folder / "class", [case])
    return folder / "class"


@pytest.fixture(scope="module")
def layered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv of its own (no packages) made from the same Python as the project's venv."""
    folder = tmp_path_factory.mktemp("layered") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    return folder


def site_packages(venv: Path) -> Path:
    rel = Path(sysconfig.get_paths()["purelib"]).relative_to(sys.prefix)
    return venv / rel


def grade_with(python: Path, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    out = folder / "out"
    cmd = [str(python), "-m", "autograder", "grade", str(one_student(folder)), "--out", str(out),
           "--notebooks", NOTEBOOK[:2], "--jobs", "1", "--quiet"]  # fmt: skip
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def refused_in_one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("python -m autograder grade: error: the grader cannot grade here:")
    for word in words:
        assert word in line, line
    return line


def test_a_venv_layered_through_a_pth_file_stops_before_grading(
    layered: Path, tmp_path: Path
) -> None:
    pth = site_packages(layered) / "project.pth"
    pth.write_text(str(Path(sysconfig.get_paths()["purelib"])) + "\n")
    try:
        env = {**os.environ, "AUTOGRADER_CACHE": str(tmp_path / "cache")}
        done = grade_with(layered / "bin" / "python", tmp_path, env)
    finally:
        pth.unlink()
    refused_in_one_line(done, "torch", str(pth), str(layered.resolve()), "pip install")
    assert not (tmp_path / "out" / "grades.csv").exists()
    assert not list((tmp_path / "out").glob("feedback/*/*"))


def test_packages_reached_through_pythonpath_stop_before_grading(
    layered: Path, tmp_path: Path
) -> None:
    packages = sysconfig.get_paths()["purelib"]
    env = {**os.environ, "PYTHONPATH": packages, "AUTOGRADER_CACHE": str(tmp_path / "cache")}
    done = grade_with(layered / "bin" / "python", tmp_path, env)
    refused_in_one_line(done, "PYTHONPATH", packages)
    assert not (tmp_path / "out" / "grades.csv").exists()


@pytest.mark.slow
def test_workers_of_another_version_fail_the_proof_and_stop_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import autograder.model.course
    from autograder.cli import main

    monkeypatch.setenv("AUTOGRADER_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    argv = ["grade", str(one_student(tmp_path)), "--out", str(out), "--jobs", "1", "--no-jail",
            "--notebooks", NOTEBOOK[:2], "--quiet"]  # fmt: skip
    with monkeypatch.context() as patched:  # the grading process's grader differs, not its worker's
        patched.setattr(autograder.model.course, "grader_hash", lambda: "an older grader")
        assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another version of the course or grader" in err[0], err
    assert f"the master solution of {NOTEBOOK}" in err[0]
    assert not (out / "grades.csv").exists()
    assert not list((out / ".state").glob("*/*.json"))


@pytest.mark.slow
def test_a_proof_is_made_once_and_then_found_in_the_cache(tmp_path: Path) -> None:
    env = {**os.environ, "AUTOGRADER_CACHE": str(tmp_path / "cache")}
    done = grade_with(Path(sys.executable), tmp_path, env)
    assert done.returncode == 0, done.stderr[-3000:]
    log = (tmp_path / "out" / "grader.log").read_text()
    assert f"proof: grading the master solutions of {NOTEBOOK}" in log
    entries = sorted((tmp_path / "cache" / "proofs").glob("*.json"))
    assert len(entries) == 1 and json.loads(entries[0].read_text())["notebook"] == NOTEBOOK
    made = entries[0].stat().st_mtime_ns

    again = tmp_path / "again"
    again.mkdir()
    done = grade_with(Path(sys.executable), again, env)
    assert done.returncode == 0, done.stderr[-3000:]
    log = (again / "out" / "grader.log").read_text()
    assert "proof: grading" not in log and "proved before (cached" in log
    assert entries[0].stat().st_mtime_ns == made
    rows = hostile.read_csv(again / "out" / "grades.csv")
    assert [(r["student"], r["status"]) for r in rows] == [("ann", "ok")]

    cmd = [sys.executable, "-m", "autograder", "prove", "--notebooks", NOTEBOOK[:2]]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "proved before (cached" in done.stdout and f"proved: {NOTEBOOK}" in done.stdout
    assert entries[0].stat().st_mtime_ns == made


# ---- the parts, without a run -------------------------------------------------------------


def test_any_change_of_the_environment_asks_for_a_new_proof(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    master = load_masters(notebooks=(NOTEBOOK,))[NOTEBOOK]
    settings = Settings(tmp_path, tmp_path / "out")
    key = proof.proof_key(master, proof.environment(settings))
    assert key == proof.proof_key(master, proof.environment(settings))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert proof.proof_key(master, proof.environment(settings)) != key
    monkeypatch.delenv("PYTHONPATH")
    no_jail = Settings(tmp_path, tmp_path / "out", jail=False)
    assert proof.proof_key(master, proof.environment(no_jail)) != key


def test_a_folder_on_the_path_changes_the_key_only_when_its_packages_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m` puts the working folder on the path, and OUT is often made there: a new
    file in it asks for no new proof; a package installed into a folder on the path does."""
    master = load_masters(notebooks=(NOTEBOOK,))[NOTEBOOK]
    settings = Settings(tmp_path, tmp_path / "out")
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    key = proof.proof_key(master, proof.environment(settings))
    (folder / "out").mkdir()
    (folder / "notes.txt").write_text("week 1")
    assert proof.proof_key(master, proof.environment(settings)) == key
    (folder / "numpy-9.9.dist-info").mkdir()
    assert proof.proof_key(master, proof.environment(settings)) != key


def test_a_failed_proof_names_the_notebook_and_why_and_caches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOGRADER_CACHE", str(tmp_path / "cache"))
    masters = load_masters(notebooks=(NOTEBOOK,))
    died = "Kernel died before replying to kernel_info"

    def run(tasks, settings, on_outcome, on_failure) -> None:  # noqa: ANN001
        for task in tasks:
            grade = NotebookGrade(task.student, task.notebook, "error", died)
            on_outcome(task, Outcome(grade, ""))

    settings = Settings(tmp_path, tmp_path / "out", jail=False)
    with pytest.raises(proof.CannotGrade, match=f"{NOTEBOOK}.*graded error.*{died}"):
        proof.prove(settings, masters, [NOTEBOOK], lambda line: None, run=run)
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_a_timeout_shorter_than_the_masters_need_is_said() -> None:
    settings = Settings(Path("."), Path("out"))
    slow = {NOTEBOOK: {"seconds": 0.9 * settings.limits.timeout}}
    assert "raise --timeout" in proof._slow(settings, slow)[0]
    assert proof._slow(settings, {NOTEBOOK: {"seconds": 1.0}}) == []


def test_the_cache_is_the_users_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AUTOGRADER_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert proof.cache_folder() == tmp_path / ".cache" / "autograder"
    monkeypatch.setenv("AUTOGRADER_CACHE", str(tmp_path / "elsewhere"))
    assert proof.cache_folder() == tmp_path / "elsewhere"


def test_a_cache_that_cannot_be_written_proves_every_time_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("AUTOGRADER_CACHE", str(blocked / "cache"))
    masters = load_masters(notebooks=(NOTEBOOK,))
    ran: list[str] = []

    def run(tasks, settings, on_outcome, on_failure) -> None:  # noqa: ANN001
        for task in tasks:
            ran.append(task.notebook)
            grade = NotebookGrade(task.student, task.notebook, "ok")
            on_outcome(task, Outcome(grade, ""))

    settings = Settings(tmp_path, tmp_path / "out", jail=False)
    for _ in range(2):
        warnings = proof.prove(settings, masters, [NOTEBOOK], lambda line: None, run=run)
        assert any("cannot be kept" in w and "AUTOGRADER_CACHE" in w for w in warnings)
    assert ran == [NOTEBOOK, NOTEBOOK]


def test_the_cache_keeps_only_the_newest_proofs(tmp_path: Path) -> None:
    for i in range(LIMITS.proof.kept + 5):
        entry = tmp_path / f"01-{i:04d}.json"
        entry.write_text("{}")
        os.utime(entry, (i, i))
    proof._prune(tmp_path)
    left = sorted(p.name for p in tmp_path.glob("*.json"))
    assert len(left) == LIMITS.proof.kept and left[0] == "01-0005.json"


@pytest.mark.slow
def test_a_memory_bound_too_small_for_the_masters_stops_before_grading(tmp_path: Path) -> None:
    """The proof runs within the run's own --memory-mb: a bound the master solutions cannot
    be graded in is said before any student gets a 0 for it."""
    env = {**os.environ, "AUTOGRADER_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(one_student(tmp_path)),
        "--out",
        str(out),
        "--notebooks",
        NOTEBOOK[:2],
        "--jobs",
        "1",
        "--quiet",
        "--memory-mb",
        "64",
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    line = refused_in_one_line(done, f"the master solution of {NOTEBOOK}")
    assert "64 MiB" in line or "memory" in line.lower(), line
    assert not (out / "grades.csv").exists()
