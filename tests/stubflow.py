"""Did a released notebook fail only because of its unanswered stubs? A data-flow answer.

An error is the stubs' doing when it is NotImplementedError (or a self-check's NotAnswered,
"not answered yet"), or when the failing cell reads a contract name or a name that an earlier
failed cell writes: a path from an unfilled answer to the failure. Anything else (a missing
module, a bug in a demonstration cell) is a problem.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from autograder.model.contract import CONTRACT
from autograder.model.notebook_io import (
    grade_id,
    is_answer,
    python_source,
    read,
    solution_answers,
    source,
)
from autograder.model.paths import SOLUTIONS

MUTATORS = {"append", "extend", "update", "setdefault", "add", "insert", "pop", "clear"}
# a stub raising, and a self-check saying an answer is still its stub (attention_course.selfcheck)
STUB_ERRORS = {"NotImplementedError", "NotAnswered"}


def _tree(src: str) -> ast.AST:
    try:
        return ast.parse(python_source(src))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def imported_names(src: str) -> set[str]:
    return {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(_tree(src))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }


def written_names(src: str) -> set[str]:
    """Names a cell may leave unset or half-updated when it fails.

    Assigned names, defined functions and classes, bases of item or attribute assignments
    (`results[k] = ...`, `obj.x = ...`) and receivers of mutating calls (`log.append(...)`).
    """
    names: set[str] = set()
    for node in ast.walk(_tree(src)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Subscript | ast.Attribute) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, ast.Subscript | ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name):
                names.add(base.id)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and isinstance(node.func.value, ast.Name)
        ):
            names.add(node.func.value.id)
    return names


def read_names(src: str) -> set[str]:
    return {
        node.id
        for node in ast.walk(_tree(src))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }


def answer_names(notebook: str) -> set[str]:
    """Names an answer cell of `notebook` must define: the contract's, and every name the
    solutions' answer cells write (prediction cells, helper functions of an answer)."""
    names = {n for names in CONTRACT.get(notebook, {}).values() for n in names}
    for answer in solution_answers(read(SOLUTIONS / notebook)).values():
        names |= written_names(answer)
    return names


def describe(error: dict) -> str:
    return f"{error['ename']}: {error['evalue']}"


def stub_problems(
    cells: Sequence[Any], errors: Sequence[Sequence[dict]], contract_names: set[str]
) -> tuple[list[str], int]:
    """(problems, how many errors were NotImplementedError) for executed cells and their errors."""
    problems: list[str] = []
    stubs_hit = 0
    modules = set().union(*(imported_names(source(c)) for c in cells))
    tainted = set(contract_names)
    for i, (cell, cell_errors) in enumerate(zip(cells, errors, strict=True)):
        for error in cell_errors:
            ename = error["ename"]
            if ename in ("ModuleNotFoundError", "ImportError"):
                problems.append(f"cell {i}: {describe(error)}")
            elif is_answer(cell):
                if ename != "NotImplementedError":
                    problems.append(f"answer cell {grade_id(cell)}: {describe(error)}")
            elif ename not in STUB_ERRORS and not read_names(source(cell)) & tainted:
                problems.append(f"cell {i}, not downstream of a stub: {describe(error)}")
        stubs_hit += sum(e["ename"] == "NotImplementedError" for e in cell_errors)
        if cell_errors:
            tainted |= written_names(source(cell)) - modules
    return problems, stubs_hit
