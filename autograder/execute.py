"""Execute a rebuilt notebook in a Jupyter kernel, within time, memory and output bounds.

A `KernelRunner` gives every notebook a fresh kernel, started ahead of its turn. nbclient runs
the cells (errors allowed, as nbgrader does) with a per-cell timeout. A watchdog thread
enforces the per-notebook deadline and the memory bound: it kills the kernel's process group
(jupyter_client starts every kernel in its own session) and every process below it, which also
stops a loop that ignores SIGINT. Stored output is capped per cell, so a cell that prints
100 MB costs neither memory nor a huge notebook. The outcome is a status: `ok` (ran to the
end), `timeout` or `error` (the kernel died: os._exit, killed for memory, failed to start).
"""

from __future__ import annotations

import asyncio
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
from queue import Empty
from typing import Any

import psutil
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_output

KERNEL_ARGS = ["--InteractiveShell.xmode=Minimal"]
OUTPUT_CAP = 256 * 1024  # characters of output kept per cell


@dataclass
class Execution:
    notebook: NotebookNode
    status: str  # ok | timeout | error
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
        self._proc: psutil.Process | None = None
        self._stop_event = threading.Event()

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
            rss = tree_rss(self._proc)
            self.peak = max(self.peak, rss)
            if rss > self.memory_bytes:
                self.reason = "memory"
                self.kill()
                return

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


class GradingClient(NotebookClient):
    """nbclient with capped outputs and a watchdog told about the kernel's pid."""

    def __init__(self, nb: NotebookNode, watchdog: Watchdog, **kw: Any) -> None:
        super().__init__(nb, **kw)
        self.watchdog = watchdog
        self._sizes: dict[int, int] = {}

    def output(
        self, outs: list[NotebookNode], msg: dict[str, Any], display_id: str, cell_index: int
    ) -> NotebookNode | None:
        used = self._sizes.get(cell_index, 0)
        if used > OUTPUT_CAP:
            return None
        size = _message_size(msg)
        self._sizes[cell_index] = used + size
        if used + size > OUTPUT_CAP:
            note = new_output(
                "stream",
                name="stderr",
                text=f"\n[output truncated by the grader: more than {OUTPUT_CAP // 1024} KB]\n",
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
    """The kernel's environment: nbgrader's marker and a headless matplotlib backend.

    The inline backend is as headless as Agg and, unlike Agg, turns each figure into a PNG
    output, so the feedback page shows the student's plots.
    """
    env = dict(os.environ)
    env["NBGRADER_EXECUTION"] = "autograde"
    env["MPLBACKEND"] = INLINE_BACKEND
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


PRELOAD = "import torch\nimport matplotlib.pyplot"  # what every course notebook imports first


@dataclass
class Kernel:
    km: Any
    workdir: Path
    error: str = ""

    @property
    def pid(self) -> int | None:
        return getattr(getattr(self.km, "provisioner", None), "pid", None)


class KernelRunner:
    """Runs notebooks, each in a fresh kernel that was started ahead of its turn.

    While one notebook runs, the next kernel boots and imports torch and matplotlib (what
    every course notebook's setup cell does first), so a class does not wait ~2-3 s per
    notebook for Python and torch. Every kernel runs exactly one notebook, in its own working
    folder, and is killed afterwards. All kernel I/O runs on one event loop in a thread.
    """

    def __init__(self, warm: bool = True, preload: str = PRELOAD) -> None:
        self.warm, self.preload = warm, preload
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._spare: concurrent.futures.Future | None = None
        if warm:
            self.prestart()

    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _start(self) -> Kernel:
        from jupyter_client.manager import AsyncKernelManager

        workdir = Path(tempfile.mkdtemp(prefix="kernel-"))
        km = AsyncKernelManager(kernel_name="python3")
        try:
            await km.start_kernel(
                extra_arguments=[*KERNEL_ARGS, "--HistoryManager.hist_file=:memory:"],
                env=kernel_env(),
                cwd=str(workdir),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self.warm and self.preload:
                kc = km.client()
                kc.start_channels()
                try:
                    await kc.wait_for_ready(timeout=60)
                    msg_id = kc.execute(self.preload, silent=True, store_history=False)
                    reply: dict[str, Any] = {}
                    while reply.get("parent_header", {}).get("msg_id") != msg_id:
                        try:
                            reply = await kc.get_shell_msg(timeout=60)
                        except Empty:  # still importing or reply lost: the notebook waits
                            break
                finally:
                    kc.stop_channels()
        except Exception as err:  # reported by the notebook that gets this kernel
            await self._stop(Kernel(km, workdir))
            return Kernel(None, workdir, f"{type(err).__name__}: {str(err)[:200]}")
        return Kernel(km, workdir)

    async def _stop(self, kernel: Kernel, client: Any = None) -> None:
        try:
            if client is not None and client.kc is not None:
                client.kc.stop_channels()
            if kernel.km is not None:
                try:
                    await kernel.km.shutdown_kernel(now=True)
                except Exception:
                    await kernel.km.cleanup_resources()
        except Exception:  # a kernel that is gone already
            pass
        shutil.rmtree(kernel.workdir, ignore_errors=True)

    def prestart(self) -> None:
        if self._spare is None:
            self._spare = asyncio.run_coroutine_threadsafe(self._start(), self._loop)

    def _take(self) -> Kernel:
        spare, self._spare = self._spare, None
        kernel = spare.result() if spare is not None else self._call(self._start())
        alive = kernel.km is not None and self._call(kernel.km.is_alive())
        if not alive:  # died while it waited: start one now
            self._call(self._stop(kernel))
            kernel = self._call(self._start())
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
    ) -> Execution:
        """Run every cell of `nb` (in place) and say how it went; `more`: another notebook
        follows, so start its kernel now."""
        start = time.monotonic()
        deadline = start + timeout
        watchdog = Watchdog(deadline, memory_bytes)

        def cell_limit(cell: NotebookNode) -> int:
            return max(1, int(min(cell_timeout, deadline - time.monotonic()) + 0.999))

        if on_kernel is not None:
            on_kernel(watchdog)
        watchdog.start()
        status, detail = "ok", ""
        kernel, client = None, None
        waited = 0.0
        try:
            kernel = self._take()
            waited = time.monotonic() - start
            watchdog.attach(kernel.pid)
            if self.warm and more:
                self.prestart()  # the next notebook's kernel boots while this one runs
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
            self._call(client.async_execute())
        except CellTimeoutError:
            status, detail = "timeout", f"a cell ran longer than {cell_timeout:g} s"
            if time.monotonic() >= deadline - 1:
                detail = f"the notebook ran longer than {timeout:g} s"
        except DeadKernelError:
            status, detail = _died(watchdog, timeout, memory_bytes)
        except Exception as err:  # kernel failed to start, or was killed while starting
            status, detail = _died(watchdog, timeout, memory_bytes)
            if watchdog.reason is None:
                detail = f"the kernel failed: {type(err).__name__}: {str(err)[:200]}"
        finally:
            watchdog.stop()
            watchdog.kill()
            if kernel is not None:
                self._call(self._stop(kernel, client))
        if status == "ok" and watchdog.reason == "timeout":
            status, detail = "timeout", f"the notebook ran longer than {timeout:g} s"
        return Execution(nb, status, detail, time.monotonic() - start, waited)


def execute(nb: NotebookNode, **limits: Any) -> Execution:
    """Run `nb` once in a fresh kernel (no kernel started ahead)."""
    runner = KernelRunner(warm=False)
    try:
        return runner.execute(nb, **limits)
    finally:
        runner.close()


def _died(watchdog: Watchdog, timeout: float, memory_bytes: int) -> tuple[str, str]:
    if watchdog.reason == "timeout":
        return "timeout", f"the notebook ran longer than {timeout:g} s"
    if watchdog.reason == "memory":
        mib = memory_bytes // 2**20
        return "error", f"the kernel was stopped for using more than {mib} MiB of memory"
    return "error", "the kernel died (os._exit, a crash, or killed by the system)"


def _quiet_log() -> logging.Logger:
    log = logging.getLogger("autograder.nbclient")
    log.setLevel(logging.CRITICAL)
    log.propagate = False
    return log
