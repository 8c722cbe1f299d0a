"""The process side of a probe: run a student's answer cells and record what they compute.

`python -m <this package>.child` is the probe server of one notebook's jail: it imports torch
and the probes once, says "ready", then for each request line (JSON: the folder holding
`job.json` and `cases.pkl`, the time limit) forks one child, waits for it, kills every
process the child left behind (kill(-1): the jail's PID namespace holds nothing else of
this uid) and answers one JSON line with how the child ended. The server runs no student
code and is not dumpable (no ptrace, no /proc/<pid>/mem for its children).

A child (`run_cell`, also used by the unjailed grader's forkserver) caps its address space
and CPU time, sends its output to /dev/null, runs the master's setup cells and the student's
answer cells up to the target, each after the master's cells above it that define names it
reads (the job's `steps`, see `autograder.worker.context`; each cell in try/except), records where
the graded names come from (`origin.json`), calls the probe the job names on the cases
(pickled by the grader: trusted data in the safe direction) and writes what it observed with
`observed.write_observed`.
It marks its stage in `progress` so the grader can say where it stopped.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import signal
import sys
import time
from typing import Any

GUARD_EXIT = 70  # exit code of a child stopped by its own guard thread
TIMEOUT_EXIT = 71  # how the server reports a child it killed at the time limit
PRELOAD = ("torch", "numpy", "matplotlib.pyplot", "IPython.core.inputtransformer2")
PROBES = ("plain", "values", "modules", "nb01", "nb02", "nb03", "nb04", "nb05", "nb06", "nb07")
_PACKAGE = __package__ or "autograder.probe"


# ---- running cells ------------------------------------------------------------------------


def python_source(src: str) -> str:
    """Cell source as plain Python: IPython magics become get_ipython() calls."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(src)
    except Exception:  # leave it to compile() to report the syntax error
        return src


class _NoIPython:
    """Stand-in for get_ipython() outside a kernel: magics and shell escapes do nothing."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def exec_cell(src: str, namespace: dict[str, Any], label: str) -> None:
    """Execute one cell's source in `namespace`, as a kernel would (minus display)."""
    namespace.setdefault("get_ipython", _NoIPython)
    namespace.setdefault("__name__", "__main__")
    exec(compile(python_source(src), label, "exec"), namespace)  # noqa: S102


def answer_label(grade_id: str) -> str:
    return f"<answer {grade_id}>"


def origins(ns: dict[str, Any], names: list[str], grade_id: str = "") -> dict[str, Any]:
    """name -> facts of where each graded name was made, for the grader to check against the
    sources it handed out (`autograder.worker.provenance.recorded_imports`): a function's file (the
    cell's label, or a module's path) and first line, decorators unwrapped; a class's
    module, the files of its own methods and its bases' modules; a builtin's module. Plain
    data, bounded. The grader decides, not this process (student code has run in it)."""
    found: dict[str, Any] = {}
    for name in names[:50]:
        if name in ns:
            found[name] = _facts(ns[name])
    return found


def _from_cell(filename: str) -> bool:
    return filename.startswith(("<answer ", "<setup ", "<notebook "))


def _facts(obj: Any) -> dict[str, Any]:
    import inspect

    try:
        if inspect.isclass(obj):
            own = [inspect.unwrap(f) for f in vars(obj).values() if inspect.isfunction(f)]
            return {
                "kind": "class",
                "module": str(obj.__module__)[:200],
                "methods": [str(f.__code__.co_filename)[:200] for f in own][:100],
                "bases": [str(b.__module__)[:200] for b in obj.__mro__[1:]][:50],
            }
        if inspect.isfunction(obj) or inspect.isbuiltin(obj):
            fn = inspect.unwrap(obj)
            code = getattr(fn, "__code__", None)
            if code is not None:
                return {
                    "kind": "function",
                    "file": str(code.co_filename)[:200],
                    "line": int(code.co_firstlineno),
                }
            return {"kind": "builtin", "module": str(getattr(fn, "__module__", None) or "?")}
    except Exception:  # a student's object may break introspection: no record
        return {"kind": "unknown"}
    return {"kind": "value"}


def _observe(job: dict[str, Any], ns: dict[str, Any], cases: Any, error: str | None) -> Any:
    import importlib

    from . import EXEC, MISSING
    from .plain import error_text

    names = list(job["names"])
    missing = [n for n in names if n not in ns]
    if missing and error:
        return {EXEC: error}
    if missing:
        return {MISSING: missing}
    try:
        module = importlib.import_module(f"{_PACKAGE}.{job['probe_module']}")
        observed = getattr(module, job["probe_function"])(ns, cases)
        if not isinstance(observed, dict):
            observed = {EXEC: "the checks got nothing back from your code"}
    except BaseException as err:  # noqa: BLE001 - student code may raise anything
        observed = {EXEC: error_text(err)}
    return observed


def _limit(timeout: float, memory: int, file_bytes: int, margin: int, floor: int) -> None:
    """Bounds of the child. It may allocate what its jail's memory bound leaves once the
    server's resident pages (which it shares) are counted: one process that allocates too much
    gets a MemoryError in the student's cell, the same every time, before the jail's cgroup
    would stop the whole jail. `margin`: bytes of the bound left for the server's own use;
    `floor`: the least the child may allocate (the grader's `jail.probe_memory_*` limits)."""
    import resource

    try:
        with open("/proc/self/statm") as f:
            size, resident = (int(v) * os.sysconf("SC_PAGE_SIZE") for v in f.read().split()[:2])
    except (OSError, ValueError):
        size = resident = 0
    room = max(floor, memory - resident - margin)
    for which, value in [
        (resource.RLIMIT_AS, size + room),
        (resource.RLIMIT_CPU, int(timeout) + 15),
        (resource.RLIMIT_FSIZE, file_bytes),
        (resource.RLIMIT_CORE, 0),
    ]:
        try:
            soft, hard = resource.getrlimit(which)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


def _guard(timeout: float) -> None:
    """Exit when the parent goes or the time is well past: nothing outlives its probe."""
    import threading

    _exit, _getppid, _monotonic, _sleep = os._exit, os.getppid, time.monotonic, time.sleep
    parent, stop_at = _getppid(), _monotonic() + timeout + 10

    def watch() -> None:
        while True:
            _sleep(0.25)
            if _getppid() != parent or _monotonic() > stop_at:
                _exit(GUARD_EXIT)

    threading.Thread(target=watch, daemon=True).start()


def run_cell(folder: str, workdir: str, file_bytes: int) -> int:  # pragma: no cover - child
    """The child: everything from the job in `folder` to its observed data; the exit code
    (the caller leaves with os._exit, so no atexit hook or finaliser of student code runs)."""
    _open, _write, _close = os.open, os.write, os.close
    progress = os.path.join(folder, "progress")

    def mark(stage: str) -> None:
        fd = _open(progress, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        _write(fd, stage.encode())
        _close(fd)

    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    with open(os.path.join(folder, "job.json"), "rb") as f:
        job = json.load(f)
    _guard(float(job["timeout"]))
    mark("start")
    margin, floor = int(job["memory_margin"]), int(job["memory_floor"])
    _limit(float(job["timeout"]), int(job["memory"]), file_bytes, margin, floor)
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)
    os.environ["MPLBACKEND"] = "Agg"
    import torch

    from .observed import write_json, write_observed
    from .plain import error_text

    torch.set_num_threads(1)
    with open(os.path.join(folder, "cases.pkl"), "rb") as f:
        cases = pickle.load(f)  # made and pickled by the grader
    ns: dict[str, Any] = {}
    mark("setup")
    for i, src in enumerate(job["setup"]):
        try:
            exec_cell(src, ns, f"<setup {i}>")
        except BaseException:  # noqa: BLE001 - reported through the answer's missing names
            pass
    error = None
    steps = job.get("steps")
    if steps is None:  # a job of answers alone
        steps = [["answer", gid, src] for gid, src in job["answers"]]
    for kind, name, src in steps:
        if kind == "context":  # a master cell above the answers that defines a name they read
            mark("context:" + name.strip("<>").removeprefix("notebook "))
            try:
                exec_cell(src, ns, name)
            except BaseException:  # noqa: BLE001 - reported through the names left undefined
                pass
            continue
        mark(f"answer:{name}")
        try:
            exec_cell(src, ns, answer_label(name))
        except BaseException as err:  # noqa: BLE001 - a student cell may raise anything
            if name == job["target"]:
                error = error_text(err)
    mark("probe")
    record = origins(ns, list(job["names"]), job["target"])
    observed = _observe(job, ns, cases, error)
    mark("write")
    try:
        write_json(folder, "origin.json", record)
        write_observed(folder, observed)
    except BaseException:  # noqa: BLE001
        return 3
    return 0


# ---- the server ---------------------------------------------------------------------------


def _wait(pid: int, timeout: float) -> int:
    """The child's exit code (negative: killed by that signal); TIMEOUT_EXIT past `timeout`."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if not ready:
        return TIMEOUT_EXIT
    return os.waitstatus_to_exitcode(status)


def _kill_the_rest() -> None:
    """SIGKILL every process of this uid in the jail but this one, and reap what is ours."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:  # nothing left to kill
        pass
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                break
        except ChildProcessError:
            break


def _jailed() -> bool:
    """True under bubblewrap as pid 1 and not root: kill(-1) then reaches only the jail."""
    try:
        with open("/proc/1/cmdline", "rb") as f:
            init = f.read(4096).split(b"\0", 1)[0]
    except OSError:
        return False
    return os.path.basename(init) == b"bwrap" and os.getuid() != 0


def serve(scratch: str, file_bytes: int) -> None:  # pragma: no cover - runs in the jail
    """Answer request lines on stdin until it closes; one forked child per request."""
    import ctypes
    import importlib

    if not _jailed():
        sys.exit("the probe server runs only in a jail (its own PID namespace, not root)")
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    for name in PRELOAD:
        importlib.import_module(name)
    for name in PROBES:  # those of this notebook's jail (a module may be hidden here)
        try:
            importlib.import_module(f"{_PACKAGE}.{name}")
        except ImportError:
            pass
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    for count, line in enumerate(sys.stdin.buffer):
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 4
            try:
                workdir = os.path.join(scratch, f"cell-{count}")
                code = run_cell(request["folder"], workdir, file_bytes)
            finally:
                os._exit(code)
        code = _wait(pid, float(request["timeout"]))
        _kill_the_rest()
        out.write(json.dumps({"exit": code}).encode() + b"\n")
        out.flush()


if __name__ == "__main__":  # pragma: no cover - the jail's entry point
    serve(sys.argv[1], int(sys.argv[2]))
