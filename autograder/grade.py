"""Grade a class: match each student's files, grade them in workers, write the results.

The parent finds the students and matches their files to the course's notebooks (those of
the contract whose master exists in solutions/), then hands one student at a time to
`--jobs` worker processes. A worker grades that student's notebooks one after another:
rebuild from the master, run the kernel while the sandbox scores every answer cell, then
(in a finishing thread, while the next notebook's kernel already runs) write the feedback
page and then `OUT/.state/<student>/<notebook>.json`, both atomically. A later run with the
same OUT skips every pair whose state matches the submission's hash (and the master's and the
grader's), so an interrupted run resumes and loses nothing. At the end the parent alone writes
grades.csv, cells.csv, diagnoses.csv, gradebook.db and report.html from the states.

Renamed files: a file named like a course notebook is that notebook. Any other .ipynb is
matched by content (its answer cells' grade_ids count 2, each contract name its code defines
1) to the unclaimed notebook it resembles most; an unreadable file whose name contains a
notebook's name or starts with its number (`01...`) is that notebook (and will be `invalid`).
Files that match nothing are listed in grader.log.

Points: the autograded cells are the code answer cells with a `test-<grade_id>` cell; their
points are that test cell's (manually graded written answers go to the gradebook only).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
import traceback
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from autograder.contract import CONTRACT, test_cell_id

MAX_NOTEBOOK_BYTES = 64 * 2**20
STATUSES = ("ok", "missing", "invalid", "timeout", "error")
_PKG = Path(__file__).resolve().parent


class InputError(Exception):
    """Bad command-line input: reported as one line, exit code 2."""


@dataclass(frozen=True)
class Options:
    submissions: Path
    out: Path
    jobs: int = 1
    timeout: float = 300.0
    cell_timeout: float = 120.0
    memory_mb: int = 4096
    progress: bool = True
    jail: bool = True  # False only when asked (--no-jail): student code then runs unjailed

    @property
    def memory_bytes(self) -> int:
        return self.memory_mb * 2**20


# ---- masters ------------------------------------------------------------------------------


@dataclass
class Master:
    """A trusted source notebook of the course and what the grader needs from it."""

    notebook: str
    path: Path
    key: str  # changes when the master or the grading code changes

    @cached_property
    def nb(self) -> Any:
        from autograder.notebook_io import read

        return read(self.path)

    @cached_property
    def stubs(self) -> dict[str, str]:
        from autograder.rebuild import release_stubs

        return release_stubs(self.nb)

    @cached_property
    def setup(self) -> list[str]:
        from autograder.notebook_io import setup_sources

        return setup_sources(self.nb)

    @cached_property
    def code_answers(self) -> list[str]:
        from autograder.notebook_io import answer_cells

        return [g for g, c in answer_cells(self.nb).items() if c.cell_type == "code"]

    @cached_property
    def graded(self) -> dict[str, float]:
        """Autograded answer cells -> points of their test cell, in notebook order."""
        from autograder.notebook_io import grade_id, is_test, nbgrader_meta

        points = {
            gid: float(nbgrader_meta(c).get("points", 0))
            for c in self.nb.cells
            if is_test(c) and (gid := grade_id(c))
        }
        return {g: points[test_cell_id(g)] for g in self.code_answers if test_cell_id(g) in points}

    @property
    def max_score(self) -> float:
        return round(sum(self.graded.values()), 6)

    @property
    def spec_module(self) -> str:
        return f"autograder.checks.nb{self.notebook[:2]}"


def grader_hash() -> str:
    """Digest of the grading code: any change regrades instead of resuming."""
    h = hashlib.sha256()
    for path in sorted(_PKG.rglob("*.py")):
        h.update(str(path.relative_to(_PKG)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def load_masters(solutions: Path | None = None) -> dict[str, Master]:
    """Contract notebooks whose master exists in solutions/, in contract order."""
    from autograder.paths import SOLUTIONS

    folder = solutions or SOLUTIONS
    code = grader_hash()
    masters = {}
    for notebook in CONTRACT:
        path = folder / notebook
        if path.is_file():
            key = hashlib.sha256(path.read_bytes() + code.encode()).hexdigest()
            masters[notebook] = Master(notebook, path, key)
    return masters


# ---- submissions --------------------------------------------------------------------------


@dataclass
class Submission:
    student: str
    folder: Path
    files: dict[str, Path] = field(default_factory=dict)  # notebook -> file
    notes: dict[str, list[str]] = field(default_factory=dict)  # notebook -> notes
    ignored: list[str] = field(default_factory=list)


def hidden(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return any(p.startswith(".") or p == "__MACOSX" for p in parts)


def read_json(path: Path) -> Any:
    """The parsed file, or None when it is too large or not JSON."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_NOTEBOOK_BYTES + 1)
        return None if len(data) > MAX_NOTEBOOK_BYTES else json.loads(data)
    except (ValueError, UnicodeDecodeError, OSError, RecursionError):
        return None


def match_files(folder: Path, masters: dict[str, Master]) -> Submission:
    """The student's file for each notebook: by name, else by content, else by file name."""
    from autograder.rebuild import match_score

    sub = Submission(folder.name, folder)
    paths = sorted(
        (p for p in folder.rglob("*.ipynb") if p.is_file() and not hidden(p, folder)),
        key=lambda p: (len(p.relative_to(folder).parts), -p.stat().st_mtime, str(p)),
    )
    rel = {p: str(p.relative_to(folder)) for p in paths}
    rest = []
    for p in paths:
        if p.name in masters and p.name not in sub.files:
            sub.files[p.name] = p
        elif p.name in masters:
            sub.ignored.append(rel[p])
            sub.notes.setdefault(p.name, []).append(
                f"{rel[p]} was not graded: {rel[sub.files[p.name]]} has the same name."
            )
        else:
            rest.append(p)
    candidates = []
    for p in rest:
        data = read_json(p)
        for notebook, master in masters.items():
            if notebook in sub.files:
                continue
            score: float = match_score(data, master.nb) if isinstance(data, dict) else 0
            if score == 0 and _named_like(p.name, notebook):
                score = 0.5
            if score > 0:
                candidates.append((score, p.stat().st_mtime, p, notebook))
    used: set[Path] = set()
    for score, _, p, notebook in sorted(candidates, key=lambda c: (-c[0], -c[1], str(c[2]))):
        if p in used or notebook in sub.files:
            continue
        used.add(p)
        sub.files[notebook] = p
        how = "its content" if score >= 1 else "its file name"
        sub.notes.setdefault(notebook, []).append(
            f"graded {rel[p]} as {notebook} (matched by {how})."
        )
    sub.ignored += [rel[p] for p in rest if p not in used]
    return sub


def _named_like(name: str, notebook: str) -> bool:
    stem, number = notebook.rsplit(".", 1)[0].lower(), notebook[:2]
    lower = name.lower()
    return stem in lower or (lower.startswith(number) and not lower[2:3].isdigit())


def discover(
    root: Path, masters: dict[str, Master], exclude: Path | None = None
) -> list[Submission]:
    """One Submission per student folder of `root`, sorted by student id."""
    subs = []
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or folder.name.startswith(".") or folder.name == "__MACOSX":
            continue
        if exclude is not None and folder.resolve() == exclude.resolve():
            continue
        subs.append(match_files(folder, masters))
    return subs


# ---- state files ----------------------------------------------------------------------------


def state_path(out: Path, student: str, notebook: str) -> Path:
    return out / ".state" / student / f"{notebook}.json"


def feedback_path(out: Path, student: str, notebook: str) -> Path:
    return out / "feedback" / student / f"{Path(notebook).stem}.html"


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write via a temporary file and a rename: readers see the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def submission_key(path: Path, master: Master) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return hashlib.sha256((h.hexdigest() + master.key).encode()).hexdigest()


def load_state(out: Path, student: str, notebook: str, key: str | None = None) -> dict | None:
    try:
        state = json.loads(state_path(out, student, notebook).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or (key is not None and state.get("key") != key):
        return None
    return state


# ---- grading one notebook (in a worker) ----------------------------------------------------


def failed(grade_id: str, points: float, problem: str) -> Any:
    """A zero for a cell whose answer never ran, with the reason."""
    from autograder.checks.base import Scorer

    return Scorer(grade_id).fail_all(
        [("the answer cell runs and defines its names", points)], problem
    )


def score_answers(
    master: Master, answers: dict[str, str | None], sandbox: Any
) -> tuple[dict, list[str]]:
    """Trusted results of every autograded answer cell: probe in the sandbox, judge here.

    A cell that hangs or kills its child is left out when later cells are graded (their
    children run the earlier answer cells first), so one bad cell costs only its own points.
    """
    import importlib

    from autograder.provenance import screen
    from autograder.sandbox import ProbeJob

    sandbox.begin(master.notebook)  # this notebook's own jail: nothing of another's
    results: dict[str, Any] = {}
    notes: list[str] = []
    skip: set[str] = set()
    try:  # this notebook's checks only: a broken module elsewhere cannot stop it
        specs = {s.grade_id: s for s in importlib.import_module(master.spec_module).SPECS}
    except Exception as err:
        specs = {}
        notes.append(f"the checks of {master.notebook} could not be loaded: {err!r}")
    for gid, points in master.graded.items():
        if gid not in specs:
            results[gid] = failed(
                gid, points, "no checks are registered for this cell (a course bug)"
            )
            notes.append(f"{gid}: no checks registered; tell your instructor.")
            continue
        if answers.get(gid) is None:
            results[gid] = failed(gid, points, "the answer cell is missing from your notebook")
            continue
        spec = specs[gid]
        order = master.code_answers[: master.code_answers.index(gid) + 1]
        cells = [(g, answers[g]) for g in order if answers.get(g) is not None]
        try:
            cases = spec.cases()
            job = ProbeJob(gid, master.spec_module, master.setup, cells, set(skip), master.notebook)
            outcome = sandbox.probe(job, cases)
            while outcome.observed is None and outcome.stopped_in not in (None, gid, *skip):
                skip.add(outcome.stopped_in)
                notes.append(
                    f"{gid} was graded without running cell {outcome.stopped_in} first: "
                    f"{outcome.problem}."
                )
                job.skip = set(skip)
                outcome = sandbox.probe(job, cases)
            if outcome.observed is None:
                if outcome.stopped_in == gid:
                    skip.add(gid)
                results[gid] = failed(gid, points, outcome.problem)
            else:
                observed = screen(
                    outcome.observed, answers[gid], spec.names, outcome.imported, master.setup
                )
                results[gid] = spec.evaluate(cases, observed)
        except Exception as err:  # a bug in the checks must not stop the class
            results[gid] = failed(gid, points, f"the grader failed on this cell ({err!r})")
            notes.append(f"{gid}: internal grader error, tell your instructor: {err!r}")
    sandbox.end()
    return results, notes


@dataclass
class Pending:
    """A notebook whose kernel has run; the finishing thread writes its page and state."""

    state: dict[str, Any]
    master: Master
    scoring: Future | None = None
    executed: Any = None  # the executed graded notebook (None: nothing could run)
    anchors: dict[str, str] = field(default_factory=dict)


def parse_notebook(path: Path) -> tuple[Any, str]:
    """(notebook, "") or (None, why it is not a readable notebook)."""
    import nbformat

    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return None, f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB"
    data = read_json(path)
    if data is None:
        return None, "not valid notebook JSON"
    if not isinstance(data, dict) or not isinstance(
        data.get("cells", data.get("worksheets")), list
    ):
        return None, "JSON, but not a notebook"
    try:
        return nbformat.reads(json.dumps(data), as_version=4, capture_validation_error={}), ""
    except Exception:
        try:
            return nbformat.from_dict(data), ""
        except Exception as err:
            return None, f"not a notebook ({type(err).__name__})"


def run_notebook(
    student: str,
    notebook: str,
    path: Path,
    folder: Path,
    master: Master,
    options: Options,
    sandbox: Any,
    runner: Any,
    scorer: ThreadPoolExecutor,
    notes: list[str],
    key: str,
    hooks: Any = None,
    more: bool = True,
) -> Pending:
    """Rebuild, start the sandbox scoring, run the kernel; return what is left to finish."""
    import copy

    from autograder.rebuild import has_nbgrader_metadata, rebuild

    state: dict[str, Any] = {
        "student": student,
        "notebook": notebook,
        "file": str(path.relative_to(folder)),
        "key": key,
        "status": "ok",
        "detail": "",
        "notes": list(notes),
        "started": time.time(),
    }
    student_nb, problem = parse_notebook(path)
    if student_nb is None:
        state.update(status="invalid", detail=problem)
        return Pending(state, master)
    rebuilt = rebuild(master.nb, student_nb, master.stubs)
    if not has_nbgrader_metadata(student_nb):
        state["notes"].append(
            "the notebook's grading metadata was missing; answers were found by the names "
            "they define."
        )
    state["notes"] += rebuilt.notes
    scoring = scorer.submit(score_answers, master, dict(rebuilt.answers), sandbox)
    run = runner.execute(
        copy.deepcopy(rebuilt.notebook),
        timeout=options.timeout,
        cell_timeout=options.cell_timeout,
        memory_bytes=options.memory_bytes,
        on_kernel=hooks,
        more=more,
        notebook=notebook,
    )
    state.update(
        status=run.status,
        detail=run.detail,
        seconds_kernel=round(run.seconds, 3),
        seconds_kernel_wait=round(run.waited, 3),
    )
    anchors = {g: c.get("id", g) for c in rebuilt.notebook.cells if (g := _answer_id(c))}
    return Pending(state, master, scoring, run.notebook, anchors)


def finish(out: Path, pending: Pending) -> dict[str, Any]:
    """Wait for the scores, write the feedback page and then the state (the commit)."""
    from autograder.feedback import page, prepare_notebook

    state, master = pending.state, pending.master
    if pending.scoring is None:
        results = {
            g: failed(g, p, "the notebook file could not be read") for g, p in master.graded.items()
        }
    else:
        results, notes = pending.scoring.result()
        state["notes"] += notes
    cells = []
    for gid, points in master.graded.items():
        result = results[gid]
        cells.append(
            {
                "grade_id": gid,
                "score": min(result.score, points),
                "max_score": points,
                "mistakes": list(result.mistakes),
                "anchor": pending.anchors.get(gid, gid),
                "result": result.to_dict(),
            }
        )
    state["cells"] = cells
    state["score"] = round(sum(c["score"] for c in cells), 6)
    state["max_score"] = master.max_score
    nb = None if pending.executed is None else prepare_notebook(pending.executed, results)
    html = page(state, nb)
    state["seconds"] = round(time.time() - state.pop("started"), 3)
    atomic_write(feedback_path(out, state["student"], state["notebook"]), html)
    atomic_write(state_path(out, state["student"], state["notebook"]), json.dumps(state, indent=1))
    return state


def _answer_id(cell: Any) -> str | None:
    from autograder.notebook_io import grade_id, is_answer

    return grade_id(cell) if is_answer(cell) else None


def grade_files(
    out: Path,
    student: str,
    folder: Path,
    files: dict[str, Path],
    masters: dict[str, Master],
    options: Options,
    sandbox: Any,
    runner: Any,
    notes: dict[str, list[str]] | None = None,
    report: Any = None,
    hooks: Any = None,
    more: bool = False,
) -> None:
    """Grade one student's files (in this process); skip those already graded. `more`:
    another student follows on this runner."""
    notes = notes or {}
    with ThreadPoolExecutor(1) as scorer, ThreadPoolExecutor(1) as finisher:
        done: list[Future] = []
        for index, (notebook, path) in enumerate(files.items()):
            master = masters[notebook]
            key = submission_key(path, master)
            if load_state(out, student, notebook, key) is not None:
                if report:
                    report(("graded", student, notebook))
                continue
            try:
                pending = run_notebook(
                    student,
                    notebook,
                    path,
                    folder,
                    master,
                    options,
                    sandbox,
                    runner,
                    scorer,
                    notes.get(notebook, []),
                    key,
                    hooks,
                    more or index + 1 < len(files),
                )
            except Exception:
                if report:
                    report(("error", student, notebook, traceback.format_exc()))
                    report(("graded", student, notebook))
                continue
            done.append(finisher.submit(_finish_and_report, out, pending, report))
        for future in done:
            future.result()


def _finish_and_report(out: Path, pending: Pending, report: Any) -> None:
    student, notebook = pending.state["student"], pending.state["notebook"]
    try:
        finish(out, pending)
    except Exception:
        if report:
            report(("error", student, notebook, traceback.format_exc()))
    if report:
        report(("graded", student, notebook))


# ---- workers --------------------------------------------------------------------------------


def worker_main(conn: Any, options: dict[str, Any]) -> None:  # pragma: no cover - subprocess
    """A grading worker: its own session, its own forkserver, one student at a time."""
    started = time.monotonic()
    import logging
    import warnings

    os.setsid()  # Ctrl-C in the terminal reaches the parent only; it stops us
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    os.environ["MPLBACKEND"] = "Agg"
    opts = Options(
        **{**options, "submissions": Path(options["submissions"]), "out": Path(options["out"])}
    )
    from autograder.execute import KernelRunner
    from autograder.jail import Jail
    from autograder.sandbox import Sandbox

    jail = Jail.from_settings() if opts.jail else None
    scratch = Path(tempfile.mkdtemp(prefix="autograder-"))
    sandbox = Sandbox(opts.cell_timeout, opts.memory_bytes, scratch, jail)
    sandbox.start()
    runner = KernelRunner(jail)
    kernel: dict[str, Any] = {}
    parent = os.getppid()
    lock = threading.Lock()

    def send(msg: tuple) -> None:
        with lock:
            conn.send(msg)

    def orphan_guard() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                if kernel.get("watchdog"):
                    kernel["watchdog"].kill()
                sandbox.kill_current()
                runner.kill_spare()
                os._exit(1)

    threading.Thread(target=orphan_guard, daemon=True).start()
    threading.Thread(target=_warm_up, daemon=True).start()
    masters = load_masters()
    try:
        send(("ready", time.monotonic() - started))
        while True:
            try:
                task = conn.recv()
            except EOFError:
                break
            if task is None:
                break
            for notebook, key in task.get("keys", {}).items():  # the parent's, in case
                if notebook in masters:  # the code changed since it started
                    masters[notebook].key = key
            grade_files(
                opts.out,
                task["student"],
                Path(task["folder"]),
                {nb: Path(p) for nb, p in task["files"].items()},
                masters,
                opts,
                sandbox,
                runner,
                task["notes"],
                send,
                lambda w: kernel.__setitem__("watchdog", w),
                task["more"],
            )
            send(("done", task["student"]))
    finally:
        import multiprocessing.util

        runner.close()
        sandbox.close()
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(multiprocessing.util.get_temp_dir(), ignore_errors=True)  # forkserver's
        os._exit(0)  # everything is written; skip tearing down torch and nbgrader (~1 s)


def _warm_up() -> None:
    """Import what the scoring and finishing threads need while the first kernel starts."""
    import torch

    torch.set_num_threads(1)
    import autograder.checks  # noqa: F401
    import autograder.feedback  # noqa: F401
    from autograder.feedback import _exporter

    _exporter()
    import nbgrader.preprocessors  # noqa: F401


@dataclass
class _Worker:
    proc: Any
    conn: Any
    ready: bool = False
    student: str | None = None


def dispatch(tasks: list[dict], options: Options, total: int, log: Any) -> None:
    """Grade `tasks` (one per student) on `options.jobs` workers; survive a dying worker."""
    import multiprocessing
    from multiprocessing.connection import wait

    from tqdm.auto import tqdm

    ctx = multiprocessing.get_context("spawn")
    opts = {**asdict(options), "submissions": str(options.submissions), "out": str(options.out)}
    queue = deque(tasks)
    by_student = {t["student"]: t for t in tasks}
    attempts: dict[str, int] = {}
    workers: list[_Worker] = []
    deaths = 0
    bar = tqdm(total=total, unit="notebook", desc="grading", disable=not options.progress)

    def spawn() -> None:
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=worker_main, args=(theirs, opts), daemon=False)
        proc.start()
        theirs.close()
        workers.append(_Worker(proc, mine))

    try:
        for _ in range(min(options.jobs, len(tasks))):
            spawn()
        while workers:
            for w in workers:
                if w.ready and w.student is None:
                    w.ready = False
                    if queue:
                        task = queue.popleft()
                        w.student = task["student"]
                        w.conn.send({**task, "more": len(queue) >= len(workers)})
                    else:
                        w.conn.send(None)
            ready = wait([w.conn for w in workers] + [w.proc.sentinel for w in workers], timeout=1)
            for w in list(workers):
                try:
                    while w.conn.poll():
                        msg = w.conn.recv()
                        if msg[0] == "ready":
                            log(f"worker {w.proc.pid} ready in {msg[1]:.2f} s")
                            w.ready = True
                        elif msg[0] == "done":
                            log(f"worker {w.proc.pid} done with {w.student}")
                            w.ready, w.student = True, None
                        elif msg[0] == "graded":
                            bar.update(1)
                        elif msg[0] == "error":
                            log(f"{msg[1]}/{msg[2]}: grader error\n{msg[3]}")
                except (EOFError, OSError):
                    pass
                if w.proc.sentinel in ready or not w.proc.is_alive():
                    w.proc.join(1)
                    log(f"worker {w.proc.pid} exited ({w.proc.exitcode})")
                    workers.remove(w)
                    w.conn.close()
                    if w.student is not None or w.proc.exitcode != 0:
                        deaths += 1
                    if w.student is not None:  # died while grading: retry that student once
                        attempts[w.student] = attempts.get(w.student, 0) + 1
                        log(f"worker died (exit code {w.proc.exitcode}) while grading {w.student}")
                        if attempts[w.student] < 2:
                            queue.appendleft(by_student[w.student])
                    if queue and len(workers) < options.jobs and deaths <= 2 * len(tasks) + 2:
                        spawn()
    finally:
        bar.close()
        for w in workers:  # interrupted: stop now; the states written so far survive
            try:
                os.killpg(w.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            w.proc.join(5)


# ---- the whole run --------------------------------------------------------------------------


def run(options: Options, warnings: list[str] | None = None) -> int:
    """Grade the class folder options.submissions into options.out; 0 when the run completed."""
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    log_file = open(out / "grader.log", "a", encoding="utf-8")  # noqa: SIM115

    def log(message: str) -> None:
        log_file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")
        log_file.flush()

    started = time.monotonic()
    try:
        for warning in warnings or []:
            log(warning)
        masters = load_masters()
        if not masters:
            raise InputError("no notebooks in solutions/: nothing to grade against")
        _check_jail(options, log)
        subs = discover(options.submissions, masters, exclude=out)
        if not subs:
            raise InputError(f"{options.submissions} holds no student folders")
        log(f"run: {len(subs)} students, notebooks {', '.join(masters)}; {options}")
        for sub in subs:
            if sub.ignored:
                log(f"{sub.student}: files not graded: {', '.join(sub.ignored)}")
        tasks, total = [], 0
        for sub in subs:
            todo = {
                nb: str(p)
                for nb, p in sub.files.items()
                if load_state(out, sub.student, nb, submission_key(p, masters[nb])) is None
            }
            if todo:
                total += len(todo)
                tasks.append(
                    {
                        "student": sub.student,
                        "folder": str(sub.folder),
                        "files": todo,
                        "notes": sub.notes,
                        "keys": {nb: m.key for nb, m in masters.items()},
                    }
                )
        skipped = sum(len(s.files) for s in subs) - total
        if skipped and options.progress:
            print(f"resuming: {skipped} notebooks already graded in {out}")
        lap = _Lap(log)
        if tasks:
            preload = threading.Thread(target=_preload_finish, daemon=True)
            preload.start()
            dispatch(tasks, options, total, log)
        lap("graded")
        write_outputs(out, subs, masters)
        lap("outputs")
        if options.progress:
            rows = collect(out, subs, masters)
            counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
            summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
            print(
                f"graded {len(subs)} students x {len(masters)} notebooks in "
                f"{time.monotonic() - started:.1f} s ({summary}); see {out / 'report.html'}"
            )
        return 0
    except KeyboardInterrupt:
        print(f"\ninterrupted: run the same command again to resume from {out}")
        return 130
    finally:
        log_file.close()


def _check_jail(options: Options, log: Any) -> None:
    """Refuse to run student code unjailed unless asked; say so when asked."""
    from autograder.jail import JailUnavailable, require_bwrap

    if not options.jail:
        log("WARNING: student code runs without a jail (--no-jail)")
        return
    try:
        require_bwrap()
    except JailUnavailable as err:
        raise InputError(f"{err} (or grade unjailed, at your own risk, with --no-jail)") from err


def _preload_finish() -> None:
    """Import the final phase's libraries in the parent while the workers grade."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import nbgrader.api  # noqa: F401

    import autograder.feedback  # noqa: F401


def write_outputs(out: Path, subs: list[Submission], masters: dict[str, Master]) -> None:
    """The class's files, from the states: CSVs, pages of ungraded pairs, gradebook, report."""
    from autograder.gradebook import write_gradebook
    from autograder.report import write_csvs, write_report

    rows = collect(out, subs, masters)
    write_feedback_for_ungraded(out, rows)
    write_csvs(out, rows)
    write_gradebook(out / "gradebook.db", masters, rows)
    write_report(out, rows, masters)


class _Lap:
    def __init__(self, log: Any) -> None:
        self.log, self.t = log, time.monotonic()

    def __call__(self, what: str) -> None:
        now = time.monotonic()
        self.log(f"{what}: {now - self.t:.2f} s")
        self.t = now


def collect(out: Path, subs: list[Submission], masters: dict[str, Master]) -> list[dict]:
    """One row per student and course notebook, from the states (missing/ungraded made up)."""
    rows = []
    for sub in subs:
        for notebook, master in masters.items():
            path = sub.files.get(notebook)
            state = None
            if path is not None:
                state = load_state(out, sub.student, notebook, submission_key(path, master))
            if state is None:
                status = "missing" if path is None else "error"
                detail = (
                    "" if path is None else "the grader could not grade this file (see grader.log)"
                )
                state = {
                    "student": sub.student,
                    "notebook": notebook,
                    "status": status,
                    "detail": detail,
                    "score": 0.0,
                    "max_score": master.max_score,
                    "notes": sub.notes.get(notebook, []),
                    "file": str(path.relative_to(sub.folder)) if path else None,
                    "cells": [
                        {
                            "grade_id": g,
                            "score": 0.0,
                            "max_score": p,
                            "mistakes": [],
                            "anchor": g,
                            "result": failed(g, p, "not graded").to_dict(),
                        }
                        for g, p in master.graded.items()
                    ],
                    "synthetic": True,
                }
            rows.append(state)
    return rows


def write_feedback_for_ungraded(out: Path, rows: list[dict]) -> None:
    from autograder.feedback import page

    for row in rows:
        if row.get("synthetic"):
            atomic_write(feedback_path(out, row["student"], row["notebook"]), page(row))
