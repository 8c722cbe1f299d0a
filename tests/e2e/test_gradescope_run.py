"""The Gradescope autograder end to end, without Gradescope: `python -m autograder gradescope`
builds the zip, its folders are laid out as Gradescope lays them out under a temporary root
(AUTOGRADER_ROOT), setup.sh runs against this project's environment (pip with --dry-run: the
lock must name exactly what is installed) and run_autograder grades a correct, a wrong and an
untouched notebook 02. Each results.json must conform to the schema written from Gradescope's
specification and carry the scores, statuses and named mistakes that `grade` gives the same
three files. The untouched one is graded where bwrap cannot start a jail (a stand-in bwrap
that fails, as where user namespaces are unavailable): the container is the jail, and the
results say so.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.checks.catalog import describe
from autograder.gradescope.run import CONTAINED, JAILED
from autograder.gradescope.schema import problems
from autograder.model.paths import EXAMPLES, ROOT
from examples.build import correct, release, solutions

# pytest-timeout: the zip is built and its image set up in the first test (setup counts)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NB02 = "02_queries_and_keys.ipynb"
STEM = NB02.removesuffix(".ipynb")
STUDENTS = ("correct", "wrong", "untouched")
HIDDEN = ("BEGIN HIDDEN TESTS", "grade_in_notebook", "autograder.checks", "checks.reference")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """student -> the file handed in: the solutions and the release as they are now, and the
    example class's classic mistake (`swapped-qk`)."""
    folder = tmp_path_factory.mktemp("handed-in")
    made = {}
    for student, nb in (("correct", correct(NB02)), ("untouched", release(NB02))):
        made[student] = folder / student / NB02
        made[student].parent.mkdir()
        nbformat.write(nb, str(made[student]))
    made["wrong"] = EXAMPLES / "mistakes_1" / NB02
    return made


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 600):
    return subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.fixture(scope="module")
def gradescope_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/autograder as Gradescope makes it: source/ (the zip), run_autograder, results/."""
    base = tmp_path_factory.mktemp("gradescope")
    zip_path = base / "autograder.zip"
    built = _run([sys.executable, "-m", "autograder", "gradescope", "--notebooks", "02",
                  "--out", str(zip_path)])  # fmt: skip
    assert built.returncode == 0, built.stderr
    root = base / "autograder"
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():  # as unzip does: the scripts stay executable
            zf.extract(info, root / "source")
            os.chmod(root / "source" / info.filename, (info.external_attr >> 16) & 0o777)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    env = {"AUTOGRADER_ROOT": str(root), "GRADER_VENV": sys.prefix, "GRADER_PIP_ARGS": "--dry-run"}
    setup = _run(["bash", str(root / "source" / "setup.sh"), "--skip-system"], env)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert "Would install" not in setup.stdout, "the lock differs from this environment"
    assert "torch" in setup.stdout and "setup.sh: done" in setup.stdout
    assert f"proved: {NB02}" in setup.stdout  # once into the image, not once per submission
    return root


@pytest.fixture(scope="module")
def by_grade(tmp_path_factory: pytest.TempPathFactory, files: dict[str, Path]) -> dict[str, dict]:
    """What `python -m autograder grade` gives the same three files (jailed, as above)."""
    base = tmp_path_factory.mktemp("grade")
    for student, path in files.items():
        (base / "class" / student).mkdir(parents=True)
        shutil.copy2(path, base / "class" / student / NB02)
    out = base / "out"
    done = _run([sys.executable, "-m", "autograder", "grade", str(base / "class"), "--out",
                 str(out), "--notebooks", "02", "--jobs", "1", "--quiet"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: dict[str, dict] = {s: {"cells": {}, "mistakes": {}} for s in STUDENTS}
    with open(out / "grades.csv", newline="") as f:
        for row in csv.DictReader(f):
            found[row["student"]].update(score=float(row["score"]), status=row["status"])
    with open(out / "cells.csv", newline="") as f:
        for row in csv.DictReader(f):
            cell = (float(row["score"]), float(row["max_score"]), row["kind"], row["state"])
            found[row["student"]]["cells"][row["grade_id"]] = cell
    with open(out / "diagnoses.csv", newline="") as f:
        for row in csv.DictReader(f):
            found[row["student"]]["mistakes"].setdefault(row["grade_id"], []).append(row["mistake"])
    log = (out / "grader.log").read_text()
    assert all(found[s]["status"] != "error" for s in STUDENTS), f"grade failed:\n{log[-3000:]}"
    return found


def run_autograder(root: Path, handed_in: Path, path_prefix: str = "") -> dict:
    submission = root / "submission"
    shutil.rmtree(submission, ignore_errors=True)
    submission.mkdir()
    shutil.copy2(handed_in, submission / NB02)
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / "results.json").unlink(missing_ok=True)
    env = {"AUTOGRADER_ROOT": str(root)}
    if path_prefix:
        env["PATH"] = f"{path_prefix}:{os.environ['PATH']}"
    done = _run([str(root / "run_autograder")], env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((root / "results" / "results.json").read_text())


def _same_as_grade(results: dict, expected: dict) -> None:
    assert problems(results) == [], problems(results)
    assert results["score"] == expected["score"]
    assert results["extra_data"]["notebooks"][NB02]["status"] == expected["status"]
    tests = {t["name"].removeprefix(f"{STEM} · "): t for t in results["tests"]}
    assert list(tests) == list(expected["cells"]), "one test per graded cell, in order"
    for gid, (score, max_score, kind, state) in expected["cells"].items():
        test = tests[gid]
        assert test["max_score"] == max_score, gid
        if kind == "manual" and state == "waiting":
            assert "score" not in test, f"{gid}: a written answer is graded by hand"
        else:
            assert test["score"] == score, gid
        if kind == "auto":
            assert test["status"] == ("passed" if score == max_score else "failed"), gid
        for mistake in expected["mistakes"].get(gid, []):
            assert describe(mistake, gid) in test["output"], (gid, mistake)
    text = json.dumps(results)
    for secret in HIDDEN:
        assert secret not in text, secret
    for gid, answer in solutions(NB02).items():
        for line in (ln.strip() for ln in answer.splitlines()):
            if len(line) > 12 and not line.startswith("#"):
                assert line not in text, f"the solution of {gid} in results.json: {line!r}"


def test_correct_and_wrong_get_what_grade_gives(
    gradescope_root: Path, by_grade: dict, files: dict[str, Path]
) -> None:
    right = run_autograder(gradescope_root, files["correct"])
    _same_as_grade(right, by_grade["correct"])
    assert right["score"] > 0 and all(
        t["status"] == "passed" for t in right["tests"] if "status" in t
    )
    assert JAILED in right["output"]
    manual = sum(m for _, m, kind, _ in by_grade["correct"]["cells"].values() if kind == "manual")
    points = "1 more point is" if manual == 1 else f"{manual:g} more points are"
    assert manual == 0 or f"{points} for written answers" in right["output"]
    wrong = run_autograder(gradescope_root, files["wrong"])
    _same_as_grade(wrong, by_grade["wrong"])
    assert wrong["score"] < right["score"] and by_grade["wrong"]["mistakes"], "a mistake is named"
    assert "Likely mistake" in json.dumps(wrong["tests"])


def test_without_user_namespaces_the_container_is_the_jail(
    gradescope_root: Path, by_grade: dict, files: dict[str, Path], tmp_path: Path
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    untouched = run_autograder(gradescope_root, files["untouched"], str(fake))
    _same_as_grade(untouched, by_grade["untouched"])
    assert by_grade["untouched"]["status"] == "unanswered" and untouched["score"] == 0
    assert CONTAINED in untouched["output"] and JAILED not in untouched["output"]
    assert "nothing was answered yet" in untouched["output"]
