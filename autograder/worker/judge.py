"""Probe (jailed) -> judge (here) -> CellGrade: where each answer cell's points come from.

For every autograded answer cell of a notebook, in notebook order: the cell's `CellSpec`
(autograder/checks/nbNN.py) makes the inputs (`cases()`), the sandbox runs the notebook's
setup cells, the student's answer cells up to this one (each after the master's cells above it
that define the names it reads: `autograder.worker.context`) and the spec's probe in a jailed child
and brings back what the student's code computed (`observed`, plain data), and
`spec.evaluate(cases, observed)` judges it here, in the grading worker, against the
reference: checks with points and named catalog mistakes (a `CellResult`). A cell that still
holds its release stub is not run ("not answered yet"). A cell that hangs or kills its child
is left out when later cells are probed (they run the earlier answer cells first), so one bad
cell costs only its own points. Every probe shares the notebook's wall budget.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

from autograder.checks import notebook_specs
from autograder.checks.base import CellResult, CellSpec
from autograder.model.course import Master
from autograder.model.enums import Reason
from autograder.model.grades import zero
from autograder.worker.context import Names, Plan
from autograder.worker.provenance import screen
from autograder.worker.rebuild import normalise
from autograder.worker.sandbox import ProbeJob

NOT_ANSWERED = "not answered yet: the cell still holds the stub it was handed out with"
NO_CHECKS = "no checks are registered for this cell (a course bug)"
OUT_OF_TIME = "the notebook's time budget was used up before this cell could be graded"


def is_stub(master: Master, grade_id: str, src: str | None) -> bool:
    stub = master.stubs.get(grade_id)
    return src is not None and stub is not None and normalise(src) == normalise(stub)


def probe_job(
    master: Master,
    spec: CellSpec,
    cells: list[tuple[str, str]],
    skip: set[str],
    plan: Plan | None = None,
) -> ProbeJob:
    """The sandbox's job for one cell: setup, the answers up to it (with the context cells of
    `plan`), and which probe runs."""
    return ProbeJob(
        target=spec.grade_id,
        spec_module=master.spec_module,
        notebook=master.notebook,
        setup=list(master.setup),
        answers=cells,
        skip=set(skip),
        steps=list(plan.steps) if plan is not None else [],
    )


class Judge:
    """Grades the autograded cells of one notebook: probe in the sandbox, judge here."""

    def __init__(
        self,
        master: Master,
        sandbox: Any,
        deadline: float,
        cell_timeout: float | None = None,
        ahead: bool = True,
        added: frozenset[str] = frozenset(),
    ) -> None:
        """`ahead`: another notebook will likely follow, so prepare its probe server now;
        `added`: the names the student's own added cells define (never run here)."""
        self.master, self.sandbox, self.deadline, self.ahead = master, sandbox, deadline, ahead
        self.cell_timeout = cell_timeout or getattr(sandbox, "cell_timeout", None)
        self.added = frozenset(added)
        self.notes: list[str] = []
        self.out_of_memory: list[str] = []  # cells whose probe's jail went over its memory bound
        self.skip: set[str] = set()
        self.parsed: dict[str, Names] = {}  # the student's answers, analysed once
        try:  # this notebook's checks only: a broken module elsewhere cannot stop it
            self.specs = notebook_specs(master.notebook)
        except Exception as err:
            self.specs = {}
            self.notes.append(f"the checks of {master.notebook} could not be loaded: {err!r}")

    def all(self, answers: dict[str, str | None]) -> dict[str, CellResult]:
        """Every autograded cell, in notebook order, with a fresh probe server (jailed: one
        per student's notebook, so nothing one student's code leaves behind meets another's)."""
        self.sandbox.begin(self.master.notebook, self.deadline, self.ahead)
        try:
            return {g: self.cell(g, p, answers) for g, p in self.master.graded.items()}
        finally:
            self.sandbox.end()

    def cell(self, gid: str, points: float, answers: dict[str, str | None]) -> CellResult:
        spec = self.specs.get(gid)
        if spec is None:
            self.notes.append(f"{gid}: no checks registered; tell your instructor.")
            return zero(gid, points, Reason.GRADER_ERROR, NO_CHECKS)
        if answers.get(gid) is None:
            return zero(
                gid, points, Reason.MISSING, "the answer cell is missing from your notebook"
            )
        if is_stub(self.master, gid, answers[gid]):
            return zero(gid, points, Reason.UNANSWERED, NOT_ANSWERED)
        try:
            return self._probe_and_judge(spec, gid, points, answers)
        except Exception as err:  # a bug in the checks must not stop the class
            self.notes.append(f"{gid}: internal grader error, tell your instructor: {err!r}")
            return zero(
                gid, points, Reason.GRADER_ERROR, f"the grader failed on this cell ({err!r})"
            )

    def _probe_and_judge(
        self, spec: CellSpec, gid: str, points: float, answers: dict[str, str | None]
    ) -> CellResult:
        order = self.master.code_answers[: self.master.code_answers.index(gid) + 1]
        cells = [(g, answers[g]) for g in order if answers.get(g) is not None]
        cases = spec.cases()
        while True:
            left = self.deadline - time.monotonic()
            if left < 1:
                return zero(gid, points, Reason.OUT_OF_TIME, OUT_OF_TIME)
            if self.cell_timeout is not None:  # never past the notebook's budget
                self.sandbox.cell_timeout = max(1.0, min(self.cell_timeout, left))
            running = [(g, src) for g, src in cells if g not in self.skip]
            plan = self.master.context.plan(running, gid, self.added, self.parsed)
            job = probe_job(self.master, spec, cells, self.skip, plan)
            outcome = self.sandbox.probe(job, cases)
            if outcome.out_of_memory and gid not in self.out_of_memory:
                self.out_of_memory.append(gid)
            culprit = outcome.stopped_in
            if outcome.observed is not None or culprit in (None, gid, *self.skip):
                break
            self.skip.add(culprit)  # an earlier cell hangs or kills the child: go on without it
            self.notes.append(
                f"{gid} was graded without running cell {culprit} first: {outcome.problem}."
            )
        if outcome.observed is None:
            if culprit == gid:
                self.skip.add(gid)
            return zero(gid, points, Reason.STOPPED, outcome.problem)
        observed = outcome.observed
        # graded names imported instead of defined score 0
        observed = screen(observed, answers[gid], spec.names, outcome.imported, self.master.setup)
        return explain_names(spec.evaluate(cases, observed), observed, plan.unavailable)


_UNDEFINED = re.compile(r"name '([A-Za-z_][A-Za-z0-9_]{0,99})' is not defined")


def explain_names(result: CellResult, observed: Any, unavailable: dict[str, str]) -> CellResult:
    """When the answer lost points on a NameError for a name the probe could not give it (one
    that only the student's added cells, a test cell or a later cell define), say which name
    and why in the cell's problem."""
    if not unavailable or result.score >= result.max_score:
        return result
    texts = [result.problem, *(c.detail for c in result.checks)]
    texts += (
        [v for v in observed.values() if isinstance(v, str)] if isinstance(observed, dict) else []
    )
    named = sorted(
        {n for t in texts for n in _UNDEFINED.findall(str(t)[:2000]) if n in unavailable}
    )
    if named:
        why = " ".join(f"`{n}`: {unavailable[n]}." for n in named)
        why += f" Define {'it' if len(named) == 1 else 'them'} in the answer cell."
        result.problem = f"{result.problem} ({why})" if result.problem else why
    return result


def score_answers(
    master: Master, answers: dict[str, str | None], sandbox: Any, deadline: float = math.inf
) -> tuple[dict[str, CellResult], list[str]]:
    """Every autograded cell of `master` judged, and the notes: `Judge` in one call."""
    judge = Judge(master, sandbox, deadline)
    return judge.all(answers), judge.notes
