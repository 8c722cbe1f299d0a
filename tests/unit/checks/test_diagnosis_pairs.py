"""Two mistakes in one written answer are both named, in the cells besides the head.

The answers are written as the corpus writes them (tests/corpus, a piece per slot), with two
wrong pieces from different parts: the scores and the mask, the mask and the aggregation, a
mask and a softmax masked afterwards. Each must lose points and be named with exactly its two
ids. A loop that stops one step early is named so alone, whatever its row 0 holds.
"""

from __future__ import annotations

import random
from functools import partial
from typing import Any

import pytest

from autograder.checks import run_in_process, spec_for
from autograder.checks.base import CellResult
from tests import corpus
from tests.corpus import (
    nb01,
    nb03,
    nb04,
    nb06,
    one_thread,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.usefixtures("one_thread")

WRITE = {
    "average-softmax": nb01.softmax,
    "mask-then-softmax": nb03.mask_then_softmax,
    "attend": nb04.attend,
    "capture-attention": nb06.recompute,
    "value-ablation": nb06.no_value,
}
PAIRS: list[tuple[str, tuple[str, str]]] = [
    ("attend", ("swapped-qk", "mask-polarity")),
    ("attend", ("aggregate-x", "fill-zero")),
    ("attend", ("triu-mask", "mask-after-softmax")),
    ("attend", ("tied-qk", "softmax-dim")),
    ("attend", ("swapped-qk", "aggregate-x")),
    ("average-softmax", ("triu-mask", "mask-after-softmax")),
    ("average-softmax", ("loop-exclusive", "mask-after-softmax")),
    ("mask-then-softmax", ("mask-polarity", "mask-after-softmax")),
    ("mask-then-softmax", ("triu-mask", "mask-after-softmax")),
    ("capture-attention", ("scale-by-C", "softmax-dim")),
    ("value-ablation", ("no-scale", "triu-mask")),
    ("value-ablation", ("scale-no-sqrt", "mask-after-softmax")),
]


def graded(grade_id: str, pair: tuple[str, str], way: int) -> tuple[str, CellResult]:
    rng = random.Random(f"{grade_id}:{pair}:{way}")
    write = partial(WRITE[grade_id], mistake=pair, way=way)
    writer = corpus.Writer(grade_id, None, "+".join(pair), write)

    def choose(name: str, options: Any) -> Any:
        return rng.choice(list(options))

    return corpus.grade_written(writer, choose, rng.randrange(2**16))


@pytest.mark.parametrize(
    ("grade_id", "pair", "way"),
    [(g, p, i % 2) for i, (g, p) in enumerate(PAIRS)],  # the first or the second way of each
    ids=[f"{g}:{'+'.join(p)}" for g, p in PAIRS],
)
def test_both_mistakes_of_a_written_answer_are_named(
    grade_id: str, pair: tuple[str, str], way: int
) -> None:
    source, result = graded(grade_id, pair, way)
    shown = f"{result.render()}\n--- answer ---\n{source}"
    assert result.score < result.max_score, shown
    assert sorted(result.mistakes) == sorted(pair), shown


ROW_ZERO = ["torch.zeros(C)", "x[b, 0]", "2 * x[b, 0]", "torch.ones(C)", "x[b, 0] * float(T)"]


@pytest.mark.parametrize("row_zero", ROW_ZERO)
def test_a_loop_that_stops_early_is_only_that(row_zero: str) -> None:
    """Row 0 of an exclusive loop sees nothing: what it holds names no other mistake."""
    body = f"out[b, t] = x[b, :t].mean(0) if t > 0 else {row_zero}"
    source = nb01.loop_slice(corpus.first_choice).replace(nb01.LOOP_BODIES[None][0], body)
    ns = corpus.setup_namespace()
    exec(compile(source, "<answer average-loop>", "exec"), ns)  # noqa: S102
    result = run_in_process(spec_for("average-loop"), ns)
    assert result.score < result.max_score, result.render()
    assert result.mistakes == ["loop-exclusive"], result.render()
