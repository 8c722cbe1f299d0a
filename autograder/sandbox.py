"""Run a student's answer cells in a sandboxed child and bring back what they computed.

Each answer cell gets its own child, forked from a forkserver that imported torch and the
checks once (cheap forks; the server never runs a torch op). The child starts its own session,
caps its address space, CPU time and file size, sends its output to /dev/null, runs the
master's setup cells and the student's answer cells up to the target (each in try/except),
calls the spec's `probe` on the cases the parent made and writes the observed plain data as
.npz (arrays) + JSON (the rest). The parent joins with a timeout, kills the child's process
group when it overruns, and reads the files back with `allow_pickle=False`: nothing the child
wrote is ever unpickled, and nothing it did can change how the parent judges it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

PRELOAD = [
    "torch",
    "numpy",
    "matplotlib.pyplot",
    "autograder.checks",
    "autograder.probe.plain",
    "autograder.notebook_io",
    "IPython.core.inputtransformer2",
    "psutil",
    "attention_course.plots",
]
ARRAY = "\x00npz"  # JSON marker: {ARRAY: key} stands for the array stored under key in the .npz
RESULT_LIMIT = 256 * 2**20  # bytes of observed data the parent agrees to read
_GUARD_EXIT = 70  # exit code of a child stopped by its own guard thread


@dataclass
class ProbeJob:
    """What one child runs: setup cells, then answer cells up to `target`, then the probe."""

    target: str
    spec_module: str
    setup: list[str]
    answers: list[tuple[str, str]]  # (grade_id, source) in notebook order, target last
    skip: set[str] = field(default_factory=set)  # answer cells known to hang or kill the child


@dataclass
class ProbeOutcome:
    observed: dict[str, Any] | None  # None: the child produced nothing usable
    problem: str = ""  # why not, in words a student understands
    stopped_in: str | None = None  # answer cell that was running when the child died or hung
    seconds: float = 0.0


class Sandbox:
    """One forkserver per grading worker; `probe` runs one child at a time."""

    def __init__(self, cell_timeout: float, memory_bytes: int, scratch: Path) -> None:
        self.cell_timeout = float(cell_timeout)
        self.memory_bytes = int(memory_bytes)
        self.scratch = scratch
        self._ctx = multiprocessing.get_context("forkserver")
        self._current: Any = None

    def start(self) -> None:
        """Start the forkserver now so that its imports overlap other work."""
        from multiprocessing import forkserver

        os.environ.setdefault("MPLBACKEND", "Agg")
        self._ctx.set_forkserver_preload(PRELOAD)
        forkserver.ensure_running()

    def kill_current(self) -> None:
        p = self._current
        if p is not None and p.pid and p.is_alive():
            _kill_group(p.pid)

    def probe(self, job: ProbeJob, cases: Any) -> ProbeOutcome:
        self.scratch.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="probe-", dir=self.scratch))
        try:
            return self._probe(job, pickle.dumps(cases), workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _probe(self, job: ProbeJob, blob: bytes, workdir: Path) -> ProbeOutcome:
        payload = {
            "target": job.target,
            "spec_module": job.spec_module,
            "setup": list(job.setup),
            "answers": [(g, s) for g, s in job.answers if g not in job.skip],
            "workdir": str(workdir),
            "timeout": self.cell_timeout,
            "memory": self.memory_bytes,
        }
        start, born = time.monotonic(), time.time()
        p = self._ctx.Process(target=_child_main, args=(payload, blob), daemon=True)
        p.start()
        self._current = p
        try:
            p.join(self.cell_timeout)
            timed_out = p.is_alive()
            if timed_out:
                _kill_group(p.pid)  # alive, so the group is surely its own
                p.kill()
            p.join(5)
            if timed_out or p.exitcode != 0:  # a clean child has cleared its session itself
                _kill_session(p.pid, born)
        finally:
            self._current = None
        exitcode = p.exitcode
        try:
            p.close()  # its pipe to the forkserver: thousands of probes must not leak them
        except ValueError:
            pass
        seconds = time.monotonic() - start
        stage = _read_text(workdir / "progress")
        stopped_in = stage.split(":", 1)[1] if stage.startswith("answer:") else None
        if not timed_out and exitcode == 0 and (workdir / "observed.json").exists():
            try:
                return ProbeOutcome(read_observed(workdir), seconds=seconds)
            except Exception as err:  # malformed files written by student code
                return ProbeOutcome(None, f"its results could not be read ({err})", None, seconds)
        where = _where(stage, job.target)
        if timed_out:
            problem = f"it did not finish within {self.cell_timeout:g} s {where} (an endless loop?)"
        elif exitcode is not None and exitcode < 0:
            name = signal.Signals(-exitcode).name if -exitcode in _SIGNALS else exitcode
            problem = f"the process running it was killed ({name}) {where} (out of memory?)"
        elif exitcode == _GUARD_EXIT:
            problem = f"it ran out of time {where}"
        else:
            problem = f"the process running it ended (exit code {exitcode}) {where}"
        return ProbeOutcome(None, problem, stopped_in, seconds)


_SIGNALS = {s.value for s in signal.Signals}


def _where(stage: str, target: str) -> str:
    if stage.startswith("answer:"):
        gid = stage.split(":", 1)[1]
        return "while running this answer cell" if gid == target else f"while running cell {gid}"
    if stage == "probe":
        return "while the checks called your code"
    if stage == "setup":
        return "while running the notebook's setup cells"
    return "while starting"


def _kill_group(pid: int | None) -> None:
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def _kill_session(sid: int | None, born: float) -> None:
    """Kill what a dead child left in its session (never by a bare pid that may be reused)."""
    import psutil

    if not sid:
        return
    for proc in psutil.process_iter(["create_time"]):
        try:
            if (
                proc.pid != sid
                and os.getsid(proc.pid) == sid
                and proc.info["create_time"] >= born - 1
            ):
                proc.kill()
        except (OSError, psutil.Error):
            pass


def _clear_own_session() -> None:  # pragma: no cover - in child
    """Kill what student code started: every descendant and everything in this session."""
    import psutil

    me = os.getpid()
    try:
        doomed = {p.pid for p in psutil.Process(me).children(recursive=True)}
    except psutil.Error:
        doomed = set()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                if os.getsid(int(name)) == me:
                    doomed.add(int(name))
            except OSError:
                pass
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _read_text(path: Path, limit: int = 4096) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace").strip()
    except OSError:
        return ""


# ---- files: observed data as JSON + .npz, never pickle ------------------------------------


def encode(value: Any, arrays: dict[str, np.ndarray], depth: int = 0) -> Any:
    """Plain data for JSON; numeric arrays are moved into `arrays` and replaced by a marker."""
    if depth > 8:
        return {"__repr__": "<nested too deep>"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return encode(value.item(), arrays, depth + 1)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject or value.dtype.kind not in "biufcUS":
            return {"__repr__": f"<array of dtype {value.dtype}>"}
        key = f"a{len(arrays)}"
        arrays[key] = np.ascontiguousarray(value)
        return {ARRAY: key}
    if isinstance(value, (list, tuple)):
        return [encode(v, arrays, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v, arrays, depth + 1) for k, v in value.items()}
    try:
        text = repr(value)[:200]
    except Exception:
        text = f"<{type(value).__name__}>"
    return {"__repr__": text}


def decode(value: Any, arrays: Any) -> Any:
    if isinstance(value, list):
        return [decode(v, arrays) for v in value]
    if isinstance(value, dict):
        if set(value) == {ARRAY}:
            key = value[ARRAY]
            return arrays[key] if isinstance(key, str) and key in arrays.files else None
        return {k: decode(v, arrays) for k, v in value.items()}
    return value


def write_observed(folder: Path, observed: dict[str, Any]) -> None:
    arrays: dict[str, np.ndarray] = {}
    plain = encode(observed, arrays)
    np.savez(folder / "observed.tmp.npz", **arrays)
    (folder / "observed.tmp.json").write_text(json.dumps(plain))
    os.replace(folder / "observed.tmp.npz", folder / "observed.npz")
    os.replace(folder / "observed.tmp.json", folder / "observed.json")


def read_observed(folder: Path) -> dict[str, Any]:
    npz, js = folder / "observed.npz", folder / "observed.json"
    if npz.stat().st_size + js.stat().st_size > RESULT_LIMIT:
        raise ValueError("they are too large")
    with np.load(npz, allow_pickle=False) as arrays:
        observed = decode(json.loads(js.read_text()), arrays)
        observed = _materialise(observed)
    if not isinstance(observed, dict):
        raise ValueError("they are not a mapping")
    return observed


def _materialise(value: Any) -> Any:
    """Copy arrays out of the lazily loaded .npz before it is closed."""
    if isinstance(value, np.ndarray):
        return np.array(value)
    if isinstance(value, list):
        return [_materialise(v) for v in value]
    if isinstance(value, dict):
        return {k: _materialise(v) for k, v in value.items()}
    return value


# ---- the child ------------------------------------------------------------------------------


def _child_main(payload: dict[str, Any], blob: bytes) -> None:  # pragma: no cover - in child
    """Entry point of the sandboxed child (runs in a process forked by the forkserver)."""
    import resource
    import threading

    _exit, _getppid, _monotonic, _sleep = os._exit, os.getppid, time.monotonic, time.sleep
    _open, _write, _close = os.open, os.write, os.close
    try:
        os.setsid()
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    parent = _getppid()
    timeout = float(payload["timeout"])
    stop_at = _monotonic() + timeout + 10

    def guard() -> None:
        while True:
            _sleep(0.25)
            if _getppid() != parent or _monotonic() > stop_at:
                _exit(_GUARD_EXIT)

    threading.Thread(target=guard, daemon=True).start()
    workdir = payload["workdir"]
    progress = os.path.join(workdir, "progress")

    def mark(stage: str) -> None:
        fd = _open(progress, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        _write(fd, stage.encode())
        _close(fd)

    mark("start")
    try:
        with open("/proc/self/statm") as f:
            vms = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        vms = 0
    limits = [
        (resource.RLIMIT_AS, vms + int(payload["memory"])),
        (resource.RLIMIT_CPU, int(timeout) + 15),
        (resource.RLIMIT_FSIZE, RESULT_LIMIT),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in limits:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    os.chdir(workdir)
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["NBGRADER_EXECUTION"] = "autograde"

    import importlib

    import torch

    from autograder.checks import probe_callable, understanding
    from autograder.notebook_io import exec_cell
    from autograder.probe.plain import error_text

    torch.set_num_threads(1)
    cases = pickle.loads(blob)  # made and pickled by the trusted parent
    module = importlib.import_module(payload["spec_module"])
    specs = [*module.SPECS, *understanding.SPECS]
    spec = next(s for s in specs if s.grade_id == payload["target"])
    save = write_observed
    folder = Path(workdir)

    ns: dict[str, Any] = {}
    mark("setup")
    for i, src in enumerate(payload["setup"]):
        try:
            exec_cell(src, ns, f"<setup {i}>")
        except BaseException:  # noqa: BLE001 - reported through the answer's missing names
            pass
    target_error = None
    for gid, src in payload["answers"]:
        mark(f"answer:{gid}")
        try:
            exec_cell(src, ns, f"<answer {gid}>")
        except BaseException as err:  # noqa: BLE001 - a student cell may raise anything
            if gid == payload["target"]:
                target_error = error_text(err)
    mark("probe")
    missing = spec.missing_names(ns)
    if missing and target_error:
        observed: dict[str, Any] = {"!exec": target_error}
    elif missing:
        observed = {"!missing": missing}
    else:
        try:
            observed = probe_callable(spec)(ns, cases)
            if not isinstance(observed, dict):
                observed = {"!exec": "the checks got nothing back from your code"}
        except BaseException as err:  # noqa: BLE001
            observed = {"!exec": error_text(err)}
    mark("write")
    try:
        save(folder, observed)
        _clear_own_session()
    except BaseException:  # noqa: BLE001
        _exit(3)
    _exit(0)  # no atexit hooks or finalisers of student code run after this
