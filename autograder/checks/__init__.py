"""Registry of the graded checks, one `CellSpec` per answer cell, and the in-notebook entry.

Each notebook has a module `nbNN` with a list `SPECS`; `understanding.SPECS` adds the
prediction cells of any notebook. `spec_for(grade_id)` finds one; `probe_callable(spec)` is the
spec's probe, a plain function of the jail-side package `autograder.probe`.

The bug catalog (`catalog`) lives here too.

May import: model, probe.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

from autograder.checks.base import CellResult, CellSpec
from autograder.model.contract import CONTRACT
from autograder.probe import MISSING

ProbeFunction = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def _notebook_module(notebook: str) -> str:
    return f"autograder.checks.nb{notebook[:2]}"


@cache
def notebook_specs(notebook: str) -> dict[str, CellSpec]:
    """grade_id -> spec for one notebook, prediction cells included (empty without checks).

    Each notebook's module loads on its own, so a broken module affects only its notebook.
    """
    module = _notebook_module(notebook)
    specs: list[CellSpec] = []
    try:
        specs += importlib.import_module(module).SPECS
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
    from autograder.checks import understanding

    specs += [s for s in understanding.SPECS if s.notebook == notebook]
    return {spec.grade_id: spec for spec in specs}


def all_specs() -> dict[str, CellSpec]:
    """grade_id -> spec, for every notebook whose checks module exists."""
    return {gid: spec for nb in CONTRACT for gid, spec in notebook_specs(nb).items()}


def spec_for(grade_id: str) -> CellSpec:
    for notebook in CONTRACT:
        specs = notebook_specs(notebook)
        if grade_id in specs:
            return specs[grade_id]
    raise KeyError(f"no checks registered for answer cell {grade_id!r}")


def probe_callable(spec: CellSpec) -> ProbeFunction:
    """The spec's probe in this process: `autograder.probe.<module>.<function>`."""
    module = importlib.import_module(f"autograder.probe.{spec.probe_module}")
    return getattr(module, spec.probe_function)


def run_in_process(
    spec: CellSpec, namespace: dict[str, Any], cases: dict[str, Any] | None = None
) -> CellResult:
    """cases, probe and judge in this process (the notebook's kernel)."""
    missing = spec.missing_names(namespace)
    cases = spec.cases() if cases is None else cases
    if missing:
        observed: dict[str, Any] = {MISSING: missing}
    else:
        observed = probe_callable(spec)(namespace, cases)
    return spec.evaluate(cases, observed)


def grade_in_notebook(grade_id: str, namespace: dict[str, Any]) -> float:
    """Hidden-test entry point: print the report and return the points (nbgrader partial credit)."""
    result = run_in_process(spec_for(grade_id), namespace)
    print(result.render())
    return result.score
