"""The recipe holds: every catalog switch of the reference is named by its own property.

An answer that is the reference with one switch on (or two, from different parts) must lose
points and be named with exactly the ids of its switches; the reference itself earns full
marks. Run for the Head (every switch) and for the averages of notebook 01 (the switches an
average can have).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from autograder.checks import reference, run_in_process, spec_for
from autograder.checks.catalog import BEFORE_PROBE, MISTAKES
from autograder.checks.properties import PROPERTIES
from autograder.checks.reference import SWITCHES, ReferenceHead, with_mistake
from tests.corpus import one_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

AVERAGE_IDS = [
    "loop-exclusive",
    "tril-unnormalised",
    "triu-mask",
    "mask-polarity",
    "fill-zero",
    "mask-after-softmax",
    "softmax-dim",
]
# pairs from different parts of the head whose properties can both be read off one answer
# (not all can: weights^T @ v with tied q and k is exactly a column softmax of the upper
# triangle, so that answer shows triu-mask and softmax-dim instead)
PAIRS = [
    ("no-scale", "triu-mask"),
    ("scale-by-C", "aggregate-x"),
    ("swapped-qk", "fill-zero"),
    ("scale-no-sqrt", "softmax-dim"),
    ("bias", "mask-after-softmax"),
    ("tril-not-buffer", "no-scale"),
    ("dropout-misplaced", "mask-in-place"),
    ("v-at-wei", "scale-by-C"),
    ("tied-qk", "dropout-misplaced"),
    ("loop-exclusive", "scale-by-C"),
]


def head_namespace(config: reference.Config) -> dict[str, Any]:
    class Head(ReferenceHead):
        def __init__(self, n_embd, head_size, block_size, dropout=0.0):  # noqa: ANN001
            super().__init__(n_embd, head_size, block_size, dropout, config=config)

    return {"Head": Head}


def test_every_catalog_id_has_a_property_and_a_switch() -> None:
    ids = set(MISTAKES) - BEFORE_PROBE
    assert set(PROPERTIES) == ids
    assert set(SWITCHES) == ids


def test_the_reference_head_earns_full_marks() -> None:
    result = run_in_process(spec_for("head"), head_namespace(reference.HEAD))
    assert result.score == result.max_score and not result.mistakes, result.render()


@pytest.mark.parametrize("mistake", sorted(SWITCHES))
def test_each_switch_of_the_head_is_named(mistake: str) -> None:
    result = run_in_process(spec_for("head"), head_namespace(with_mistake(reference.HEAD, mistake)))
    assert result.score < result.max_score, result.render()
    assert result.mistakes == [mistake], result.render()


@pytest.mark.parametrize("pair", PAIRS, ids=["+".join(p) for p in PAIRS])
def test_two_mistakes_in_one_head_are_both_named(pair: tuple[str, str]) -> None:
    config = with_mistake(reference.HEAD, *pair)
    result = run_in_process(spec_for("head"), head_namespace(config))
    assert set(pair) <= set(result.mistakes), result.render()


@pytest.mark.parametrize(
    ("grade_id", "mistake"),
    list(itertools.product(["average-matmul", "average-softmax"], AVERAGE_IDS)),
)
def test_each_switch_of_an_average_is_named(grade_id: str, mistake: str) -> None:
    config = with_mistake(reference.AVERAGE, mistake)

    def average(x: torch.Tensor) -> torch.Tensor:
        return reference.average(x, config).float()

    spec = spec_for(grade_id)
    result = run_in_process(spec, {spec.names[0]: average})
    assert result.score < result.max_score, result.render()
    assert result.mistakes == [mistake], result.render()
