"""Registry of the graded checks, one `CellSpec` per answer cell, and the in-notebook entry.

Each notebook has a module `nbNN` with a list `SPECS`; `spec_for(grade_id)` finds one.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from autograder.checks.base import CellResult, CellSpec
from autograder.contract import CONTRACT


@cache
def all_specs() -> dict[str, CellSpec]:
    """grade_id -> spec, for every notebook whose checks module exists."""
    specs: dict[str, CellSpec] = {}
    for notebook in CONTRACT:
        module = f"autograder.checks.nb{notebook[:2]}"
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
            continue
        for spec in mod.SPECS:
            specs[spec.grade_id] = spec
    return specs


def spec_for(grade_id: str) -> CellSpec:
    try:
        return all_specs()[grade_id]
    except KeyError:
        raise KeyError(f"no checks registered for answer cell {grade_id!r}") from None


def run_in_process(spec: CellSpec, namespace: dict[str, Any]) -> CellResult:
    """cases, probe and judge in this process (the notebook's kernel)."""
    missing = spec.missing_names(namespace)
    cases = spec.cases()
    if missing:
        observed: dict[str, Any] = {"!missing": missing}
    else:
        observed = spec.probe(namespace, cases)
    return spec.evaluate(cases, observed)


def grade_in_notebook(grade_id: str, namespace: dict[str, Any]) -> float:
    """Hidden-test entry point: print the report and return the points (nbgrader partial credit)."""
    result = run_in_process(spec_for(grade_id), namespace)
    print(result.render())
    return result.score
