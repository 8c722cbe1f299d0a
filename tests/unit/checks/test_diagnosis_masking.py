"""A named mistake is a mistake the answer makes, even when one mistake masks another.

For every answer cell and every pair of its catalog mistakes that can meet in one answer (the
mistakes the corpus writes for that cell, whose reference switches touch different parts), an
answer with both: written as the corpus writes answers (tests/corpus, one piece per slot), or
the reference with both switches on where the cell's answers are the reference's own
computation (the Head, the averages). Each must lose points, and every id named must be one
of its two: where one mistake hides the other's signature, or the two together look like a
third, the grader names only what the reference with those switches confirms
(`properties.confirmed`), never the look-alike.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest
import torch

from autograder.checks import reference, run_in_process, spec_for
from autograder.checks.base import CellResult
from autograder.checks.properties import Evidence, confirmed, diagnose
from autograder.checks.reference import SWITCHES, ReferenceHead, with_mistake
from tests import corpus
from tests.corpus import (
    nb01,
    nb02,
    nb03,
    nb04,
    nb06,
    nb07,
    one_thread,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.usefixtures("one_thread")


def cell_ids() -> dict[str, set[str]]:
    """Answer cell -> the catalog mistakes the corpus writes there."""
    found: dict[str, set[str]] = {}
    for w in corpus.writers():
        if w.mistake:
            found.setdefault(w.grade_id, set()).add(w.mistake)
    return found


def meet(a: str, b: str) -> bool:
    """Can two mistakes stand in one answer (their switches set different fields)?"""
    return not set(SWITCHES.get(a, {a: 0})) & set(SWITCHES.get(b, {b: 0}))


def pairs(grade_id: str) -> list[tuple[str, str]]:
    ids = sorted(cell_ids().get(grade_id, ()))
    return [(a, b) for a, b in itertools.combinations(ids, 2) if meet(a, b)]


# ---- written answers: a writer that puts each mistake in its own piece ------------------------

WRITE: dict[str, Callable[..., str]] = {
    "average-softmax": nb01.softmax,
    "mask-then-softmax": nb03.mask_then_softmax,
    "attend": nb04.attend,
    "capture-attention": nb06.recompute,
    "unmasked-head": nb06.unmasked,
    "value-ablation": nb06.no_value,
    "sdpa-forward": nb07.sdpa_pair,
    "multi-head": nb07.multi_head_pair,
    "shape-table": lambda choose, mistake, way: nb02.shape_table(choose, "literal", mistake),
}


def write(grade_id: str, mistake: Any, way: int, seed: str) -> str:
    rng = random.Random(seed)
    return WRITE[grade_id](
        lambda name, options: rng.choice(list(options)), mistake=mistake, way=way
    )


def writing_way(grade_id: str, pair: tuple[str, str]) -> int | None:
    """A way of the writer that puts both mistakes in one answer: its text differs from each
    mistake written alone (None: the writer holds both in one piece)."""
    for way in range(4):
        seed = f"{grade_id}:{pair}:{way}"
        try:
            both = write(grade_id, pair, way, seed)
        except (IndexError, KeyError):
            continue
        if all(both != write(grade_id, one, way, seed) for one in pair):
            return way
    return None


WAYS = {(gid, pair): writing_way(gid, pair) for gid in WRITE for pair in pairs(gid)}
WRITTEN_PAIRS = [(gid, pair, way) for (gid, pair), way in WAYS.items() if way is not None]
# pairs of mistakes one piece of a writer holds (two masks' fill and form, the in-place piece
# that writes mask and softmax): each is met by the reference Head's pairs below
NOT_WRITTEN = [(gid, pair) for (gid, pair), way in WAYS.items() if way is None]


def graded(grade_id: str, pair: tuple[str, str], way: int) -> tuple[str, CellResult]:
    source = write(grade_id, pair, way, f"{grade_id}:{pair}:{way}")
    writer = corpus.Writer(grade_id, None, "+".join(pair), lambda choose: source)
    seed = random.Random(source).randrange(2**16)
    return corpus.grade_written(writer, lambda name, options: options[0], seed)


@pytest.mark.parametrize(
    ("grade_id", "pair", "way"),
    WRITTEN_PAIRS,
    ids=[f"{g}:{'+'.join(p)}" for g, p, _ in WRITTEN_PAIRS],
)
def test_a_written_answer_with_two_mistakes_is_named_only_with_them(
    grade_id: str, pair: tuple[str, str], way: int
) -> None:
    source, result = graded(grade_id, pair, way)
    shown = f"{result.render()}\n--- answer ---\n{source}"
    assert result.score < result.max_score, shown
    assert set(result.mistakes) <= set(pair), shown


# ---- the reference with two switches: the Head and the averages -------------------------------


def head_namespace(config: reference.Config) -> dict[str, Any]:
    class Head(ReferenceHead):
        def __init__(self, n_embd, head_size, block_size, dropout=0.0):  # noqa: ANN001
            super().__init__(n_embd, head_size, block_size, dropout, config=config)

    return {"Head": Head}


def average_namespace(grade_id: str, config: reference.Config) -> dict[str, Any]:
    def average(x: torch.Tensor) -> torch.Tensor:
        return reference.average(x, config).float()

    return {spec_for(grade_id).names[0]: average}


REFERENCE_CELLS = ("head", "average-loop", "average-matmul")
HEAD_PAIRS = [(a, b) for a, b in itertools.combinations(sorted(SWITCHES), 2) if meet(a, b)]


@pytest.mark.parametrize("grade_id", REFERENCE_CELLS)
def test_the_reference_with_two_switches_is_named_only_with_them(grade_id: str) -> None:
    """Every pair at once per cell (a failure lists them all)."""
    spec = spec_for(grade_id)
    cases = spec.cases()
    todo = HEAD_PAIRS if grade_id == "head" else pairs(grade_id)
    assert todo
    wrong = []
    for pair in todo:
        if grade_id == "head":
            ns = head_namespace(with_mistake(reference.HEAD, *pair))
        else:
            ns = average_namespace(grade_id, with_mistake(reference.AVERAGE, *pair))
        result = run_in_process(spec, ns, cases)
        if result.score >= result.max_score or not set(result.mistakes) <= set(pair):
            wrong.append(f"{'+'.join(pair)}: {result.score}/{result.max_score} {result.mistakes}")
    assert not wrong, "\n".join(wrong)


def test_every_cell_with_two_mistakes_that_meet_is_tried() -> None:
    tried = set(WRITE) | set(REFERENCE_CELLS)
    untried = {gid for gid in cell_ids() if pairs(gid) and gid not in tried}
    assert not untried, f"cells whose pairs of mistakes no test writes: {sorted(untried)}"
    for gid in WRITE:
        assert any(g == gid for g, _, _ in WRITTEN_PAIRS), f"no written pair for {gid}"
    missed = [pair for _, pair in NOT_WRITTEN if pair not in HEAD_PAIRS]
    assert not missed, f"pairs neither written nor met by the reference Head: {missed}"


# ---- the rule itself, on evidence made by hand ----------------------------------------------


def test_a_look_alike_is_not_named_and_a_hidden_mistake_is_not_guessed() -> None:
    """k @ q^T under an upper mask is exactly a column softmax of the causal scores applied
    as weights^T @ v: two explanations, no id in common, nothing named; and a single switch
    that explains the weights is named alone."""
    from autograder.checks.evidence import add_weights, logits_for, projections

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 12, generator=g)
    w = {n: 0.3 * torch.randn(8, 12, generator=g) for n in ("key", "query", "value")}
    p = projections(x, w)
    values = {"v": p["v"], "x": x.double().numpy()}

    def evidence(*mistakes: str) -> Evidence:
        ev = Evidence(reference.HEAD, head_size=8, n_embd=12)
        ev.logits = logits_for(x, w)
        out = reference.attention(x, w, with_mistake(reference.HEAD, *mistakes)).numpy()
        assert add_weights(ev, out, values)
        return ev

    both = evidence("swapped-qk", "triu-mask")
    assert set(diagnose(both)) - {"swapped-qk", "triu-mask"}, "no look-alike left to test"
    assert not set(confirmed(both)) - {"swapped-qk", "triu-mask"}
    assert confirmed(evidence("scale-by-C")) == ["scale-by-C"]
