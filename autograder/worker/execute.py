"""Execute a rebuilt notebook in a Jupyter kernel, within time, memory and output bounds.

A `KernelRunner` gives every notebook a fresh kernel, started ahead of its turn. With a
`Jail` the kernel runs inside bubblewrap (see `autograder.jail.jail`): it talks to the grader over
Unix sockets in a folder shared with the jail (ipc transport; no network crosses), sees only
what the jail shows, and cannot outlive its notebook (killing bwrap ends its PID namespace).
Without one (`jail=None`, the grader's explicit `--no-jail`) it runs as the grader's child.

nbclient runs the cells (errors allowed, as nbgrader does) with a per-cell timeout. A watchdog
thread enforces the per-notebook deadline, the memory bound and the size of the shared
folder: it kills the kernel's process group and every process below it (bwrap included),
which also stops a loop that ignores SIGINT. A jailed kernel's memory bound is its jail's
cgroup (`autograder.jail.cgroup`: everything the jail holds, shared memory and files in its tmpfs
included), set to the notebook's bound when the notebook starts; the kernel kills inside it
when it is full, and the watchdog then stops the whole jail. Without a cgroup (or a jail) the
watchdog sums the RSS of the kernel's processes. Stored output is capped per cell, so a cell that
prints 100 MB costs neither memory nor a huge notebook. The outcome is a status: `ok` (ran to
the end), `timeout` or `error` (the kernel died: os._exit, killed for memory, failed to start).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_output

from autograder.model.enums import Status
from autograder.model.settings import LIMITS

if TYPE_CHECKING:
    from autograder.jail.jail import Jail, Launch

KERNEL_ARGS = ["--InteractiveShell.xmode=Minimal"]
OUTPUT_CHARS = LIMITS.pages.output_chars  # characters of output kept per cell


@dataclass
class Execution:
    notebook: NotebookNode
    status: Status  # ok | timeout | error
    detail: str = ""
    seconds: float = 0.0
    waited: float = 0.0  # seconds spent getting a kernel ready


class Watchdog(threading.Thread):
    """Kills the kernel's process tree on the deadline or when its memory passes the bound."""

    def __init__(self, deadline: float, memory_bytes: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.deadline = deadline
        self.memory_bytes = memory_bytes
        self.interval = interval
        self.reason: str | None = None
        self.peak = 0
        self.folder: Path | None = None  # shared with a jail: bounded to folder_bytes
        self.folder_bytes = 0
        self.cgroup: Any = None  # the jail's cgroup (autograder.jail.cgroup.JailCgroup): its bound
        self._proc: psutil.Process | None = None
        self._stop_event = threading.Event()

    def watch_folder(self, folder: Path, limit: int) -> None:
        self.folder, self.folder_bytes = folder, limit

    def folder_overflows(self) -> bool:
        """True when the watched folder holds more than its bound."""
        return self.folder is not None and folder_size(self.folder) > self.folder_bytes

    def attach(self, pid: int | None) -> None:
        try:
            self._proc = psutil.Process(pid) if pid else None
        except psutil.Error:
            self._proc = None

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            if self._proc is None:
                if time.monotonic() > self.deadline:
                    self.reason = "timeout"
                    return
                continue
            if time.monotonic() > self.deadline:
                self.reason = "timeout"
                self.kill()
                return
            if self.over_memory():
                self.reason = "memory"
                self.kill()
                return
            if self.folder_overflows():
                self.reason = "disk"
                self.kill()
                return

    def over_memory(self) -> bool:
        """The jail's cgroup had a process killed for memory, or (without one) the kernel's
        processes hold more than the bound in RSS."""
        if self.cgroup is not None:
            self.peak = max(self.peak, self.cgroup.peak())
            return self.cgroup.over_since_mark()
        if self._proc is None:
            return False
        rss = tree_rss(self._proc)
        self.peak = max(self.peak, rss)
        return rss > self.memory_bytes

    def kill(self) -> None:
        if self._proc is not None:
            kill_tree(self._proc)

    def stop(self) -> None:
        self._stop_event.set()


def tree_rss(root: psutil.Process) -> int:
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def folder_size(folder: Path, max_entries: int = LIMITS.jail.folder_entries) -> int:
    """Bytes under `folder` (not following links); a flood of entries counts as too big."""
    total, seen = 0, 0
    stack = [str(folder)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > max_entries:
                return 2**62
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                pass
    return total


def kill_tree(root: psutil.Process) -> None:
    """SIGKILL a kernel, its process group and every descendant (some may have left it)."""
    if not root.is_running():  # gone already (psutil also guards against a reused pid)
        return
    try:
        children = root.children(recursive=True)
    except psutil.Error:
        children = []
    try:
        os.killpg(os.getpgid(root.pid), signal.SIGKILL)
    except OSError:
        pass
    for p in [root, *children]:
        try:
            p.kill()
        except psutil.Error:
            pass


class WidgetlessClient(NotebookClient):
    """nbclient that plays no widget front end, for running notebooks unattended."""

    def on_comm_open_jupyter_widget(self, msg: dict[str, Any]) -> None:
        """nbclient's stand-in for an Output widget answers the kernel on the shell socket
        while a read of that socket is pending; the read can then miss the cell's reply and
        wake only at the cell timeout (a 2-minute stall after an ipywidgets cell, measured).
        Nobody looks at the widgets of an unattended run, so none answers."""
        return None


class GradingClient(WidgetlessClient):
    """nbclient with capped outputs, no widget front end, and a watchdog told about the
    kernel's pid."""

    def __init__(self, nb: NotebookNode, watchdog: Watchdog, **kw: Any) -> None:
        super().__init__(nb, **kw)
        self.watchdog = watchdog
        self._sizes: dict[int, int] = {}

    def output(
        self, outs: list[NotebookNode], msg: dict[str, Any], display_id: str, cell_index: int
    ) -> NotebookNode | None:
        used = self._sizes.get(cell_index, 0)
        if used > OUTPUT_CHARS:
            return None
        size = _message_size(msg)
        self._sizes[cell_index] = used + size
        if used + size > OUTPUT_CHARS:
            note = new_output(
                "stream",
                name="stderr",
                text=f"\n[output truncated by the grader: more than {OUTPUT_CHARS // 1024} KB]\n",
            )
            outs.append(note)
            return None
        return super().output(outs, msg, display_id, cell_index)


def _message_size(msg: dict[str, Any]) -> int:
    content = msg.get("content", {})
    if "text" in content:
        return len(content["text"])
    if "data" in content:
        return sum(len(str(v)) for v in content["data"].values())
    if "traceback" in content:
        return sum(len(line) for line in content["traceback"])
    return 0


INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


def kernel_env() -> dict[str, str]:
    """The environment of an unjailed kernel: nbgrader's marker and a headless backend.

    The inline backend is as headless as Agg and, unlike Agg, turns each figure into a PNG
    output, so the feedback page shows the student's plots. (A jailed kernel gets
    `Jail.environment()` instead: nothing of the grader's.)
    """
    env = dict(os.environ)
    env["NBGRADER_EXECUTION"] = "autograde"
    env["MPLBACKEND"] = INLINE_BACKEND
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


# What every course notebook imports first: the kernel runs it while it starts (IPython's
# exec_lines), before it answers its first request, so no client talks to a spare kernel.
PRELOAD = "import torch, matplotlib.pyplot"


class JailedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel command runs inside `launch` (a bwrap prefix)."""

    launch: Launch | None = None
    jail: Jail | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        if self.launch is None or self.jail is None:
            return cmd
        self.jail.give(Path(self.connection_file))  # the jailed uid reads it
        return [*self.launch.argv, *cmd]


@dataclass
class Kernel:
    km: Any
    workdir: Path
    notebook: str | None = None
    error: str = ""

    @property
    def pid(self) -> int | None:
        return getattr(getattr(self.km, "provisioner", None), "pid", None)

    @property
    def launch(self) -> Launch | None:
        """The jail's launch (its cgroup), None for an unjailed kernel."""
        return getattr(self.km, "launch", None)


class KernelRunner:
    """Runs notebooks, each in a fresh kernel that was started ahead of its turn.

    While one notebook runs, the next kernel boots and imports torch and matplotlib (what
    every course notebook's setup cell does first), so a class does not wait ~2-3 s per
    notebook for Python and torch. Every kernel runs exactly one notebook, in its own folder,
    and is killed afterwards. A jailed kernel is made for one notebook (its hidden helpers);
    the one started ahead is made for the course's next notebook, and replaced when another
    comes. All kernel I/O runs on one event loop in a thread.
    """

    def __init__(
        self,
        jail: Jail | None = None,
        warm: bool = True,
        preload: str = PRELOAD,
        order: tuple[str, ...] = (),
    ) -> None:
        """`order`: the notebooks being graded, in course order (all by default); the kernels
        started ahead are made for the notebook that is likely next in it."""
        self.jail, self.warm, self.preload, self.order = jail, warm, preload, order
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._spare: concurrent.futures.Future | None = None
        self._last: str | None = None  # the notebook run before
        if warm:
            self.prestart(_guess_next(None, None, order))

    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _manager(self, workdir: Path, notebook: str | None) -> tuple[Any, dict[str, Any]]:
        """A kernel manager and the keyword arguments of its start."""
        kw: dict[str, Any] = {"cwd": str(workdir)}
        if self.jail is None:
            return AsyncKernelManager(kernel_name="python3"), {**kw, "env": kernel_env()}
        from autograder.jail.jail import hidden_helpers

        km = JailedKernelManager(
            kernel_name="python3",
            transport="ipc",
            ip=str(workdir / "k"),
            connection_file=str(workdir / "kernel.json"),
        )
        km.jail = self.jail
        km.launch = self.jail.launch([], workdir, hidden=hidden_helpers(notebook))
        return km, {**kw, "env": {}, "pass_fds": km.launch.pass_fds}

    async def _start(self, notebook: str | None = None) -> Kernel:
        workdir = Path(tempfile.mkdtemp(prefix="kernel-"))
        km: Any = None
        try:
            km, kw = self._manager(workdir, notebook)
            preload = (
                [f"--IPKernelApp.exec_lines={self.preload}"] if self.warm and self.preload else []
            )
            try:
                await km.start_kernel(
                    extra_arguments=[*KERNEL_ARGS, "--HistoryManager.hist_file=:memory:", *preload],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    **kw,
                )
            finally:
                if getattr(km, "launch", None) is not None:
                    km.launch.close()
        except Exception as err:  # reported by the notebook that gets this kernel
            await self._stop(Kernel(km, workdir))
            return Kernel(None, workdir, notebook, f"{type(err).__name__}: {str(err)[:200]}")
        return Kernel(km, workdir, notebook)

    async def _stop(self, kernel: Kernel, client: Any = None) -> None:
        if client is not None:  # nbclient's exit hook, left behind when its kernel was killed
            atexit.unregister(client._cleanup_kernel)
        try:
            if client is not None and client.kc is not None:
                client.kc.stop_channels()
            if kernel.km is not None:
                if kernel.pid:  # the whole tree: a jail's PID namespace ends with bwrap
                    try:
                        kill_tree(psutil.Process(kernel.pid))
                    except psutil.Error:
                        pass
                try:
                    await kernel.km.shutdown_kernel(now=True)
                except Exception:
                    await kernel.km.cleanup_resources()
        except Exception:  # a kernel that is gone already
            pass
        finally:
            if kernel.launch is not None:  # whatever is left in its cgroup, and the cgroup
                kernel.launch.release()
        shutil.rmtree(kernel.workdir, ignore_errors=True)

    def prestart(self, notebook: str | None = None) -> None:
        if self._spare is None:
            self._spare = asyncio.run_coroutine_threadsafe(self._start(notebook), self._loop)

    def _take(self, notebook: str | None) -> Kernel:
        spare, self._spare = self._spare, None
        kernel = spare.result() if spare is not None else self._call(self._start(notebook))
        alive = kernel.km is not None and self._call(kernel.km.is_alive())
        wrong = self.jail is not None and kernel.notebook != notebook
        if not alive or wrong:  # died while it waited, or made for another notebook
            self._call(self._stop(kernel))
            kernel = self._call(self._start(notebook))
        if kernel.km is None:
            raise RuntimeError(f"the kernel failed to start ({kernel.error})")
        return kernel

    def kill_spare(self) -> None:
        spare = self._spare
        if spare is not None and spare.done() and spare.result().pid:
            kill_tree(psutil.Process(spare.result().pid))

    def close(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            try:
                self._call(self._stop(spare.result(timeout=120)), timeout=30)
            except Exception:
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)

    def execute(
        self,
        nb: NotebookNode,
        *,
        timeout: float,
        cell_timeout: float,
        memory_bytes: int,
        on_kernel: Any = None,
        more: bool = True,
        notebook: str | None = None,
    ) -> Execution:
        """Run every cell of `nb` (in place) and say how it went. `more`: another notebook
        follows, so start its kernel now; `notebook`: the course notebook `nb` is (a jailed
        kernel hides the helpers that give its answers away)."""
        start = time.monotonic()
        deadline = start + timeout
        watchdog = Watchdog(deadline, memory_bytes)
        if on_kernel is not None:
            on_kernel(watchdog)
        watchdog.start()
        kernel, client = None, None
        try:
            kernel = self._take(notebook)
            waited = time.monotonic() - start
            watchdog.attach(kernel.pid)
            bound_memory(kernel, watchdog, memory_bytes)
            if self.jail is not None:
                watchdog.watch_folder(kernel.workdir, LIMITS.jail.kernel_folder_bytes)
            if self.warm and more:  # the next kernel boots while this notebook runs
                self.prestart(_guess_next(self._last, notebook, self.order))
            self._last = notebook
            client = self._client(nb, kernel, watchdog, deadline, cell_timeout)
            status, detail = self._run(client, watchdog, timeout, cell_timeout, memory_bytes)
            if status == Status.OK and watchdog.folder_overflows():  # a burst between two looks
                watchdog.reason = "disk"
                status, detail = _died(watchdog, timeout, memory_bytes)
            if watchdog.reason != "memory" and watchdog.over_memory():  # since the last look
                watchdog.reason = "memory"
                status, detail = _died(watchdog, timeout, memory_bytes)
        except Exception as err:  # kernel failed to start, or was killed while starting
            waited = time.monotonic() - start
            status, detail = _died(watchdog, timeout, memory_bytes)
            if watchdog.reason is None:
                detail = f"the kernel failed: {type(err).__name__}: {str(err)[:200]}"
        finally:
            watchdog.stop()
            watchdog.kill()
            if kernel is not None:
                self._call(self._stop(kernel, client))
        if status == Status.OK and watchdog.reason == "timeout":
            status, detail = Status.TIMEOUT, f"the notebook ran longer than {timeout:g} s"
        return Execution(nb, status, detail, time.monotonic() - start, waited)

    def _client(
        self, nb: NotebookNode, kernel: Kernel, watchdog: Watchdog, deadline: float, cell: float
    ) -> GradingClient:
        def cell_limit(_: NotebookNode) -> int:
            return max(1, int(min(cell, deadline - time.monotonic()) + 0.999))

        client = GradingClient(
            nb,
            watchdog,
            km=kernel.km,
            timeout_func=cell_limit,
            allow_errors=True,
            shutdown_kernel="immediate",
            startup_timeout=60,
            iopub_timeout=4,
        )
        client.log = _quiet_log()
        return client

    def _run(
        self,
        client: GradingClient,
        watchdog: Watchdog,
        timeout: float,
        cell_timeout: float,
        memory_bytes: int,
    ) -> tuple[Status, str]:
        try:
            self._call(client.async_execute())
        except CellTimeoutError:
            if time.monotonic() >= watchdog.deadline - 1:
                return Status.TIMEOUT, f"the notebook ran longer than {timeout:g} s"
            return Status.TIMEOUT, f"a cell ran longer than {cell_timeout:g} s"
        except DeadKernelError:
            return _died(watchdog, timeout, memory_bytes)
        return Status.OK, ""


def _guess_next(
    previous: str | None, current: str | None, order: tuple[str, ...] = ()
) -> str | None:
    from autograder.jail.jail import guess_next

    return guess_next(previous, current, order)


def execute(nb: NotebookNode, jail: Jail | None = None, **limits: Any) -> Execution:
    """Run `nb` once in a fresh kernel (no kernel started ahead)."""
    runner = KernelRunner(jail, warm=False)
    try:
        return runner.execute(nb, **limits)
    finally:
        runner.close()


def bound_memory(kernel: Kernel, watchdog: Watchdog, memory_bytes: int) -> None:
    """Give a jailed kernel's cgroup this notebook's bound and let the watchdog read it."""
    launch = kernel.launch
    cgroup = launch.cgroup if launch is not None else None
    if cgroup is None:
        return
    cgroup.attach(kernel.pid)
    try:
        cgroup.set_memory(memory_bytes)
    except OSError:  # v1 refuses a bound below what the kernel holds already
        watchdog.reason = "memory"
        watchdog.kill()
        raise
    cgroup.mark()
    watchdog.cgroup = cgroup


def _died(watchdog: Watchdog, timeout: float, memory_bytes: int) -> tuple[Status, str]:
    if watchdog.reason is None and watchdog.over_memory():  # the kernel killed for memory
        watchdog.reason = "memory"
    if watchdog.reason == "timeout":
        return Status.TIMEOUT, f"the notebook ran longer than {timeout:g} s"
    if watchdog.reason == "memory":
        mib = memory_bytes // 2**20
        if watchdog.cgroup is not None:
            return Status.ERROR, (
                f"the kernel was stopped: its jail used more than {mib} MiB of memory (its "
                "processes, shared memory and files in /tmp together)"
            )
        return Status.ERROR, f"the kernel was stopped for using more than {mib} MiB of memory"
    if watchdog.reason == "disk":
        return Status.ERROR, "the kernel was stopped for writing too much into the grader's folder"
    return Status.ERROR, "the kernel died (os._exit, a crash, or killed by the system)"


def _quiet_log() -> logging.Logger:
    log = logging.getLogger("autograder.nbclient")
    log.setLevel(logging.CRITICAL)
    log.propagate = False
    return log
