"""Grade tasks on Dask distributed: a LocalCluster for `--jobs N`, or `--scheduler ADDRESS`.

A task is one (student, notebook) (`task.Task`, the file's bytes included, so workers
need no shared filesystem); its result (`task.Outcome`) comes back to the grading process,
which alone writes OUT. Each worker holds a `pipeline.Runtime` in a worker plugin: the masters,
its kernels and the probe sandbox; a lone worker starts the next notebook's kernel and probe
server ahead of their turn, so that consecutive notebooks do not wait for Python and torch
(several workers do not: see `run_tasks`). `--jobs N` starts N single-threaded worker
processes on 127.0.0.1 (random ports, no dashboard, quiet logs); `--scheduler` uses any
existing cluster (`dask scheduler` / `dask worker`, dask-jobqueue, dask-kubernetes) whose
workers run this project's environment, over mutual TLS (`autograder.run.cluster`: a plain
address only on loopback or with --insecure-plain-tcp). Before the first task, each worker
says whether its jails have cgroups (`memory_bounds`); one that has none is reported. When a
worker dies, the scheduler gives its task to another worker (`Limits.worker_retries` times on
a local cluster; an external scheduler's own `distributed.scheduler.allowed-failures`), and
the task is reported as failed after that.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dask
from distributed import Client, LocalCluster, as_completed, get_worker
from distributed.diagnostics.plugin import WorkerPlugin

from autograder.model.settings import Limits, Settings
from autograder.worker.task import Outcome, Task

PLUGIN = "autograder-runtime"


class GradingPlugin(WorkerPlugin):
    """Keeps one warm `Runtime` per worker process."""

    name = PLUGIN

    def __init__(self, limits: dict, jail: bool, notebooks: tuple[str, ...]) -> None:
        self.limits, self.jail, self.notebooks = limits, jail, notebooks
        self.runtime: Any = None  # a pipeline.Runtime, made on the worker

    def setup(self, worker: object) -> None:
        # The probe sandbox starts child processes with multiprocessing, which refuses to do
        # so from a daemonic process; dask's nanny starts its worker as one.
        multiprocessing.current_process()._config["daemon"] = False  # type: ignore[attr-defined]
        warnings.simplefilter("ignore")
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        import torch  # here: the grading process itself never needs torch

        torch.set_num_threads(1)
        from autograder.worker.pipeline import Runtime  # the workers' side: kernels, probes, checks

        self.runtime = Runtime(Limits.from_json(self.limits), self.jail, self.notebooks)

    def teardown(self, worker: object) -> None:
        if self.runtime is not None:
            self.runtime.close()


def grade_on_worker(task: Task) -> Outcome:
    """The task function: grade one notebook with this worker's runtime."""
    from autograder.worker.pipeline import grade_notebook  # loaded by the plugin's setup already

    plugin = get_worker().plugins[PLUGIN]
    if plugin.runtime is None:
        raise RuntimeError("the grading runtime did not start on this worker")
    return grade_notebook(task, plugin.runtime)


@contextmanager
def connect(settings: Settings, tasks: int) -> Iterator[Client]:
    """A client of the cluster the settings name (started here for --jobs: as many workers
    as there are tasks, up to --jobs)."""
    if settings.scheduler:
        security = settings.tls.security() if settings.tls is not None else None
        with Client(
            settings.scheduler, timeout=settings.limits.connect_timeout, security=security
        ) as client:
            yield client
        return
    config = {
        "distributed.worker.daemon": False,
        "distributed.scheduler.allowed-failures": settings.limits.worker_retries,
        "distributed.admin.tick.limit": "1h",  # a busy single core is not an event-loop bug
        "distributed.logging.distributed": "error",
    }
    scratch = Path(tempfile.mkdtemp(prefix=".dask-", dir=settings.out))  # not in $TMPDIR
    with dask.config.set({**config, "temporary-directory": str(scratch)}):
        cluster = LocalCluster(
            n_workers=max(1, min(settings.jobs, tasks)),
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            scheduler_port=0,
            dashboard_address=None,
            # The scheduler serves HTTP (health checks) even without a dashboard, on 8787 unless
            # told otherwise: a random port, so a busy 8787 prints no warning to the instructor.
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            worker_dashboard_address=None,
            memory_limit=0,  # kernels and probes have their own bounds
            silence_logs=logging.CRITICAL,
            local_directory=str(scratch),
        )
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close(timeout=30)
            shutil.rmtree(scratch, ignore_errors=True)


def memory_bounds() -> str:
    """On a worker: why its jails have no cgroup ("" when they have one)."""
    from autograder.jail import cgroup  # the worker's answer, from its own process

    return cgroup.why_not()


def unbounded(client: Client) -> list[str]:
    """One line per distinct reason the workers' jails have no cgroup (none: all have one)."""
    answers = client.run(memory_bounds)
    reasons: dict[str, list[str]] = {}
    for worker, why in sorted(answers.items()):
        if why:
            reasons.setdefault(str(why), []).append(worker)
    lines = []
    for why, workers in reasons.items():
        where = "" if len(workers) == len(answers) else f" on {', '.join(workers)}"
        lines.append(
            f"memory is not bounded per jail{where}: no cgroup can be had ({why}); each jail's "
            "RSS, open files and processes are bounded instead, and memfd_create is refused"
        )
    return lines


def run_tasks(
    tasks: list[Task],
    settings: Settings,
    on_outcome: Callable[[Task, Outcome], None],
    on_failure: Callable[[Task, BaseException], None],
    on_notice: Callable[[str], None] | None = None,
) -> None:
    """Grade every task; each ends in exactly one call of on_outcome or on_failure.
    `on_notice` hears what the instructor must know of the workers (jails without cgroups)."""
    if not tasks:
        return
    with connect(settings, len(tasks)) as client:
        plugin = GradingPlugin(settings.limits.to_json(), settings.jail, settings.notebooks)
        client.register_plugin(plugin)
        if settings.jail and on_notice is not None:
            for line in unbounded(client):
                on_notice(line)
        futures = {}
        workers = max(1, sum(client.nthreads().values()))
        # In the order given (priority). A lone worker starts the next notebook's kernel and
        # probe server ahead (its guess follows that order), except after the last task. With
        # several workers the scheduler decides who takes which task, the guess often misses,
        # and a missed start costs as much as the notebook: on two cores, workers that started
        # ahead kept the machine busy 68% longer for the same class. So none starts ahead.
        ahead = workers == 1
        for i, task in enumerate(tasks):
            task = dataclasses.replace(task, more=ahead and i < len(tasks) - 1)
            key = f"grade-{task.student}-{task.notebook}-{uuid.uuid4().hex[:8]}"
            future = client.submit(grade_on_worker, task, key=key, pure=False, priority=-i)
            futures[future] = task
        for future in as_completed(futures):
            task = futures.pop(future)
            try:
                outcome = future.result()
            except Exception as err:  # KilledWorker, a grader bug on the worker, ...
                on_failure(task, err)
            else:
                on_outcome(task, outcome)
            future.release()
