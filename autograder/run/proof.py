"""Before grading anyone, the grader proves it can grade: the master solutions earn full marks.

A grader whose jailed kernel cannot start (a Python environment whose packages live partly
outside what the jail mounts: a venv layered on another through a .pth file,
--system-site-packages, PYTHONPATH), whose data set is wrong or whose workers run another
version would grade every student `error` or 0. So before the first student, each master
solution (`solutions/<notebook>`) that this run has work for is graded through the same path as
a student's notebook, on the same workers, jail, kernel and probes (default limits, but the
run's memory bound): it must end `ok`, with every autograded cell at full marks and no error in
any cell it ran. If it does not, the run stops with one line naming the cause (`CannotGrade`),
before anything is written.

Where the jail cannot see a package the kernel needs, that is known without running anything
(`outside_jail`), and the run stops at once, naming the package, where it lives and how it got
onto the grader's path.

A proof that holds is remembered in the cache folder (`$AUTOGRADER_CACHE`, else
`$XDG_CACHE_HOME/autograder`, else `~/.cache/autograder`), one file per notebook, under a key
of the master and the grading code (`Master.key`), the course helpers and the environment
(`environment`: the interpreter, its paths and packages, the variables that change what Python
or the jail loads, the data set, jail or not, the cluster, the memory bound): it costs once,
and again only after any of them changes. It also remembers how long the master took, so that
a run whose --timeout is shorter hears so.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import site
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from autograder.model import options
from autograder.model.course import InputError, Master
from autograder.model.enums import Status
from autograder.model.paths import ROOT
from autograder.model.settings import LIMITS, Limits, Settings, add_limit_options
from autograder.publish.state import atomic_write
from autograder.worker.task import Outcome, Task

STUDENT = "(master solution)"  # the name a proof task grades under; nothing of it is written
# what a jailed kernel and probe import from the environment (the course helpers are mounted)
KERNEL_NEEDS = ("ipykernel", "jupyter_client", "IPython", "torch", "numpy", "matplotlib")
# variables that change what the grader's Python or the jail loads
VARIABLES = (
    "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONUSERBASE",
    "TINYSHAKESPEARE", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "LANG", "LC_ALL", "TZ",
)  # fmt: skip


class CannotGrade(InputError):
    """The grader cannot grade here: one line, the cause and what to do."""


# ---- where proofs are kept ----------------------------------------------------------------


def cache_folder() -> Path:
    """$AUTOGRADER_CACHE, else $XDG_CACHE_HOME/autograder, else ~/.cache/autograder."""
    if os.environ.get("AUTOGRADER_CACHE"):
        return Path(os.environ["AUTOGRADER_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "autograder"


def _digest_files(paths: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        try:
            h.update(str(path).encode() + b"\0" + path.read_bytes())
        except OSError:
            h.update(str(path).encode() + b"\0?")
    return h.hexdigest()


def _site_facts() -> dict[str, Any]:
    """The grader's import path: for each folder, the distributions installed there (their
    `.dist-info` names carry the versions: packages added, removed or upgraded) and the .pth
    files there (paths they add). Nothing that changes by itself: the working folder that
    `python -m` puts first changes its time whenever a file is made in it (OUT, say)."""
    facts: dict[str, Any] = {}
    folders = [Path(e or ".").resolve() for e in sys.path]
    for entry, path in zip(sys.path, folders, strict=True):
        if path == ROOT:  # the project itself: the grader's hash covers its code
            facts[entry] = "project"
            continue
        if any(other not in (path, ROOT) and other in path.parents for other in folders):
            continue  # a folder a package put inside another (setuptools' vendored modules)
        if not path.is_dir():
            facts[entry] = "a file" if path.exists() else None
            continue
        try:
            dists = sorted(p.name for p in path.glob("*.dist-info")) + sorted(
                p.name for p in path.glob("*.egg-info")
            )
        except OSError:
            dists = None
        facts[entry] = {"dists": dists, "pth": _digest_files(path.glob("*.pth"))}
    return facts


def environment(settings: Settings) -> dict[str, Any]:
    """What a proof depends on besides the master and the grading code."""
    data = os.environ.get("TINYSHAKESPEARE") or str(ROOT / "data" / "tinyshakespeare.txt")
    try:
        info = os.stat(data)
        data_facts: Any = [data, info.st_size, info.st_mtime_ns]
    except OSError:
        data_facts = [data, None]
    pyvenv = Path(sys.prefix) / "pyvenv.cfg"
    return {
        "python": [sys.executable, sys.prefix, sys.base_prefix, sys.version],
        "path": _site_facts(),
        "pyvenv": pyvenv.read_text(errors="replace") if pyvenv.is_file() else None,
        "variables": {name: os.environ.get(name) for name in VARIABLES},
        "helpers": _digest_files((ROOT / "attention_course").rglob("*.py")),
        "data": data_facts,
        "jail": [settings.jail, shutil.which("bwrap"), os.geteuid() == 0],
        "cluster": settings.scheduler,
        "memory_mb": settings.limits.memory_mb,  # the masters are proved within the run's bound
    }


def proof_key(master: Master, env: dict[str, Any]) -> str:
    text = json.dumps({"master": master.key, "environment": env}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _entry(folder: Path, notebook: str, key: str) -> Path:
    return folder / "proofs" / f"{notebook[:2]}-{key[:40]}.json"


def cached(folder: Path, notebook: str, key: str) -> dict[str, Any] | None:
    try:
        record = json.loads(_entry(folder, notebook, key).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("key") == key else None


# ---- what the jail cannot see --------------------------------------------------------------


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _how(entry: str) -> str:
    """How a folder of the grader's import path got there, in words."""
    python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if any(Path(p).resolve() == Path(entry).resolve() for p in python_path):
        return "through PYTHONPATH"
    for folder in site.getsitepackages() if hasattr(site, "getsitepackages") else []:
        for pth in sorted(Path(folder).glob("*.pth")):
            try:
                lines = pth.read_text(errors="replace").splitlines()
            except OSError:
                continue
            added = [line.strip() for line in lines if not line.startswith(("#", "import"))]
            if any(line and Path(line).resolve() == Path(entry).resolve() for line in added):
                return f"through the .pth file {pth}"
    user = getattr(site, "USER_SITE", None)
    if user and Path(entry).resolve() == Path(user).resolve():
        return "from the user's site-packages (~/.local)"
    cfg = Path(sys.prefix) / "pyvenv.cfg"
    if cfg.is_file() and "include-system-site-packages = true" in cfg.read_text().lower():
        return "from the system's site-packages (a venv made with --system-site-packages)"
    return "on the grader's import path"


def outside_jail(needs: Iterable[str] = KERNEL_NEEDS) -> str:
    """Why the jail cannot start a kernel here, from where the packages it needs live ("" when
    they all live where the jail looks: this environment and Python's own prefix)."""
    prefix, base = Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()
    roots = [prefix, base, Path("/usr"), Path("/lib"), Path("/lib64")]
    missing, outside = [], {}  # name -> (folder of the import path, origin)
    for name in needs:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin:
            missing.append(name)
            continue
        origin = Path(spec.origin).resolve()
        if _inside(origin, roots):
            continue
        holding = [p for p in sys.path if p and _inside(origin, [Path(p).resolve()])]
        entry = max(holding, key=lambda p: len(str(Path(p).resolve())), default="")
        outside[name] = entry or str(origin.parent)
    if missing:
        return (
            f"{', '.join(missing)} not installed in {sys.prefix}: pip install -r requirements.lock"
        )
    if not outside:
        return ""
    entry = next(iter(outside.values()))
    listed = ", ".join(sorted(outside))
    return (
        f"{listed} live in {entry}, {_how(entry)}, outside this Python environment ({prefix}) "
        f"and Python's own prefix ({base}), the only places the jail shows student code: "
        f"install them into {prefix} (pip install -r requirements.lock) or grade from the "
        "environment that holds them"
    )


# ---- the proof ------------------------------------------------------------------------------


def _errors(executed: str | None) -> list[str]:
    """The errors the executed notebook shows, as 'cell N: Name: message'."""
    import nbformat

    if not executed:
        return []
    try:
        nb = nbformat.reads(executed, as_version=4)
    except Exception:  # noqa: BLE001 - the master's run must be readable; say so if not
        return ["its executed notebook could not be read"]
    found = []
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                value = str(output.get("evalue", "")).splitlines()[:1]
                found.append(f"cell {i + 1}: {output.get('ename', '?')}: {''.join(value)[:160]}")
    return found


def failure(outcome: Outcome) -> str:
    """Why a master's grade is not a proof, in words ("" when it is one)."""
    grade = outcome.grade
    if grade.status != Status.OK:
        return f"it is graded {grade.status} ({grade.detail or 'no detail'})"
    short = [c for c in grade.cells if not c.manual and c.score < c.max_score]
    if short:
        cell = short[0]
        why = cell.result.problem if cell.result and cell.result.problem else ""
        if not why and cell.result:
            why = next((c.detail for c in cell.result.checks if not c.passed), "")
        return f"{cell.grade_id} earns {cell.score:g}/{cell.max_score:g} ({why[:200]})"
    errors = _errors(outcome.executed)
    return f"{errors[0]}" if errors else ""


class _Lock:
    """An exclusive lock on the cache folder: graders started together prove once."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.file = open(folder / ".lock", "a")  # noqa: SIM115

    def __enter__(self) -> _Lock:
        fcntl.flock(self.file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


Runner = Callable[..., None]  # executor.run_tasks


def prove(
    settings: Settings,
    masters: dict[str, Master],
    notebooks: Iterable[str],
    log: Callable[[str], None],
    run: Runner | None = None,
) -> list[str]:
    """Prove the grader on the masters of `notebooks` (those this run has work for), or raise
    CannotGrade; the warnings the instructor must hear (a --timeout the masters need more of)."""
    wanted = [nb for nb in masters if nb in set(notebooks)]
    if not wanted:
        return []
    if settings.jail and settings.scheduler is None:
        problem = outside_jail()
        if problem:
            raise CannotGrade(f"the grader cannot grade here: {problem}")
    folder = cache_folder()
    env = environment(settings)
    keys = {nb: proof_key(masters[nb], env) for nb in wanted}
    records: dict[str, dict[str, Any]] = {}
    try:
        lock = _Lock(folder)
    except OSError as err:  # no cache: prove now, remember nothing, and say so
        note = f"the proof cannot be kept in {folder} ({err.strerror}): set AUTOGRADER_CACHE"
        log(f"proof: {note}")
        records = _prove(settings, masters, wanted, keys, None, log, run)
        return [note, *_slow(settings, records)]
    with lock:
        todo = []
        for nb in wanted:
            record = cached(folder, nb, keys[nb])
            if record is None:
                todo.append(nb)
            else:
                records[nb] = record
        if records:
            log(f"proof: {', '.join(records)} proved before (cached in {folder / 'proofs'})")
        if todo:
            records |= _prove(settings, masters, todo, keys, folder, log, run)
    return _slow(settings, records)


def _prove(
    settings: Settings,
    masters: dict[str, Master],
    todo: list[str],
    keys: dict[str, str],
    folder: Path | None,
    log: Callable[[str], None],
    run: Runner | None,
) -> dict[str, dict[str, Any]]:
    if run is None:
        from autograder.run.executor import run_tasks as run
    tasks = [
        Task(STUDENT, nb, masters[nb].path.name, masters[nb].path.read_bytes(), f"proof-{nb}",
             masters[nb].key, more=False)
        for nb in todo
    ]  # fmt: skip
    problems: dict[str, str] = {}
    records: dict[str, dict[str, Any]] = {}
    start = time.monotonic()

    def outcome(task: Task, result: Outcome) -> None:
        why = failure(result)
        if why:
            problems[task.notebook] = why
            return
        seconds = float(result.grade.seconds.get("total", 0.0))
        when = time.strftime("%Y-%m-%d %H:%M:%S")
        record = {"key": keys[task.notebook], "notebook": task.notebook, "seconds": seconds}
        records[task.notebook] = {**record, "proved": when}

    def failed(task: Task, err: BaseException) -> None:
        problems[task.notebook] = f"its worker failed ({type(err).__name__}: {str(err)[:200]})"

    log(f"proof: grading the master solutions of {', '.join(todo)} before any student")
    if settings.progress:  # the first run waits for it: say why
        print(f"proving the grader on the master solutions of {len(todo)} notebook"
              f"{'s' if len(todo) != 1 else ''} first (once per grader and environment)...",
              file=sys.stderr, flush=True)  # fmt: skip
    # default limits but the run's memory bound: a bound too small for the masters stops here
    limits = dataclasses.replace(Limits(), memory_mb=settings.limits.memory_mb)
    proving = dataclasses.replace(settings, limits=limits, progress=False)
    run(tasks, proving, outcome, failed)
    log(f"proof: {time.monotonic() - start:.1f} s")
    for nb, record in records.items():
        if folder is not None:
            path = _entry(folder, nb, keys[nb])
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps(record))
    if folder is not None:
        _prune(folder / "proofs")
    if problems:
        for nb, why in problems.items():
            log(f"proof: the master solution of {nb} fails: {why}")
        nb, why = next(iter(problems.items()))
        more = f" (and {len(problems) - 1} more notebooks)" if len(problems) > 1 else ""
        hint = outside_jail() if settings.jail and settings.scheduler is None else ""
        cause = f"; likely cause: {hint}" if hint else ""
        raise CannotGrade(
            f"the grader cannot grade here: the master solution of {nb} does not earn full "
            f"marks through the grader{more}: {why}{cause}"
        )
    return records


def _prune(folder: Path, keep: int = LIMITS.proof.kept) -> None:
    """Forget all but the `keep` newest proofs (each grader version leaves its own)."""
    try:
        entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[keep:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def _slow(settings: Settings, records: dict[str, dict[str, Any]]) -> list[str]:
    timeout = settings.limits.timeout
    return [
        f"the master solution of {nb} took {r['seconds']:.0f} s to grade, against --timeout "
        f"{timeout:g}: correct work may be graded timeout (raise --timeout)"
        for nb, r in records.items()
        if float(r.get("seconds", 0.0)) >= LIMITS.proof.slow_share * timeout
    ]


# ---- `python -m autograder prove` -------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder prove`: its options, description and examples."""
    p.description = (
        "Prove the grader on this machine now (all notebooks, or --notebooks), as `grade` does "
        "before its first student: for a new machine, an image build or a benchmark's warm-up."
    )
    p.epilog = """examples:
  python -m autograder prove                       # every notebook, as grade would
  python -m autograder prove --notebooks 02 --jobs 2
  python -m autograder prove --memory-mb 1024      # within the bound grade will run with"""
    options.notebooks(p, what="only these notebooks")
    options.jobs(p)
    options.no_jail(p)
    add_limit_options(p, ("memory_mb",))


def run(args: argparse.Namespace) -> int:
    """Prove the grader now; one line per problem, exit code 2 on bad input."""
    from autograder.model.course import load_masters, select_notebooks  # the course, when run

    try:
        notebooks = select_notebooks(args.notebooks) if args.notebooks else ()
        masters = load_masters(notebooks=notebooks)
        with tempfile.TemporaryDirectory(prefix="autograder-prove-") as folder:
            where = Path(folder)
            limits = Limits(memory_mb=args.memory_mb)
            settings = Settings(where, where, max(1, args.jobs), notebooks=tuple(masters),
                                jail=not args.no_jail, progress=False, limits=limits)  # fmt: skip
            warnings = prove(settings, masters, masters, print)
    except InputError as err:
        print(f"python -m autograder prove: error: {err}", file=sys.stderr)
        return 2
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"proved: {', '.join(masters)} (cache: {cache_folder() / 'proofs'})")
    return 0
