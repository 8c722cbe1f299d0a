"""Registry of the graded checks, one `CellSpec` per answer cell, and the in-notebook entry.

Each notebook has a module `nbNN` with a list `SPECS`; `spec_for(grade_id)` finds one.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from autograder.checks.base import CellResult, CellSpec
from autograder.contract import CONTRACT


def _notebook_module(notebook: str) -> str:
    return f"autograder.checks.nb{notebook[:2]}"


@cache
def notebook_specs(notebook: str) -> dict[str, CellSpec]:
    """grade_id -> spec for one notebook (empty when its checks module does not exist).

    Each notebook's module loads on its own, so a broken module affects only its notebook.
    """
    module = _notebook_module(notebook)
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        return {}
    return {spec.grade_id: spec for spec in mod.SPECS}


def all_specs() -> dict[str, CellSpec]:
    """grade_id -> spec, for every notebook whose checks module exists."""
    return {gid: spec for nb in CONTRACT for gid, spec in notebook_specs(nb).items()}


def spec_for(grade_id: str) -> CellSpec:
    for notebook, answers in CONTRACT.items():
        if grade_id in answers:
            specs = notebook_specs(notebook)
            if grade_id in specs:
                return specs[grade_id]
    raise KeyError(f"no checks registered for answer cell {grade_id!r}")


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
