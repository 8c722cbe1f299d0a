"""Every catalog mistake is named however it is written; every correct answer keeps full marks.

The answers are written from scratch by the corpus writers (tests/corpus/nbNN.py, WRITERS):
hypothesis draws the way each part of an answer is written (loops, matmul, einsum, bmm,
torch.where, a large negative fill, ...), the extra sizes the cell is checked on (B == T == hs
and T = 1 among them) and the seed of the case tensors. A wrong answer must lose points and
have its mistake named; a correct one must earn full marks with nothing named. The answers run
in-process, beside the names a notebook's setup provides (torch, nn, F, math, Head).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.catalog import BEFORE_PROBE, MISTAKES
from autograder.checks import all_specs, run_in_process, spec_for
from autograder.checks.base import CellResult, CellSpec
from autograder.notebook_io import exec_cell
from tests import corpus
from tests.corpus import one_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")
WRITERS = corpus.writers()
SLOW_CELLS = {"unmasked-head"}  # trains a small model per answer
EXAMPLES = 3

small = st.integers(1, 6)


def _sizes(spec: CellSpec) -> st.SearchStrategy[tuple] | None:
    """Extra sizes for a cell: B == T (== hs), T = 1, or anything."""
    gid = spec.grade_id
    n = small
    if gid.startswith("average-"):
        return st.one_of(
            n.map(lambda k: (k, k, k)),
            st.tuples(small, st.just(1), small),
            st.tuples(small, small, small),
        )
    if gid in ("affinities", "attend"):
        return st.one_of(
            st.tuples(n, small).map(lambda p: (p[0], p[0], p[1] + 1, p[0])),
            st.tuples(small, st.just(1), small, small),
            st.tuples(small, small, small, small),
        )
    if gid == "mask-then-softmax":
        return st.one_of(
            n.map(lambda k: (k, k, k)),
            st.tuples(small, st.just(1), st.just(1)),
            small.flatmap(lambda t: st.tuples(small, st.just(t), st.just(t))),
        )
    if gid == "head":
        return st.one_of(
            st.tuples(n, small).map(lambda p: (p[1] + 1, p[0], p[0] + 1, p[0], p[0])),
            st.tuples(small, small, small, small).map(lambda p: (p[0], p[1], p[2], p[3], 1)),
            st.tuples(small, small, small, small, small).map(
                lambda p: (p[0], p[1], p[2] + p[4], p[3], p[4])
            ),
        )
    if gid in ("capture-attention", "unmasked-head", "value-ablation"):
        return st.one_of(
            st.tuples(n, small).map(lambda p: (p[0], p[0], p[1], p[0], p[0] + 1)),
            st.tuples(small, small, small, small).map(lambda p: (p[0], 1, p[1], p[2], p[3])),
            st.tuples(small, small, small, small, small).map(
                lambda p: (p[0], p[1], p[2], p[3], p[1] + p[4])
            ),
        )
    if gid == "sdpa-forward":
        return st.one_of(n.map(lambda k: (k, k)), st.tuples(small, st.just(1)))
    return None


def setup_namespace() -> dict[str, Any]:
    """What the notebooks' setup cells give an answer: torch, nn, F, math and a Head."""
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from autograder.probe.modules import CourseHead

    return {"torch": torch, "nn": nn, "F": F, "math": math, "Head": CourseHead}


def grade(writer: corpus.Writer, data: st.DataObject) -> tuple[str, CellResult]:
    def choose(name: str, options: Any) -> Any:
        return data.draw(st.sampled_from(list(options)), label=name)

    source = writer.write(choose)
    spec = spec_for(writer.grade_id)
    sizes = _sizes(spec)
    extra = {"drawn": data.draw(sizes, label="sizes")} if sizes is not None else {}
    spec = spec.resized(extra, seed=data.draw(st.integers(0, 2**16), label="seed"))
    ns = setup_namespace()
    try:
        exec_cell(source, ns, f"<answer {writer.grade_id}>")
    except Exception:  # noqa: S110 - the spec reports the missing names
        pass
    return source, run_in_process(spec, ns)


def check(writer: corpus.Writer, data: st.DataObject) -> None:
    source, result = grade(writer, data)
    shown = f"{result.render()}\n--- answer ---\n{source}"
    if writer.mistake is None:
        assert result.score == result.max_score, shown
        assert not result.mistakes, shown
    else:
        assert result.score < result.max_score, shown
        assert writer.mistake in result.mistakes, shown


def _params(slow: bool) -> list[Any]:
    chosen = [w for w in WRITERS if (w.grade_id in SLOW_CELLS) == slow]
    marks = [pytest.mark.slow] if slow else []
    return [pytest.param(w, id=w.id, marks=marks) for w in chosen]


SETTINGS = settings(
    derandomize=True,
    deadline=None,
    max_examples=EXAMPLES,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("writer", _params(slow=False))
@SETTINGS
@given(data=st.data())
def test_written_answer_is_graded_and_named(writer: corpus.Writer, data: st.DataObject) -> None:
    check(writer, data)


@pytest.mark.parametrize("writer", _params(slow=True))
@settings(SETTINGS, max_examples=1)
@given(data=st.data())
def test_written_answer_of_a_slow_cell(writer: corpus.Writer, data: st.DataObject) -> None:
    check(writer, data)


def test_every_catalog_mistake_has_three_ways() -> None:
    ways = Counter(w.mistake for w in WRITERS if w.mistake)
    short = {m: ways[m] for m in set(MISTAKES) - BEFORE_PROBE if ways[m] < 3}
    assert not short, f"fewer than three ways to write {short}"


def test_every_answer_cell_has_three_correct_writers() -> None:
    correct = Counter(w.grade_id for w in WRITERS if w.mistake is None)
    short = {g: correct[g] for g in all_specs() if correct[g] < 3}
    assert not short, f"fewer than three correct alternatives for {short}"
