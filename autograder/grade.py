"""Grade a class: find the students, grade what is not graded yet, write the class outputs.

    discover (discover.py) -> tasks, minus those with a trusted state (state.py)
    -> executor (executor.py: each task (task.py) through pipeline.py on a Dask worker)
    -> each outcome written here, the state last (the commit)
    -> grades.csv, cells.csv, diagnoses.csv, gradebook, report (outputs.py)

Only this process writes OUT. A state is written after the notebook's feedback page and
executed notebook, atomically and authenticated, so a run that is killed at any moment
resumes with the same OUT and loses nothing graded; a notebook whose worker died is given to
another worker, then marked `error`.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from pathlib import Path
from typing import TextIO

from tqdm.auto import tqdm

from autograder.discover import (
    InputError,
    Master,
    Refused,
    Submission,
    discover,
    load_masters,
    read_file,
)
from autograder.executor import run_tasks
from autograder.grades import STATUSES
from autograder.jail import JailUnavailable
from autograder.outdir import autograded_path, feedback_path, log_path
from autograder.outputs import collect, write_outputs
from autograder.settings import Settings
from autograder.state import StateStore, atomic_write
from autograder.task import Outcome, Task


class Log:
    """OUT/grader.log: what the grader did, for the instructor."""

    def __init__(self, out: Path) -> None:
        self.file: TextIO = open(log_path(out), "a", encoding="utf-8")  # noqa: SIM115
        self.t = time.monotonic()

    def __call__(self, message: str) -> None:
        self.file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")
        self.file.flush()

    def lap(self, what: str) -> None:
        now = time.monotonic()
        self(f"{what}: {now - self.t:.2f} s")
        self.t = now

    def close(self) -> None:
        self.file.close()


def submission_key(content: bytes, master: Master) -> str:
    return hashlib.sha256((hashlib.sha256(content).hexdigest() + master.key).encode()).hexdigest()


def plan(
    subs: list[Submission], masters: dict[str, Master], store: StateStore, log: Log, limit: int
) -> tuple[list[Task], dict[tuple[str, str], str], int]:
    """The tasks still to grade, every file's key, and how many a trusted state holds."""
    tasks, keys, resumed = [], {}, 0
    order = {notebook: i for i, notebook in enumerate(masters)}
    for sub in subs:  # in course order, as the workers' kernels started ahead expect
        for notebook, path in sorted(sub.files.items(), key=lambda item: order[item[0]]):
            master = masters[notebook]
            try:
                content = read_file(path, limit)
            except Refused as why:
                sub.invalid[notebook] = str(why)
                del sub.files[notebook]
                continue
            key = keys[sub.student, notebook] = submission_key(content, master)
            grade, distrust = store.check(sub.student, notebook, key)
            if distrust:
                log(f"{sub.student}/{notebook}: state not trusted ({distrust}): graded again")
            if grade is not None:
                resumed += 1
                continue
            rel = str(path.relative_to(sub.folder))
            notes = tuple(sub.notes.get(notebook, []))
            tasks.append(Task(sub.student, notebook, rel, content, key, master.key, notes))
    return tasks, keys, resumed


class Writer:
    """Writes each outcome into OUT as it arrives: page, executed notebook, then the state."""

    def __init__(self, out: Path, store: StateStore, log: Log, bar: tqdm) -> None:
        self.out, self.store, self.log, self.bar = out, store, log, bar

    def outcome(self, task: Task, outcome: Outcome) -> None:
        grade = outcome.grade
        if (grade.student, grade.notebook, grade.key) != (task.student, task.notebook, task.key):
            raise RuntimeError(f"a worker answered for another task than {task.student}")
        atomic_write(feedback_path(self.out, task.student, task.notebook), outcome.feedback)
        if outcome.executed is not None:
            atomic_write(autograded_path(self.out, task.student, task.notebook), outcome.executed)
        self.store.save(grade)
        self.log(f"graded {task.student}/{task.notebook}: {grade.status} {grade.score:g}/"
                 f"{grade.max_score:g} in {grade.seconds.get('total', 0):.1f} s")  # fmt: skip
        self.bar.update(1)

    def failure(self, task: Task, err: BaseException) -> None:
        detail = "".join(traceback.format_exception(err)).strip()
        self.log(f"{task.student}/{task.notebook}: not graded ({type(err).__name__})\n{detail}")
        self.bar.update(1)


def run(settings: Settings, warnings: list[str] | None = None, refused: dict | None = None) -> int:
    """Grade the class folder settings.submissions into settings.out; 0 when it completed."""
    out = settings.out
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out)
    started = time.monotonic()
    try:
        for warning in warnings or []:
            log(warning)
        masters = load_masters(notebooks=settings.notebooks)
        if not masters:
            raise InputError("no notebooks in solutions/: nothing to grade against")
        subs = discover(settings.submissions, masters, settings.limits, out, refused)
        if not subs:
            raise InputError(f"{settings.submissions} holds no student folders")
        log(f"run: {len(subs)} students, notebooks {', '.join(masters)}; {settings}")
        if not settings.jail:
            log("--no-jail: student code runs as the grader's own user, without the jail")
        for sub in subs:
            if sub.ignored:
                log(f"{sub.student}: files not graded: {', '.join(sub.ignored)}")
        store = StateStore(out)
        tasks, keys, resumed = plan(subs, masters, store, log, settings.limits.notebook_bytes)
        if resumed and settings.progress:
            print(f"resuming: {resumed} notebooks already graded in {out}")
        bar = tqdm(total=len(tasks), unit="notebook", desc="grading", disable=not settings.progress)
        writer = Writer(out, store, log, bar)
        try:
            run_tasks(tasks, settings, writer.outcome, writer.failure)
        except JailUnavailable as err:  # raised by a worker of an existing cluster
            raise InputError(f"a worker cannot jail student code: {err}") from None
        finally:
            bar.close()
        log.lap("graded")
        grades = collect(subs, masters, store, keys)
        write_outputs(out, grades, masters, unjailed=not settings.jail)
        log.lap("outputs")
        if settings.progress:
            counts = {s: sum(g.status == s for g in grades) for s in STATUSES}
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
        log.close()
