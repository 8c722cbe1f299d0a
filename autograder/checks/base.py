"""Scored checks for one answer cell, split so that student code never judges itself.

A `CellSpec` works in three steps:

- `cases()` (trusted) builds the inputs: seeded tensors, sizes, weights, as plain data only
  (dicts, lists, tuples, str, int, float, bool, None, torch tensors, numpy arrays), so that a
  process without this package can load them.
- the probe `autograder.probe.<probe_module>.<probe_function>(ns, cases)` (untrusted) runs the
  student's objects, looked up in the namespace `ns`, on those inputs and returns what they
  produced as plain data. It runs where the student's code runs, so it only records.
- `judge(cases, observed)` (trusted) computes the references, scores each check and names the
  catalog mistakes the observed outputs show.

In a notebook all three run in the kernel (`grade_in_notebook`); the grader runs the probe in
a jailed child process and `cases`/`judge` in its own, so a student who monkeypatches
`torch.allclose` or this package only fools the kernel's copy, never the grade.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autograder.checks.catalog import describe
from autograder.model.enums import Reason
from autograder.probe import ERROR_SUFFIX, EXEC, IMPORTED, MISSING


@dataclass
class Check:
    """One scored property of an answer."""

    name: str
    points: float
    earned: float
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.earned >= self.points


@dataclass
class CellResult:
    """Outcome of grading one answer cell: checks with points, named mistakes, errors."""

    grade_id: str
    checks: list[Check] = field(default_factory=list)
    mistakes: list[str] = field(default_factory=list)
    problem: str = ""  # why the answer could not be run at all, in words
    reason: Reason | None = None  # why it scored zero unjudged (None: judged, or nothing wrong)

    @property
    def score(self) -> float:
        return round(sum(c.earned for c in self.checks), 6)

    @property
    def max_score(self) -> float:
        return round(sum(c.points for c in self.checks), 6)

    def to_dict(self) -> dict[str, Any]:
        return {
            "grade_id": self.grade_id,
            "checks": [vars(c) for c in self.checks],
            "mistakes": list(self.mistakes),
            "problem": self.problem,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        return cls(
            grade_id=data["grade_id"],
            checks=[Check(**c) for c in data["checks"]],
            mistakes=list(data["mistakes"]),
            problem=data.get("problem", ""),
            reason=_reason(data),
        )

    def render(self) -> str:
        """Plain-text report, the same in the notebook and in the feedback."""
        lines = [f"{self.grade_id}: {_fmt(self.score)} / {_fmt(self.max_score)} points"]
        if self.problem:
            lines.append(f"  Could not grade the answer: {self.problem}")
        for c in self.checks:
            mark = "ok  " if c.passed else "FAIL"
            lines.append(f"  [{mark}] {_fmt(c.earned)}/{_fmt(c.points)}  {c.name}")
            if c.detail and not c.passed:
                lines.append(f"         {c.detail}")
        for m in self.mistakes:
            lines.append(f"  Likely mistake ({m}): {describe(m, self.grade_id)}")
        return "\n".join(lines)


def _fmt(x: float) -> str:
    return f"{x:g}"


# The reasons of results saved before `reason` was (state files written by earlier versions):
# the start of the problem each was written with, read once when such a file is loaded.
LEGACY_REASONS = (
    ("the answer cell raised", Reason.RAISED),
    ("not answered yet", Reason.UNANSWERED),
)


def _reason(data: dict[str, Any]) -> Reason | None:
    """The saved reason; for a result saved before there was one, the reason its problem was
    written for (the only two that were ever told apart: raised, not answered yet)."""
    if "reason" in data:
        return Reason(data["reason"]) if data["reason"] is not None else None
    problem = str(data.get("problem") or "")
    return next((r for start, r in LEGACY_REASONS if problem.startswith(start)), None)


class Scorer:
    """Accumulates the checks of one judge call."""

    def __init__(self, grade_id: str) -> None:
        self.result = CellResult(grade_id)

    def check(self, name: str, points: float, ok: bool, detail: str = "") -> bool:
        self.result.checks.append(Check(name, points, points if ok else 0.0, detail))
        return bool(ok)

    def name(self, *mistakes: str) -> None:
        for m in mistakes:
            if m not in self.result.mistakes:
                self.result.mistakes.append(m)

    def fail_all(
        self, names_points: list[tuple[str, float]], problem: str, reason: Reason | None = None
    ) -> CellResult:
        self.result.problem, self.result.reason = problem, reason
        for name, points in names_points:
            self.check(name, points, False)
        return self.result


class CellSpec:
    """Base class of the graded checks of one answer cell; subclasses fill the steps.

    `probe_module` and `probe_function` name the probe: `autograder.probe.<module>.<function>`
    (see `autograder.checks.probe_callable`).
    """

    notebook: str = ""
    grade_id: str = ""
    names: tuple[str, ...] = ()
    points: float = 0.0  # must equal the sum of the check points and the test cell's points
    probe_module: str = ""  # "nb05", "values", ...
    probe_function: str = ""  # "probe_head", "probe_values", ...
    size_attr: str = "sizes"  # see resized()
    size_group: int = 1

    def cases(self) -> dict[str, Any]:
        raise NotImplementedError

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        raise NotImplementedError

    def probe(self, ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
        """Run this spec's probe here (a shortcut for `probe_callable(spec)(ns, cases)`)."""
        from autograder.checks import probe_callable

        return probe_callable(self)(ns, cases)

    def resized(self, extra: dict[str, tuple], seed: int | None = None) -> CellSpec:
        """A copy of this spec that also checks the extra sizes (scored with the other sizes)
        and draws its tensors from another seed. Specs without sizes return a plain copy.

        `size_attr` names the dict of sizes; the last group whose keys it extends is the
        'other sizes' group (`size_group`).
        """
        spec = copy.copy(self)
        sizes = getattr(self, self.size_attr, None)
        if isinstance(sizes, dict) and extra:
            setattr(spec, self.size_attr, {**sizes, **extra})
            groups = [list(g) for g in getattr(self, "groups", [])]
            if groups:
                groups[self.size_group][-1] = [*groups[self.size_group][-1], *extra]
                spec.groups = [tuple(g) for g in groups]  # type: ignore[attr-defined]
        if seed is not None:
            spec.seed = seed  # type: ignore[attr-defined]
        return spec

    def missing_names(self, ns: dict[str, Any]) -> list[str]:
        return [n for n in self.names if n not in ns]

    def evaluate(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        """judge(), or zero points with the reason when the answer never ran or was imported."""
        never = _never_ran(observed)
        if never is None:
            return self.judge(cases, observed)
        reason, problem, mistake = never
        scorer = Scorer(self.grade_id)
        result = scorer.fail_all(
            [("the answer cell runs and defines its names", self.points)], problem, reason
        )
        if mistake:
            scorer.name(mistake)
        return result


def _never_ran(observed: dict[str, Any]) -> tuple[Reason, str, str] | None:
    """(reason, problem in words, catalog id or '') for the markers of an answer that never
    ran; None when the probe observed the answer."""
    if IMPORTED in observed:
        names = ", ".join(str(n) for n in observed[IMPORTED])
        return (
            Reason.IMPORTED,
            f"{names} is imported, not written in the answer cell: define it there yourself.",
            "imported-answer",
        )
    if MISSING in observed:
        names = ", ".join(str(n) for n in observed[MISSING])
        return (
            Reason.UNDEFINED,
            f"{names} is not defined: run the answer cell, and keep its names.",
            "",
        )
    if EXEC in observed:
        return Reason.RAISED, f"the answer cell raised {observed[EXEC]}", ""
    return None


def name_mistakes(scorer: Scorer, evidence: Any) -> None:
    """Name the catalog mistakes the evidence shows and confirms, when points were lost.

    The one rule of every judge: a correct answer (full marks) is never given a mistake, and
    a mistake is named only when its property holds and, where the reference can replay the
    answer, the reference with that mistake switched on gives what the answer gave
    (`properties.confirmed`).
    """
    if evidence is None or scorer.result.score >= scorer.result.max_score:
        return
    from autograder.checks.properties import confirmed

    scorer.name(*confirmed(evidence))


class FunctionSpec(CellSpec):
    """Checks for an answer that defines a function of tensors, compared with a reference.

    Subclasses set `function` and `groups` (check name, points, case keys) and implement
    `make_cases` (case key -> arguments), `reference` and `evidence` (what the properties of
    the catalog mistakes read). `extra_checks` may add property checks.
    """

    function: str = ""
    groups: list[tuple[str, float, list[str]]] = []
    dtype: str = "float32"

    def make_cases(self) -> dict[str, Any]:
        raise NotImplementedError

    def reference(self, *args: Any) -> Any:
        raise NotImplementedError

    def cases(self) -> dict[str, Any]:
        return {"args": self.make_cases()}

    def call_args(self, case: Any) -> tuple:
        """The arguments the probe passes for one case (plain data -> the call's arguments)."""
        return tuple(case)

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        keys = [k for _, _, group in self.groups for k in group]
        expected = {k: self.reference(*self.call_args(cases["args"][k])) for k in keys}
        for name, points, group in self.groups:
            bad = [k for k in group if not close(observed.get(k), expected[k], self.dtype)]
            detail = (
                f"on case {bad[0]}: {why_not(observed, bad[0], expected[bad[0]])}" if bad else ""
            )
            scorer.check(name, points, not bad, detail)
        self.extra_checks(scorer, cases, observed)
        name_mistakes(scorer, self.evidence(cases, observed))
        return scorer.result

    def extra_checks(self, scorer: Scorer, cases: dict[str, Any], observed: dict[str, Any]) -> bool:
        return True

    def evidence(self, cases: dict[str, Any], observed: dict[str, Any]) -> Any:
        """What the mistake properties read (an `Evidence`), or None."""
        return None


# ---- helpers for judges (trusted side) ---------------------------------------------------

# (rtol, atol) by dtype: wide enough for a correct answer written differently (einsum, loops,
# a large negative fill), far tighter than any catalog mistake moves the result.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}


def tolerance(dtype: Any) -> tuple[float, float]:
    name = str(dtype).replace("torch.", "")
    return TOLERANCES.get(name, TOLERANCES["float32"])


def is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray)


def close(observed: Any, expected: Any, dtype: Any = "float32") -> bool:
    """True when observed is an array of expected's shape and agrees within dtype tolerance."""
    if not is_array(observed):
        return False
    exp = np.asarray(_numpy(expected))
    if observed.shape != exp.shape:
        return False
    if observed.dtype == object or not np.issubdtype(observed.dtype, np.number):
        if observed.dtype == bool and exp.dtype == bool:
            return bool(np.array_equal(observed, exp))
        return False
    rtol, atol = tolerance(dtype)
    obs = observed.astype(np.float64)
    ref = exp.astype(np.float64)
    if not np.array_equal(np.isnan(obs), np.isnan(ref)):
        return False
    return bool(np.allclose(obs, ref, rtol=rtol, atol=atol, equal_nan=True))


def max_abs_diff(observed: Any, expected: Any) -> float:
    if not is_array(observed):
        return math.inf
    exp = np.asarray(_numpy(expected))
    if observed.shape != exp.shape or not np.issubdtype(observed.dtype, np.number):
        return math.inf
    diff = np.abs(observed.astype(np.float64) - exp.astype(np.float64))
    return float(np.nanmax(diff)) if diff.size else 0.0


def _numpy(value: Any) -> Any:
    try:
        import torch

        if isinstance(value, torch.Tensor):
            return value.detach().cpu().double().numpy()
    except ImportError:  # pragma: no cover
        pass
    return value


def shape_of(value: Any) -> str:
    if is_array(value):
        return str(tuple(value.shape))
    if isinstance(value, dict) and "__meta__" in value:
        return str(tuple(value["__meta__"]))
    return type(value).__name__


def why_not(observed: dict[str, Any], key: str, expected: Any) -> str:
    """A short explanation of why observed[key] is not expected, for a failed check."""
    if key + ERROR_SUFFIX in observed:
        return f"raised {observed[key + ERROR_SUFFIX]}"
    if key not in observed:
        return "was not computed"
    value = observed[key]
    exp = np.asarray(_numpy(expected))
    if not is_array(value):
        return f"returned {shape_of(value)}, expected a tensor of shape {tuple(exp.shape)}"
    if value.shape != exp.shape:
        return f"returned shape {tuple(value.shape)}, expected {tuple(exp.shape)}"
    return f"values differ from the reference (max abs diff {max_abs_diff(value, exp):.3g})"
