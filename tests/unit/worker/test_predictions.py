"""Predictions of notebooks 01-04: the release names each variable in its stub, the grader treats
that stub as unanswered, every reveal shows nothing until the prediction is made (and says so,
without stopping Run All), and each check rejects the misconceptions it is there to catch."""

from __future__ import annotations

import ast
import contextlib
import io
from typing import Any

import pytest

from attention_course.predictions import recorded
from autograder.checks import understanding
from autograder.model import contract
from autograder.model.course import load_masters
from autograder.model.notebook_io import grade_id, python_source, read, source
from autograder.model.paths import NOTEBOOKS, SOLUTIONS
from autograder.worker.judge import is_stub

MINE = ("01", "02", "03", "04")
SPECS = [s for s in understanding.SPECS if s.notebook[:2] in MINE]


def released_cell(spec: Any) -> str:
    nb = read(NOTEBOOKS / spec.notebook)
    return next(source(c) for c in nb.cells if grade_id(c) == spec.grade_id)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.grade_id)
def test_the_released_stub_names_each_variable_and_counts_as_unanswered(spec: Any) -> None:
    stub = released_cell(spec)
    for name in spec.names:
        assert f"{name} = ...  # " in stub, stub
    assert "NotImplementedError" not in stub and "SOLUTION" not in stub
    master = load_masters(notebooks=(spec.notebook,))[spec.notebook]
    assert is_stub(master, spec.grade_id, stub)
    answered = stub.replace(f"{spec.names[0]} = ...", f"{spec.names[0]} = 'a'")
    assert not is_stub(master, spec.grade_id, answered)


def reveals(spec: Any) -> list[ast.If]:
    """The `if recorded(globals(), ...)` blocks after the prediction's self-check that name
    one of its variables."""
    cells = read(SOLUTIONS / spec.notebook).cells
    at = next(i for i, c in enumerate(cells) if grade_id(c) == contract.test_cell_id(spec.grade_id))
    found = []
    for cell in cells[at + 1 :]:
        if cell.cell_type != "code":
            continue
        for node in ast.parse(python_source(source(cell))).body:
            test = node.test if isinstance(node, ast.If) else None
            if isinstance(test, ast.Call) and getattr(test.func, "id", "") == "recorded":
                names = {a.value for a in test.args[1:] if isinstance(a, ast.Constant)}
                if names & set(spec.names):
                    found.append(node)
    return found


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.grade_id)
def test_every_reveal_waits_for_its_prediction(spec: Any) -> None:
    blocks = reveals(spec)
    assert blocks, f"{spec.grade_id}: no reveal gated on its prediction"
    for block in blocks:
        ns: dict[str, Any] = {"recorded": recorded} | dict.fromkeys(spec.names, ...)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(ast.Module([block], []), "<reveal>", "exec"), ns)  # noqa: S102
        assert printed.getvalue().startswith("Record your prediction first"), printed.getvalue()
        assert printed.getvalue().count("\n") == 1, "the reveal shows nothing else"


def judged(spec: Any, **values: Any) -> dict[str, bool]:
    """name -> whether the check accepts `values` (the truth for the names not given)."""
    cases = spec.cases()
    truth = spec.truth(cases)
    result = spec.judge(cases, {**truth, **values})
    return {name: check.passed for name, check in zip(spec.names, result.checks, strict=True)}


SPEC = {s.grade_id: s for s in SPECS}
MISCONCEPTIONS = [
    # the tied head is "just symmetric", or a token can prefer another to both of them
    ("predict-tied", "TIED_NONNEGATIVE", "c"),
    ("predict-tied", "TIED_NONNEGATIVE", "a"),
    ("predict-tied", "TIED_BEATS_BOTH", True),
    # masking after the softmax keeps rows summing to one, or the last row loses its share
    ("predict-mask-after", "ROW_SUMS_AFTER", "a"),
    ("predict-mask-after", "LAST_ROW_SUM_AFTER", 0.5),
    ("predict-mask-after", "LAST_ROW_SUM_AFTER", 0.99),
    # "both bugs keep the mask, so nothing leaks", or only one of them leaks
    ("predict-leaks", "LEAKING_RECIPES", "a"),
    ("predict-leaks", "LEAKING_RECIPES", "c"),
    # a fill of 0 still hides the future (1.0), or halves the row (0.5)
    ("predict-leaks", "FILL_ZERO_SELF", 1.0),
    ("predict-leaks", "FILL_ZERO_SELF", 0.5),
    ("predict-leaks", "FILL_ZERO_SELF", 0.13),
    # equal scores average everything (the future too), or copy the token itself
    ("predict-outputs", "EQUAL_SCORES_OUT", "c"),
    ("predict-outputs", "EQUAL_SCORES_OUT", "a"),
    # rows and columns of wei read the wrong way round
    ("predict-outputs", "OUT_1_WEIGHT", "a"),
    # "a real transformer cannot do without W_v", or the folded matrix is full rank
    ("predict-fold", "FOLDS_WITH_PROJECTION", False),
    ("predict-fold", "OV_RANK", 32),
    ("predict-fold", "OV_RANK", 4),
]


@pytest.mark.parametrize(("gid", "name", "value"), MISCONCEPTIONS)
def test_a_misconception_loses_its_point(gid: str, name: str, value: Any) -> None:
    assert judged(SPEC[gid], **{name: value})[name] is False


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.grade_id)
def test_the_truth_earns_every_point_and_an_unanswered_name_none(spec: Any) -> None:
    assert all(judged(spec).values())
    unanswered = judged(spec, **{spec.names[0]: {"__repr__": "Ellipsis"}})
    assert unanswered[spec.names[0]] is False and all(
        ok for name, ok in unanswered.items() if name != spec.names[0]
    )
