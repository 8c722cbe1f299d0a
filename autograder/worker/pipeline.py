"""One (student, notebook) through the stages, in a grading worker.

    Task (the file's bytes) -> parse -> rebuild -> [execute (jailed kernel) | judge (jailed
    probes, judged here)] -> feedback page -> Outcome (NotebookGrade, page, executed notebook)

The kernel run and the probes go on side by side and share one wall budget
(`Limits.timeout`), which also covers rendering the page: the kernel and the probes stop
`Limits.render_seconds` before its end, and a page that would start later shows the summary
without the notebook. A worker keeps a `Runtime` between tasks: the masters, a Jupyter kernel
started ahead of its turn and the probe sandbox; the check modules are imported when it
starts, before any student code runs. Nothing here writes OUT: the grading process does.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.checks import notebook_specs
from autograder.checks.base import CellResult
from autograder.intake.discover import parse_json
from autograder.jail.jail import Jail, require_bwrap
from autograder.model.course import Master, load_masters
from autograder.model.enums import CellState, Reason, Status
from autograder.model.grades import CellGrade, NotebookGrade, zero
from autograder.model.notebook_io import grade_id, is_answer, source
from autograder.model.settings import Limits
from autograder.publish.feedback import page, prepare_notebook, summary_page
from autograder.worker.execute import KernelRunner
from autograder.worker.judge import NOT_ANSWERED, Judge, is_stub
from autograder.worker.rebuild import Rebuilt, has_nbgrader_metadata, rebuild
from autograder.worker.sandbox import Sandbox
from autograder.worker.task import Outcome, Task

# ---- what a worker keeps --------------------------------------------------------------------


def make_jail(enabled: bool) -> Jail | None:
    """The jail student code runs in, or None with --no-jail."""
    if not enabled:
        return None
    require_bwrap()  # raises JailUnavailable: the reason and the fix in one line
    return Jail.from_settings()


class Runtime:
    """A worker's masters, warm kernel runner and probe sandbox (started once, reused)."""

    def __init__(self, limits: Limits, jail: bool, notebooks: tuple[str, ...] = ()) -> None:
        self.limits, self.jailed = limits, jail
        self.masters = load_masters(notebooks=notebooks)
        self.lock = threading.Lock()  # one notebook at a time per worker
        self.scorer = ThreadPoolExecutor(1, thread_name_prefix="judge")
        self.scratch = Path(tempfile.mkdtemp(prefix="autograder-"))
        jail_ = make_jail(jail)
        os.environ["MPLBACKEND"] = "Agg"
        order = tuple(self.masters)  # the notebooks being graded: what comes next is among them
        self.runner = KernelRunner(jail=jail_, order=order)  # the first kernel boots from here on
        self.sandbox = Sandbox(
            limits.cell_timeout, limits.memory_bytes, self.scratch, jail=jail_, order=order
        )
        self.sandbox.start()
        for notebook in self.masters:  # the checks are in memory before any student code runs
            notebook_specs(notebook)
            _ = self.masters[notebook].stubs, self.masters[notebook].setup
            _ = self.masters[notebook].context  # the names an answer may read from above

    def close(self) -> None:
        try:
            self.runner.close()
            self.sandbox.close()
        finally:
            self.scorer.shutdown(wait=False, cancel_futures=True)
            shutil.rmtree(self.scratch, ignore_errors=True)


# ---- one notebook ------------------------------------------------------------------------------


def parse_notebook(content: bytes) -> tuple[NotebookNode | None, str]:
    """(notebook, "") or (None, why it is not a readable notebook)."""
    data = parse_json(content)
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


def answer_sources(rebuilt: Rebuilt) -> dict[str, str | None]:
    """Every answer cell (code and written) -> the student's source, None when missing."""
    return {
        gid: None if rebuilt.how.get(gid) == "missing" else source(c)
        for c in rebuilt.notebook.cells
        if is_answer(c) and (gid := grade_id(c))
    }


def unanswered(master: Master, answers: dict[str, str | None]) -> bool:
    """True when no answer cell differs from the stub it was handed out with."""
    return all(src is None or is_stub(master, gid, src) for gid, src in answers.items())


def cell_grades(
    master: Master,
    results: dict[str, CellResult],
    answers: dict[str, str | None],
    anchors: dict[str, str],
) -> list[CellGrade]:
    """Autograded and manually graded cells, in the master's order."""
    cells = []
    for gid, c in ((g, c) for c in master.nb.cells if (g := grade_id(c))):
        if gid in master.graded:
            cells.append(CellGrade.judged(results[gid], master.graded[gid], anchors.get(gid, gid)))
        elif gid in master.manual and is_answer(c):
            src = answers.get(gid)
            blank = src is None or is_stub(master, gid, src)
            state = CellState.UNANSWERED if blank else CellState.WAITING
            cells.append(
                CellGrade(gid, master.manual[gid], 0.0, None, anchors.get(gid, gid), True, state)
            )
    return cells


def grade_notebook(task: Task, runtime: Runtime) -> Outcome:
    """Grade one notebook within its wall budget; raise only on a grader bug."""
    with runtime.lock:
        return _grade(task, runtime, time.monotonic())


def _grade(task: Task, runtime: Runtime, start: float) -> Outcome:
    master = runtime.masters[task.notebook]
    if master.key != task.master_key:
        raise RuntimeError("this worker grades with another version of the course or grader")
    grade = NotebookGrade(
        task.student, task.notebook, Status.OK, file=task.file, key=task.key,
        notes=list(task.notes), unjailed=not runtime.jailed,
    )  # fmt: skip
    student_nb, problem = parse_notebook(task.content)
    rebuilt = None
    if student_nb is not None:
        try:
            rebuilt = rebuild(master.nb, student_nb, master.stubs)
        except Exception as err:  # any file may be hostile: that file is invalid, no more
            problem = f"its cells could not be read ({type(err).__name__})"
    if rebuilt is None:
        grade.status, grade.detail = Status.INVALID, problem
        grade.cells = cell_grades(
            master, _zeros(master, Reason.UNREADABLE, "the notebook file could not be read"), {}, {}
        )
        return Outcome(grade, summary_page(grade))
    if not has_nbgrader_metadata(student_nb):
        grade.notes.append(
            "the notebook's grading metadata was missing; answers were found by the names "
            "they define."
        )
    grade.notes += rebuilt.notes
    answers = answer_sources(rebuilt)
    anchors = {
        g: c.get("id", g) for c in rebuilt.notebook.cells if is_answer(c) and (g := grade_id(c))
    }
    if unanswered(master, answers):
        grade.status = Status.UNANSWERED
        grade.cells = cell_grades(
            master, _zeros(master, Reason.UNANSWERED, NOT_ANSWERED), answers, anchors
        )
        return Outcome(grade, summary_page(grade))
    return _run_and_judge(task, runtime, grade, rebuilt, answers, anchors, start)


def _zeros(master: Master, reason: Reason, problem: str) -> dict[str, CellResult]:
    return {g: zero(g, p, reason, problem) for g, p in master.graded.items()}


def _run_and_judge(
    task: Task,
    runtime: Runtime,
    grade: NotebookGrade,
    rebuilt: Rebuilt,
    answers: dict[str, str | None],
    anchors: dict[str, str],
    start: float,
) -> Outcome:
    """The kernel and the probes side by side, then the page, all within the budget."""
    limits, master = runtime.limits, runtime.masters[task.notebook]
    reserve = min(limits.render_seconds, limits.timeout / 4)
    work_end = start + limits.timeout - reserve
    judge = Judge(
        master, runtime.sandbox, work_end, limits.cell_timeout, task.more, rebuilt.added_names
    )
    code_answers = {g: answers.get(g) for g in master.code_answers}
    scoring = runtime.scorer.submit(judge.all, code_answers)
    run = runtime.runner.execute(
        copy.deepcopy(rebuilt.notebook),
        timeout=max(1.0, work_end - time.monotonic()),
        cell_timeout=limits.cell_timeout,
        memory_bytes=limits.memory_bytes,
        more=task.more,
        notebook=task.notebook,  # a jailed kernel hides the helpers that give its answers away
    )
    grade.status, grade.detail = run.status, run.detail
    results = scoring.result()
    probed = time.monotonic()
    grade.notes += judge.notes
    if judge.out_of_memory and grade.status == Status.OK:  # a probe's jail was stopped for memory
        grade.status = Status.ERROR
        grade.detail = (
            f"the jail running {', '.join(judge.out_of_memory)} used more than "
            f"{limits.memory_mb} MiB of memory and was stopped; the other cells keep their points"
        )
    grade.cells = cell_grades(master, results, answers, anchors)
    grade.seconds = {"kernel": round(run.seconds, 3), "kernel_wait": round(run.waited, 3)}
    if start + limits.timeout - time.monotonic() < min(5.0, reserve):
        grade.notes.append("The notebook itself is not shown: grading used up its time.")
        html = summary_page(grade)
    else:
        html = page(grade, prepare_notebook(run.notebook, results, limits))
    grade.seconds.update(
        probes_and_kernel=round(probed - start, 3), total=round(time.monotonic() - start, 3)
    )
    return Outcome(grade, html, nbformat.writes(run.notebook))
