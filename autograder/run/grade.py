"""Grade a class: find the students, grade what is not graded yet, write the class outputs.

    discover (discover.py) -> tasks, minus those with a trusted state (state.py)
    -> proof.py: the master solutions graded the same way first, once per grader and
       environment (cached); a grader that cannot grade stops here with the cause
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
import sys
import time
import traceback
from pathlib import Path
from typing import TextIO

from tqdm.auto import tqdm

from autograder.intake.discover import Refused, Submission, read_class, read_file
from autograder.intake.intake import PRESETS, Pattern, PatternError
from autograder.jail.jail import JailUnavailable
from autograder.model.course import InputError, Master, load_masters
from autograder.model.enums import Status
from autograder.model.settings import Settings
from autograder.publish.outdir import autograded_path, feedback_path, log_path
from autograder.publish.outputs import choices_of, collect, write_outputs
from autograder.publish.sanitise import sanitised_json
from autograder.publish.state import StateStore, atomic_write
from autograder.run.executor import run_tasks
from autograder.run.proof import prove
from autograder.worker.task import Outcome, Task


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
        if outcome.executed is not None:  # student content made inert for formgrader
            executed = sanitised_json(outcome.executed)
            atomic_write(autograded_path(self.out, task.student, task.notebook), executed)
        self.store.save(grade)
        self.log(f"graded {task.student}/{task.notebook}: {grade.status} {grade.score:g}/"
                 f"{grade.max_score:g} in {grade.seconds.get('total', 0):.1f} s")  # fmt: skip
        self.bar.update(1)

    def failure(self, task: Task, err: BaseException) -> None:
        detail = "".join(traceback.format_exception(err)).strip()
        self.log(f"{task.student}/{task.notebook}: not graded ({type(err).__name__})\n{detail}")
        self.bar.update(1)


def _students(
    settings: Settings,
    masters: dict[str, Master],
    out: Path,
    refused: dict | None,
    pattern: Pattern | None,
    source: str | None,
    log: Log,
) -> list[Submission]:
    """The class as discover.read_class reads it; what it noticed said on stderr and logged."""
    where = source or str(settings.submissions)
    try:
        klass = read_class(settings.submissions, masters, settings.limits, out, refused, pattern)
    except PatternError as err:
        raise InputError(str(err)) from None
    notices = list(klass.warnings)
    if klass.guessed and klass.pattern is not None:
        name, about = klass.pattern.name, klass.pattern.about
        notices.insert(0, f"{where} is laid out as {about}: read with --pattern {name}")
    for notice in notices:  # said even with --quiet: each is a choice the grader made
        log(notice)
        print(f"note: {notice}", file=sys.stderr)
    if not klass.submissions:
        if klass.pattern is not None:
            raise InputError(f"{where}: no .ipynb file fits --pattern {klass.pattern.name}")
        raise InputError(
            f"{where} holds no student folders (one folder per student, named by the student "
            f"id) nor files named as a platform names them (--pattern {', '.join(PRESETS)})"
        )
    return klass.submissions


class Notices:
    """What the instructor must know of the workers (their jails without cgroups): each line
    once, on stderr and in the log, and in this run's report (report.html.j2's banner)."""

    def __init__(self, log: Log) -> None:
        self.log, self.lines = log, []

    def add(self, line: str) -> None:
        if line not in self.lines:
            self.lines.append(line)
            self.log(line)
            print(f"note: {line}", file=sys.stderr)


def run(
    settings: Settings,
    warnings: list[str] | None = None,
    refused: dict | None = None,
    pattern: Pattern | None = None,
    source: str | None = None,
) -> int:
    """Grade the class folder settings.submissions (read by `pattern`, or one folder per
    student) into settings.out; 0 when it completed. `source` names SUBMISSIONS as the
    instructor gave it (a .zip is read from a folder of OUT)."""
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
        subs = _students(settings, masters, out, refused, pattern, source, log)
        log(f"run: {len(subs)} students, notebooks {', '.join(masters)}; {settings}")
        if not settings.jail:
            log("--no-jail: student code runs as the grader's own user, without the jail")
        for sub in subs:
            if sub.ignored:
                log(f"{sub.student}: files not graded: {', '.join(sorted(sub.ignored))}")
        store = StateStore(out)
        tasks, keys, resumed = plan(subs, masters, store, log, settings.limits.notebook_bytes)
        for warning in prove(settings, masters, {t.notebook for t in tasks}, log):
            log(f"warning: {warning}")  # the masters graded first, or stop (CannotGrade)
            print(f"warning: {warning}", file=sys.stderr)
        if resumed and settings.progress:
            print(f"resuming: {resumed} notebooks already graded in {out}")
        bar = tqdm(total=len(tasks), unit="notebook", desc="grading", disable=not settings.progress)
        writer = Writer(out, store, log, bar)
        notices = Notices(log)
        try:
            run_tasks(tasks, settings, writer.outcome, writer.failure, notices.add)
        except JailUnavailable as err:  # raised by a worker of an existing cluster
            raise InputError(f"a worker cannot jail student code: {err}") from None
        finally:
            bar.close()
        log.lap("graded")
        grades = collect(subs, masters, store, keys)
        write_outputs(out, grades, masters, not settings.jail, choices_of(subs), notices.lines)
        log.lap("outputs")
        if settings.progress:
            counts = {s: sum(g.status == s for g in grades) for s in Status}
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
