"""Run a student's answer cells in a jailed child and bring back what they computed.

With a `Jail`, each notebook gets its own jailed probe server (`autograder/probe/child.py`,
mounted as `gradeprobe`), started ahead of need so that its torch import overlaps other work:
`begin(notebook)` takes the one prepared for that notebook (or starts one) and prepares the
next; `end()` kills it with everything in its jail. Each `probe` writes the job (JSON) and
the cases (pickled here: trusted data in the safe direction) into a fresh folder of the
server's shared folder and asks the server for one forked child. The host bounds the wait
(cell timeout plus a margin, then the whole jail is killed) and the folder's size while it
waits. References, expected values and judges never enter the jail: only the probe's inputs
and the probe package do. Results are read back with `probe.observed.read_observed`: no
links followed, sizes bounded, no pickle.

Without a jail (`--no-jail`) the children are forked from a forkserver that imported torch
once, as before: their own session, the same rlimits, no other isolation.
"""

from __future__ import annotations

import importlib
import json
import math
import multiprocessing
import os
import pickle
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.model.settings import LIMITS
from autograder.probe.child import GUARD_EXIT, PROBES, TIMEOUT_EXIT
from autograder.probe.observed import (
    Bounds,
    Unreadable,
    read_json,
    read_observed,
    read_text,
    write_observed,
)

PRELOAD = [  # what the unjailed forkserver imports once
    "torch",
    "numpy",
    "matplotlib.pyplot",
    "IPython.core.inputtransformer2",
    "psutil",
    "attention_course.plots",
    "autograder.probe.child",
    *(f"autograder.probe.{name}" for name in PROBES),
]
JAIL = LIMITS.jail  # the probe server's start (never past `Sandbox.deadline`), reply, memory
READS = Bounds(LIMITS.reads.result_bytes, LIMITS.reads.result_json_bytes,
               LIMITS.reads.npz_members, LIMITS.reads.npz_directory_bytes)  # fmt: skip
__all__ = ["ProbeJob", "ProbeOutcome", "Sandbox", "read_observed", "write_observed"]


@dataclass
class ProbeJob:
    """What one child runs: setup cells, then answer cells up to `target` (with the master's
    cells that define names they read, `context.Plan.steps`), then the probe."""

    target: str
    spec_module: str
    setup: list[str]
    answers: list[tuple[str, str]]  # (grade_id, source) in notebook order, target last
    skip: set[str] = field(default_factory=set)  # answer cells known to hang or kill the child
    notebook: str = ""  # the course notebook (its hidden helpers); "" = the spec's
    # ("context", label, source) | ("answer", grade_id, source) in notebook order; empty: the
    # answers alone
    steps: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class ProbeOutcome:
    observed: dict[str, Any] | None  # None: the child produced nothing usable
    problem: str = ""  # why not, in words a student understands
    stopped_in: str | None = None  # answer cell that was running when the child died or hung
    seconds: float = 0.0
    imported: dict[str, str] = field(default_factory=dict)  # graded name -> module (runtime)
    out_of_memory: bool = False  # its jail went over its memory bound and was stopped


def _spec(job: ProbeJob) -> Any:
    from autograder.checks import understanding

    specs = [*importlib.import_module(job.spec_module).SPECS, *understanding.SPECS]
    return next(s for s in specs if s.grade_id == job.target)


def job_file(job: ProbeJob, timeout: float, memory: int) -> dict[str, Any]:
    """The job as the child reads it: plain JSON, nothing of the grader's but names."""
    spec = _spec(job)
    return {
        "target": job.target,
        "names": list(spec.names),
        "probe_module": spec.probe_module,
        "probe_function": spec.probe_function,
        "setup": list(job.setup),
        "steps": [
            list(step)
            for step in job.steps or [("answer", g, s) for g, s in job.answers]
            if step[0] != "answer" or step[1] not in job.skip
        ],
        "timeout": timeout,
        "memory": memory,
        "memory_margin": JAIL.probe_memory_margin,
        "memory_floor": JAIL.probe_memory_floor,
    }


def _write_new(folder: Path, name: str, data: bytes, dir_fd: int | None = None) -> None:
    """Create folder/name (never through a link, never over an existing file)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    if dir_fd is None:
        fd = os.open(folder / name, flags, 0o644)
    else:
        fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _job_folder(parent: Path, files: dict[str, bytes], owner: Any) -> Path:
    """A new folder in `parent` holding `files`, then handed to the jailed uid; every step
    through file descriptors, so that nothing planted in `parent` redirects a write."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    parent_fd = os.open(parent, flags)
    try:
        for _ in range(100):
            name = f"p{os.urandom(8).hex()}"
            try:
                os.mkdir(name, 0o700, dir_fd=parent_fd)
                break
            except FileExistsError:
                continue
        fd = os.open(name, flags, dir_fd=parent_fd)
    finally:
        os.close(parent_fd)
    try:
        for file_name, data in files.items():
            _write_new(parent, file_name, data, dir_fd=fd)
        if owner is not None:
            owner.give_fd(fd)
    finally:
        os.close(fd)
    return parent / name


class Sandbox:
    """The probes of one grading worker: jailed servers, or a forkserver without a jail."""

    def __init__(
        self,
        cell_timeout: float,
        memory_bytes: int,
        scratch: Path,
        jail: Any = None,
        order: tuple[str, ...] = (),
    ) -> None:
        """`order`: the notebooks being graded, in course order (all by default): servers
        started ahead are made for the notebook likely next in it."""
        self.cell_timeout = float(cell_timeout)
        self.memory_bytes = int(memory_bytes)
        self.scratch = scratch
        self.jail = jail
        self.order = order
        self._ctx = multiprocessing.get_context("forkserver")
        self._current: Any = None  # forked child, or jailed server
        self._spare: ProbeServer | None = None
        self._last: str | None = None  # the notebook begun before
        self.deadline = math.inf  # time.monotonic() at which the notebook's budget ends

    # ---- servers ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start a server (jailed) or the forkserver now, so that imports overlap other work."""
        if self.jail is not None:
            from autograder.jail.jail import following

            self._prepare(following(None, self.order))
            return
        from multiprocessing import forkserver

        os.environ.setdefault("MPLBACKEND", "Agg")
        self._ctx.set_forkserver_preload(PRELOAD)
        forkserver.ensure_running()

    def _prepare(self, notebook: str | None) -> None:
        if self._spare is None and notebook:
            self.scratch.mkdir(parents=True, exist_ok=True)
            self._spare = ProbeServer(self.jail, notebook, self.scratch, self.memory_bytes)

    def prepare(self, notebook: str) -> None:
        """Start the next jailed server for `notebook` now (replacing one made for another):
        a caller that knows which notebook comes next says so."""
        if self.jail is None:
            return
        if self._spare is not None and self._spare.notebook != notebook:
            self._spare.kill()
            self._spare = None
        self._prepare(notebook)

    def wait_ready(self, timeout: float = JAIL.probe_start_timeout) -> bool:
        """Wait until the prepared server has imported what it needs (False: it failed)."""
        spare = self._spare
        return spare is None or spare.wait_ready(time.monotonic() + timeout)

    def begin(self, notebook: str, deadline: float = math.inf, ahead: bool = True) -> None:
        """A fresh jailed server for `notebook` (one student's), and (`ahead`) the next one
        prepared; `deadline` (monotonic): no wait for a server's start goes past it."""
        self.deadline = deadline
        if self.jail is None:
            return
        from autograder.jail.jail import guess_next

        self.end()
        spare, self._spare = self._spare, None
        if spare is not None and (spare.notebook != notebook or not spare.alive()):
            spare.kill()
            spare = None
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._current = spare or ProbeServer(self.jail, notebook, self.scratch, self.memory_bytes)
        if ahead:
            self._prepare(guess_next(self._last, notebook, self.order))
        self._last = notebook

    def end(self) -> None:
        """Kill the current jailed server and everything in its jail."""
        server, self._current = self._current, None
        if isinstance(server, ProbeServer):
            server.kill()

    def kill_current(self) -> None:
        current = self._current
        if isinstance(current, ProbeServer):
            current.kill()
        elif current is not None and current.pid and current.is_alive():
            _kill_group(current.pid)

    def close(self) -> None:
        self.end()
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.kill()

    # ---- probing ---------------------------------------------------------------------------

    def probe(self, job: ProbeJob, cases: Any) -> ProbeOutcome:
        if not job.notebook:
            job.notebook = _spec(job).notebook
        blob = pickle.dumps(cases)
        payload = json.dumps(job_file(job, self.cell_timeout, self.memory_bytes)).encode()
        if self.jail is not None:
            return self._probe_jailed(job, payload, blob)
        self.scratch.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="probe-", dir=self.scratch))
        try:
            _write_new(folder, "job.json", payload)
            _write_new(folder, "cases.pkl", blob)
            start = time.monotonic()
            exitcode, timed_out = self._run_forked(folder)
            return self._outcome(folder, job, exitcode, timed_out, time.monotonic() - start)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _probe_jailed(self, job: ProbeJob, payload: bytes, blob: bytes) -> ProbeOutcome:
        server = self._current
        if not isinstance(server, ProbeServer) or server.notebook != job.notebook:
            self.begin(job.notebook, self.deadline)
            server = self._current
        files = {"job.json": payload, "cases.pkl": blob}
        folder = _job_folder(server.folder, files, self.jail)
        try:
            start = time.monotonic()
            ready_by = min(start + JAIL.probe_start_timeout, self.deadline)
            exitcode = server.request(folder, self.cell_timeout, ready_by)
            seconds = time.monotonic() - start
            progress = server.progress  # read before a stopped jail's folder is removed
            if server.out_of_memory:  # the jail went over its bound: stopped, a new jail
                self.end()
                return self._memory_outcome(job, seconds, progress)
            if exitcode is None:  # the server died, hung or flooded its folder: a new jail
                self.end()
                if server.flooded:
                    mib = self.jail.shared_bytes >> 20
                    problem = f"it wrote more than {mib} MiB into the grader's folder"
                    return ProbeOutcome(None, problem, None, seconds)
                return self._outcome(folder, job, None, server.overran, seconds, progress)
            return self._outcome(folder, job, exitcode, exitcode == TIMEOUT_EXIT, seconds)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _memory_outcome(self, job: ProbeJob, seconds: float, progress: str) -> ProbeOutcome:
        stage = _stage(progress, job)
        mib = self.memory_bytes >> 20
        problem = (
            f"it was stopped {_where(stage, job.target)}: its jail used more than {mib} MiB of "
            "memory (its processes, shared memory and files in /tmp together)"
        )
        stopped_in = stage.split(":", 1)[1] if stage.startswith("answer:") else None
        return ProbeOutcome(None, problem, stopped_in, seconds, out_of_memory=True)

    def _run_forked(self, folder: Path) -> tuple[int | None, bool]:
        born = time.time()
        p = self._ctx.Process(target=_forked_child, args=(str(folder),), daemon=True)
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
        return exitcode, timed_out

    def _outcome(
        self,
        folder: Path,
        job: ProbeJob,
        exitcode: int | None,
        timed_out: bool,
        seconds: float,
        progress: str | None = None,
    ) -> ProbeOutcome:
        """`progress`: the child's mark, read before its folder went with a stopped jail."""
        stage = _stage(read_text(folder, "progress") if progress is None else progress, job)
        stopped_in = stage.split(":", 1)[1] if stage.startswith("answer:") else None
        if not timed_out and exitcode == 0 and stage == "write":
            try:  # within one byte budget, and within the notebook's time
                observed = read_observed(folder, READS, deadline=self.deadline)
            except Unreadable as err:  # the grader's own words, never the files'
                return ProbeOutcome(None, f"its results could not be read ({err})", None, seconds)
            except Exception:  # missing, a link, not a regular file
                problem = "its results could not be read (a file is missing, a link or not a file)"
                return ProbeOutcome(None, problem, None, seconds)
            return ProbeOutcome(observed, "", None, seconds, _imported(folder, job, observed))
        where = _where(stage, job.target)
        if timed_out:
            problem = f"it did not finish within {self.cell_timeout:g} s {where} (an endless loop?)"
        elif exitcode is not None and exitcode < 0:
            name = signal.Signals(-exitcode).name if -exitcode in _SIGNALS else exitcode
            problem = f"the process running it was killed ({name}) {where} (out of memory?)"
        elif exitcode == GUARD_EXIT:
            problem = f"it ran out of time {where}"
        elif exitcode is None:
            problem = f"the process running it stopped answering {where}"
        else:
            problem = f"the process running it ended (exit code {exitcode}) {where}"
        return ProbeOutcome(None, problem, stopped_in, seconds)


def _imported(folder: Path, job: ProbeJob, observed: dict[str, Any]) -> dict[str, str]:
    """Graded names whose record (written by the child, where student code ran) does not
    hold up against the sources the grader gave it (`provenance.recorded_imports`)."""
    from autograder.worker.provenance import recorded_imports

    if any(str(k).startswith("!") for k in observed):  # never ran: nothing to check
        return {}
    record = read_json(folder, "origin.json")
    steps = job.steps or [("answer", g, src) for g, src in job.answers]
    answers = {name: src for kind, name, src in steps if kind == "answer"}
    labels = [f"<setup {i}>" for i in range(len(job.setup))]
    labels += [name for kind, name, _ in steps if kind != "answer"]
    return recorded_imports(record, _spec(job).names, answers, labels)


def _stage(text: str, job: ProbeJob) -> str:
    """The child's progress mark when it is one the grader can name ("" otherwise): a fixed
    stage, or a cell the job holds. The file is the child's, so its text never reaches a
    page."""
    if text in ("start", "setup", "probe", "write"):
        return text
    steps = job.steps or [("answer", g, src) for g, src in job.answers]
    kind, _, name = text.partition(":")
    if kind == "answer" and any(k == "answer" and n == name for k, n, _ in steps):
        return text
    if kind == "context":
        shown = {n.strip("<>").removeprefix("notebook ") for k, n, _ in steps if k != "answer"}
        if name in shown:
            return text
    return ""


class ProbeServer:
    """Host side of one jailed probe server: its process, its shared folder, its requests."""

    def __init__(
        self, jail: Any, notebook: str, root: Path, memory_bytes: int | None = None
    ) -> None:
        from autograder.jail.jail import PROBE_PACKAGE, SCRATCH, hidden_helpers

        self.jail, self.notebook = jail, notebook
        self.folder = Path(tempfile.mkdtemp(prefix="probes-", dir=root))
        self.overran = False
        self.flooded = False  # its shared folder grew past the jail's shared_bytes
        self.out_of_memory = False  # its jail went over its memory bound
        self.progress = ""  # the last request's child's progress mark, read as it ended
        self.memory_bytes = memory_bytes
        self._base: int | None = None  # without a cgroup: the server's RSS once ready
        self._buffer = b""
        self._ready = False
        argv = [jail.python, "-s", "-P", "-m", f"{PROBE_PACKAGE}.child"]
        argv += [SCRATCH, str(jail.file_bytes)]
        env = jail.environment(MPLBACKEND="Agg")
        hidden = hidden_helpers(notebook, probes=True)
        bound = {"memory_bytes": memory_bytes} if memory_bytes else {}
        self.launch = jail.launch(argv, self.folder, hidden=hidden, env=env, probes=True, **bound)
        try:
            self.proc = subprocess.Popen(
                self.launch.argv,
                pass_fds=self.launch.pass_fds,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            self.launch.release()
            raise
        finally:
            self.launch.close()
        self.cgroup = getattr(self.launch, "cgroup", None)
        if self.cgroup is not None:
            self.cgroup.attach(self.proc.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, deadline: float) -> bool:
        if not self._ready:
            self._ready = self._readline(deadline) == b"ready"
            if self._ready and self.cgroup is None and self.memory_bytes:
                self._base = max(_tree_sizes(self.proc.pid), default=0)
        return self._ready

    def request(self, folder: Path, timeout: float, ready_by: float | None = None) -> int | None:
        """The child's exit code, or None when the server failed (then it is killed);
        `ready_by` (monotonic): when to give up waiting for the server to start."""
        self.overran, self.progress = False, ""
        if ready_by is None:
            ready_by = time.monotonic() + JAIL.probe_start_timeout
        if not self.wait_ready(ready_by):
            self.overran = False  # the server did not start: not the student's code
            self.kill()
            return None
        if self.cgroup is not None:
            self.cgroup.attach(self.proc.pid)
            self.cgroup.mark()
        line = json.dumps({"folder": str(folder), "timeout": timeout}).encode() + b"\n"
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (OSError, ValueError):
            self.kill()
            return None
        reply = self._readline(time.monotonic() + timeout + JAIL.probe_reply_margin, watch=True)
        self.progress = read_text(folder, "progress")  # before a kill takes the folder with it
        if self.cgroup is not None and self.cgroup.over_since_mark():
            self.out_of_memory = True  # the kernel killed in the jail: stop all of it
        if self.out_of_memory:
            self.kill()
            return None
        try:
            code = json.loads(reply)["exit"] if reply else None
        except (ValueError, TypeError, KeyError):
            code = None
        if not isinstance(code, int) or isinstance(code, bool):
            self.overran = self.overran or reply is None
            self.kill()
            return None
        return code

    def _readline(self, deadline: float, watch: bool = False) -> bytes | None:
        """One line from the server, or None at the deadline, at EOF or on a flood."""
        from autograder.worker.execute import folder_size

        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.overran = True
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if watch and folder_size(self.folder) > self.jail.shared_bytes:
                self.flooded = True
                return None
            if watch and self._over_memory():
                self.out_of_memory = True
                return None
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk or len(self._buffer) > 65536:
                    return None
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.strip()

    def _over_memory(self) -> bool:
        """The jail went over its bound: its cgroup killed for memory, or (without a cgroup)
        the RSS of its processes passed the bound."""
        if self.cgroup is not None:
            return self.cgroup.over_since_mark()
        if not self.memory_bytes:
            return False
        sizes = _tree_sizes(self.proc.pid)
        if self._base is None:
            self._base = max(sizes, default=0)  # the server, torch imported: not the student's
        # each child starts holding the server's pages: only what it adds is the student's
        return sum(max(0, rss - self._base) for rss in sizes) > self.memory_bytes

    def kill(self) -> None:
        """SIGKILL bwrap and everything below it (its PID namespace ends with it), then
        whatever is left in its cgroup, and the cgroup."""
        import psutil

        from autograder.worker.execute import kill_tree

        try:
            kill_tree(psutil.Process(self.proc.pid))
        except psutil.Error:
            pass
        self.proc.kill()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        release = getattr(self.launch, "release", None)
        if release is not None:
            release()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


_SIGNALS = {s.value for s in signal.Signals}


def _tree_sizes(pid: int) -> list[int]:
    """The RSS of a process and of each process below it."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
    sizes = []
    for proc in procs:
        try:
            sizes.append(proc.memory_info().rss)
        except psutil.Error:
            pass
    return sizes


def _where(stage: str, target: str) -> str:
    if stage.startswith("answer:"):
        gid = stage.split(":", 1)[1]
        return "while running this answer cell" if gid == target else f"while running cell {gid}"
    if stage == "probe":
        return "while the checks called your code"
    if stage == "setup":
        return "while running the notebook's setup cells"
    if not stage:
        return "(where it stopped is unknown)"
    if stage.startswith("context:"):
        cell = stage.split(":", 1)[1][:40]
        return f"while running the notebook's {cell} (it defines a name your answer reads)"
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


def _forked_child(folder: str) -> None:  # pragma: no cover - in child
    """Unjailed child (forked by the forkserver): own session, the probe, then a clean exit."""
    from autograder.probe.child import run_cell

    try:
        os.setsid()
    except OSError:
        pass
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    code = 4
    try:
        code = run_cell(folder, folder, LIMITS.reads.result_bytes)
        _clear_own_session()
    finally:
        os._exit(code)
