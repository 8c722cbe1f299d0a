"""Each student notebook runs on what Colab preinstalls plus the course helpers, nothing else.

A fresh venv holds only Colab's packages (torch, numpy, matplotlib, ipywidgets, ipykernel,
tqdm, at this project's pins) and the helpers installed the way the setup cell's Colab branch
does it (its own pip command, --no-deps, on a copy of the project); the grader package that
comes along is removed, so nbgrader, pytest and autograder cannot be imported. Colab's
packages and everything they require are linked into the venv's site-packages from this
project's venv (the same pinned versions, in seconds instead of installing torch again);
nothing else is. The venv is cached under build/colab-venv/<hash of its requirements>.

Every notebook of notebooks/ then runs twice in that venv's kernel, from a directory outside
the project:
1. as released, with errors allowed: no cell may fail for a missing module, answer cells may
   only raise NotImplementedError, and any other cell may fail only with NotImplementedError
   (it called a stub) or, whatever the error, if it reads a contract name or a name that an
   earlier failed cell writes (a data-flow path from an unfilled answer to the failure);
2. with the solutions' answers in the answer cells, as a student in Colab runs it: no cell
   may fail at all.
Both passes take the notebooks' short training runs (`COURSE_SHORT_RUNS`, the same cells with
fewer steps and seeds; the lecture's lengths run under nbval), and pass 1 runs as nbgrader
does (`NBGRADER_EXECUTION`): it is nbgrader's validation inverted (no autograded test cell
passes on the untouched release, nothing fails before the first answer cell). Pass 2 proves
the non-answer cells need nothing beyond Colab's packages; pass 1 proves the released notebook
fails only where the student has work to do.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from autograder.course import colab
from autograder.course.pins import pins as course_pins
from autograder.model.notebook_io import (
    grade_id,
    is_answer,
    is_setup,
    read,
    solution_answers,
    source,
)
from autograder.model.paths import NOTEBOOKS, ROOT, SOLUTIONS
from autograder.worker.execute import WidgetlessClient
from tests.stubflow import answer_names, stub_problems

# pytest-timeout: the venv is built and every notebook run twice in the first test (setup counts)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

COLAB_PACKAGES = ("torch", "numpy", "matplotlib", "ipywidgets", "tqdm")
FORBIDDEN = ("nbgrader", "pytest", "autograder", "nbval", "nbclient")
KERNEL = "colab-sim"
CELL_TIMEOUT = 600
RELEASED = sorted(NOTEBOOKS.glob("*.ipynb"))


def requirements() -> list[str]:
    """Colab's packages at the project's pins (ipykernel at the version installed here)."""
    pins = course_pins()
    missing = [p for p in COLAB_PACKAGES if p not in pins]
    assert not missing, f"requirements.in pins none of {missing}"
    return [pins[p] for p in COLAB_PACKAGES] + [
        f"ipykernel=={importlib.metadata.version('ipykernel')}"
    ]


def _run(*args: str | Path, **kwargs) -> str:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=1200, **kwargs
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def closure(names: list[str]) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions of `names` and of everything they require (no extras)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        dist = found[name] = importlib.metadata.distribution(name)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def link_packages(dists: dict[str, importlib.metadata.Distribution], site: Path) -> None:
    """Link each distribution's top-level modules, packages and metadata into `site`."""
    for name, dist in dists.items():
        assert dist.files, f"{name} has no RECORD: cannot tell its files"
        for top in {f.parts[0] for f in dist.files}:
            if top in ("..", "__pycache__") or (site / top).exists():
                continue  # scripts and data outside site-packages; a shared namespace folder
            (site / top).symlink_to(Path(dist.locate_file(top)))


def base_venv() -> Path:
    """The cached venv of Colab's packages (built once per requirement list)."""
    reqs = requirements()
    key = hashlib.sha256("\n".join([sys.version, "linked", *reqs]).encode()).hexdigest()[:12]
    venv = ROOT / "build" / "colab-venv" / key
    if (venv / ".ready").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    _run(sys.executable, "-m", "venv", venv)
    from packaging.requirements import Requirement

    pins = [Requirement(r) for r in reqs]
    names = [pin.name for pin in pins]
    assert all(pin.specifier.contains(importlib.metadata.version(pin.name)) for pin in pins), (
        "this venv does not hold the course's pins: run make venv"
    )
    site = Path(
        _run(
            venv / "bin" / "python",
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ).strip()
    )
    link_packages(closure(names), site)
    (venv / "requirements.txt").write_text("\n".join(reqs) + "\n")
    (venv / ".ready").write_text("")
    return venv


def colab_pip_command() -> list[str]:
    """The pip arguments of the setup cells' Colab branch, the source as "<helpers>".

    Where the helpers come from (the URL) is test_colab.py's business; here every notebook
    must install them the same way.
    """
    commands = set()
    for path in RELEASED:
        setup = next(c for c in read(path).cells if is_setup(c))
        for command in colab.colab_install(source(setup)).in_colab:
            commands.add(tuple("<helpers>" if w.startswith("git+") else w for w in command))
    assert len(commands) == 1, f"the setup cells install in different ways: {commands}"
    (command,) = commands
    assert command[:4] == ("python", "-m", "pip", "install") and "<helpers>" in command, command
    return list(command[3:])


@pytest.fixture(scope="module")
def colab_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Python of the Colab-like venv, with the helpers installed as the setup cell does."""
    venv = base_venv()
    python = venv / "bin" / "python"
    # The project as `pip install git+<repo>` sees it: a fresh copy of its tracked sources.
    checkout = tmp_path_factory.mktemp("checkout")
    for name in ("pyproject.toml", "attention_course", "autograder"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, checkout / name)
    words = [str(checkout) if w == "<helpers>" else w for w in colab_pip_command()]
    _run(python, "-m", "pip", *words, "--force-reinstall", "--no-cache-dir")
    purelib = Path(
        _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    )
    # The same install also ships the grader; the notebooks must not rely on it.
    shutil.rmtree(purelib / "autograder", ignore_errors=True)
    probe = (
        "import importlib.util, json; "
        f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {FORBIDDEN!r}}}))"
    )
    found = json.loads(_run(python, "-c", probe, cwd=checkout.parent))
    assert not any(found.values()), f"importable in the Colab venv: {found}"
    _run(python, "-c", "import attention_course.plots, attention_course.data", cwd=checkout.parent)
    kernels = venv / "share" / "jupyter" / "kernels" / KERNEL
    kernels.mkdir(parents=True, exist_ok=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Colab (simulated)",
                "language": "python",
            }
        )
    )
    return python


def execute(nb: nbformat.NotebookNode, cwd: Path, **env: str) -> list[list[dict]]:
    """Run every cell in the Colab venv's kernel with errors allowed; errors per cell. `env`:
    variables for this kernel alone (two kernels run at once, from threads)."""
    client = WidgetlessClient(  # a widget cell can stall plain nbclient (see its docstring)
        nb,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT,
        allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(env={**os.environ, **env})
    return [
        [o for o in c.get("outputs", []) if o.output_type == "error"]
        if c.cell_type == "code"
        else []
        for c in nb.cells
    ]


def describe(error: dict) -> str:
    return f"{error['ename']}: {error['evalue']}"


@pytest.fixture(scope="module", autouse=True)
def colab_like_environment(colab_python: Path) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("JUPYTER_PATH", str(colab_python.parent.parent / "share" / "jupyter"))
        for var in ("MPLBACKEND", "PYTHONPATH", "NBGRADER_EXECUTION"):
            env.delenv(var, raising=False)  # Colab draws inline and is not nbgrader
        env.setenv("COURSE_SHORT_RUNS", "1")  # the same cells, fewer training steps
        yield


@dataclass
class Runs:
    """A notebook run twice: the released notebook and its errors, and the errors with the
    solutions' answers filled in."""

    released: nbformat.NotebookNode
    released_errors: list[list[dict]]
    solved_errors: list[list[dict]]


def run_both(path: Path, folder: Path) -> Runs:
    solved = read(path)
    answers = solution_answers(read(SOLUTIONS / path.name))
    for cell in solved.cells:
        if is_answer(cell) and cell.cell_type == "code":
            cell.source = answers[grade_id(cell)]
    (folder / "solved").mkdir(parents=True)
    (folder / "released").mkdir()
    solved_errors = execute(solved, folder / "solved")
    released = read(path)
    released_errors = execute(released, folder / "released", NBGRADER_EXECUTION="autograde")
    return Runs(released, released_errors, solved_errors)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Future]:
    """Both passes of every notebook, two notebooks at a time (a kernel mostly keeps one core
    busy), each from its own folder outside the project."""
    base = tmp_path_factory.mktemp("colab-runs")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {p.name: pool.submit(run_both, p, base / p.stem) for p in RELEASED}
    return futures


def test_there_are_student_notebooks() -> None:
    assert RELEASED, f"no notebooks in {NOTEBOOKS}"


@pytest.mark.parametrize("path", RELEASED, ids=lambda p: p.name)
def test_notebook_needs_only_colab_packages(path: Path, runs: dict[str, Future]) -> None:
    run = runs[path.name].result()  # a notebook that could not be run fails its own test
    # Pass 2: with the answers filled in, nothing may fail.
    failures = [
        f"cell {i}: {describe(e)}" for i, errs in enumerate(run.solved_errors) for e in errs
    ]
    assert not failures, "with the solutions' answers filled in:\n" + "\n".join(failures)

    # Pass 1: as released. An error is the stub's doing when it is NotImplementedError, or
    # when the failing cell reads a contract name or a name that an earlier failed cell (or
    # a stub) writes: a data-flow path from an unfilled answer to the failure.
    released, errors = run.released, run.released_errors
    first_answer = next(i for i, c in enumerate(released.cells) if is_answer(c))
    early = [describe(e) for errs in errors[:first_answer] for e in errs]
    assert not early, f"the release fails before its first answer cell: {early}"
    problems, stubs_hit = stub_problems(released.cells, errors, answer_names(path.name))
    assert not problems, "as released:\n" + "\n".join(problems)
    assert stubs_hit, "the released notebook never reached an answer stub"
    # nbgrader's validation, inverted: no autograded test passes on the untouched release.
    passing = [
        grade_id(c)
        for c, errs in zip(released.cells, errors, strict=True)
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade") and not errs
    ]
    assert not passing, f"tests pass on the untouched release: {passing}"


def test_readable_error_in_the_colab_kernel(tmp_path: Path, monkeypatch) -> None:
    """Without the data set, the helpers' loader says where to put it in one line."""
    monkeypatch.delenv("TINYSHAKESPEARE", raising=False)
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "from attention_course.data import load_text\nload_text(download=False)"
            )
        ]
    )
    (errors,) = execute(nb, tmp_path)
    assert [e["ename"] for e in errors] == ["DataUnavailable"], errors
    lines = [
        line for entry in errors[0]["traceback"] for line in entry.splitlines() if line.strip()
    ]
    assert len(lines) == 1 and "tinyshakespeare.txt" in lines[0], lines
    assert not (tmp_path / "data").exists(), "download=False must not create data/"
