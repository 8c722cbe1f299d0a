"""The probe package stands alone: it runs under another name where `autograder` is absent,
and the cases the grader hands it are plain data that such a process can load."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import autograder.probe
from autograder.checks import all_specs, probe_callable, run_in_process, spec_for
from autograder.checks.base import CellSpec
from autograder.model.enums import Reason

PROBE_DIR = Path(autograder.probe.__file__).parent
ALIAS = "jailprobe"
PLAIN = (str, int, float, bool, type(None), torch.Tensor, np.ndarray)

# Runs with -I -S: no user site, no .pth files (so no editable install of this project), then
# only the interpreter's site-packages and the folder holding the copied probe package.
BOOT = """
import importlib.util, pickle, sys
sys.path[:0] = [{tmp!r}, {purelib!r}]
assert importlib.util.find_spec("autograder") is None, "autograder is importable"
"""


def run_isolated(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    shutil.copytree(PROBE_DIR, tmp_path / ALIAS, ignore=shutil.ignore_patterns("__pycache__"))
    purelib = sysconfig.get_paths()["purelib"]
    script = BOOT.format(tmp=str(tmp_path), purelib=purelib) + body
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_probe_module_imports_under_another_name(tmp_path: Path) -> None:
    modules = sorted(p.stem for p in PROBE_DIR.glob("*.py") if p.stem != "__init__")
    body = f"""
import importlib
for name in {modules!r}:
    importlib.import_module("{ALIAS}." + name)
print("imported", len({modules!r}))
"""
    done = run_isolated(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert f"imported {len(modules)}" in done.stdout


def test_a_probe_runs_under_another_name_and_agrees_with_the_in_process_one(
    tmp_path: Path,
) -> None:
    spec = spec_for("average-matmul")
    cases = spec.cases()
    (tmp_path / "cases.pkl").write_bytes(pickle.dumps(cases))
    body = f"""
import torch
from {ALIAS}.nb01 import probe_average_matmul

def average_matmul(x):
    T = x.shape[1]
    wei = torch.tril(torch.ones(T, T))
    return (wei / wei.sum(1, keepdim=True)) @ x

cases = pickle.load(open("cases.pkl", "rb"))
observed = probe_average_matmul({{"average_matmul": average_matmul}}, cases)
pickle.dump(observed, open("observed.pkl", "wb"))
"""
    done = run_isolated(tmp_path, body)
    assert done.returncode == 0, done.stderr
    observed = pickle.loads((tmp_path / "observed.pkl").read_bytes())
    result = spec.evaluate(cases, observed)
    assert result.score == result.max_score == spec.points, result.render()


def plain_only(value: Any, where: str = "cases") -> list[str]:
    """Paths inside `value` holding anything but plain containers, scalars and arrays."""
    if isinstance(value, dict):
        bad = [f"{where}: key {k!r}" for k in value if not isinstance(k, (str, int))]
        return bad + [p for k, v in value.items() for p in plain_only(v, f"{where}[{k!r}]")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in plain_only(v, f"{where}[{i}]")]
    return [] if type(value) in PLAIN or isinstance(value, PLAIN) else [f"{where}: {type(value)}"]


@pytest.mark.parametrize("grade_id", sorted(all_specs()))
def test_cases_are_plain_data(grade_id: str) -> None:
    bad = plain_only(spec_for(grade_id).cases())
    assert not bad, bad[:5]


def test_every_specs_cases_load_where_autograder_is_absent(tmp_path: Path) -> None:
    blob = {gid: spec.cases() for gid, spec in all_specs().items()}
    (tmp_path / "cases.pkl").write_bytes(pickle.dumps(blob))
    body = """
cases = pickle.load(open("cases.pkl", "rb"))
print("loaded", len(cases))
"""
    done = run_isolated(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert f"loaded {len(blob)}" in done.stdout


@pytest.mark.parametrize("grade_id", sorted(all_specs()))
def test_every_spec_names_a_probe_of_the_probe_package(grade_id: str) -> None:
    spec = spec_for(grade_id)
    fn = probe_callable(spec)
    assert fn.__module__ == f"autograder.probe.{spec.probe_module}"
    assert fn.__name__ == spec.probe_function


def test_probe_package_imports_nothing_of_the_grader() -> None:
    for path in PROBE_DIR.glob("*.py"):
        text = path.read_text()
        assert "import autograder" not in text and "from autograder" not in text, path


class _Named(CellSpec):
    notebook = "01_uniform_averaging.ipynb"
    grade_id = "average-loop"
    names = ("average_loop",)
    points = 3.0


@pytest.mark.parametrize(
    ("observed", "reason", "words", "named"),
    [
        ({"!imported": ["average_loop"]}, Reason.IMPORTED, "imported", ["imported-answer"]),
        ({"!missing": ["average_loop"]}, Reason.UNDEFINED, "not defined", []),
        ({"!exec": "NameError: name 'x' is not defined"}, Reason.RAISED, "raised NameError", []),
    ],
)
def test_an_answer_that_never_ran_scores_zero_with_the_reason(
    observed: dict[str, Any], reason: Reason, words: str, named: list[str]
) -> None:
    """The probe's markers (autograder.probe.IMPORTED, MISSING, EXEC: the strings the jailed
    child writes) each give a zero with its `Reason`, and the problem in words."""
    assert set(observed) <= {
        autograder.probe.IMPORTED,
        autograder.probe.MISSING,
        autograder.probe.EXEC,
    }
    result = _Named().evaluate({}, observed)
    assert result.score == 0 and result.max_score == 3.0
    assert result.reason == reason and words in result.problem
    assert result.mistakes == named


def test_a_judged_answer_has_no_reason() -> None:
    """Only an answer that never ran has a reason: a judged one, right or wrong, has none."""
    spec = spec_for("average-loop")
    wrong = run_in_process(spec, {"average_loop": lambda x: x})
    assert wrong.score < wrong.max_score and wrong.reason is None


def test_grade_in_notebook_runs_the_probe_from_the_probe_package(capsys) -> None:
    from autograder.checks import grade_in_notebook

    def average_loop(x: torch.Tensor) -> torch.Tensor:
        steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)
        return x.cumsum(1) / steps

    assert grade_in_notebook("average-loop", {"average_loop": average_loop}) == 3.0
    assert "average-loop: 3 / 3 points" in capsys.readouterr().out
    assert run_in_process(spec_for("average-loop"), {}).score == 0
