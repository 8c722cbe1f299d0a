"""The self-checks of notebooks 01-04 (attention_course.selfcheck) teach: every catalog mistake
of the corpus stops them with a message that names it by its properties, no correct answer
written differently is refused, an untouched stub is "not answered yet", and a mask built for
the notebook's T is explained. Each check says which sizes it used."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.nn import functional as F

from attention_course import selfcheck as sc
from tests import corpus

CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "average-loop": lambda ns: sc.check_average(ns, "average_loop"),
    "average-matmul": lambda ns: sc.check_average(ns, "average_matmul"),
    "average-softmax": lambda ns: sc.check_average(ns, "average_softmax"),
    "affinities": sc.check_affinities,
    "mask-then-softmax": sc.check_mask_then_softmax,
    "nonzero-count": sc.check_nonzero_count,
    "attend": sc.check_attend,
}
# words the message must hold for each catalog mistake (any one of them)
NAMED_BY = {
    "loop-exclusive": ("itself", "includes t"),
    "tril-unnormalised": ("summed", "do not sum to one"),
    "triu-mask": ("wrong triangle",),
    "mask-polarity": ("nan",),
    "fill-zero": ("filled with 0", "nothing was masked"),
    "mask-after-softmax": ("after the softmax",),
    "softmax-dim": ("dim=-2", "last axis"),
    "swapped-qk": ("swapped", "transposed"),
    "tied-qk": ("query map",),
    "transpose-batch": ("last two", "batch axis"),
    "aggregate-x": ("value(x)",),
    "v-at-wei": ("on the left",),
}
MUTATIONS = [m for m in corpus.mutations() if m.grade_id in CHECKS]
ALTERNATIVES = [a for a in corpus.alternatives() if a.grade_id in CHECKS]


def run(grade_id: str, ns: dict[str, Any]) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        CHECKS[grade_id](ns)
    return printed.getvalue()


def quiet_namespace(notebook: str, answers: dict[str, str]) -> dict[str, Any]:
    with contextlib.redirect_stdout(io.StringIO()):
        return corpus.namespace(notebook, answers)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.id)
def test_every_catalog_mistake_is_stopped_and_named(mutation: corpus.Mutation) -> None:
    ns = quiet_namespace(mutation.notebook, corpus.mutated_answers(mutation))
    with pytest.raises(sc.SelfCheckFailed) as caught:
        run(mutation.grade_id, ns)
    text = str(caught.value)
    assert not isinstance(caught.value, sc.NotAnswered), text
    assert any(word in text for word in NAMED_BY[mutation.mistake]), (mutation.mistake, text)


def test_the_mutations_cover_the_mistakes_of_notebooks_01_to_04() -> None:
    assert {m.mistake for m in MUTATIONS} == set(NAMED_BY)


@pytest.mark.parametrize("alternative", ALTERNATIVES, ids=lambda a: a.id)
def test_a_right_answer_written_differently_passes(alternative: corpus.Alternative) -> None:
    answers = corpus.answers_with(alternative.notebook, alternative.grade_id, alternative.source)
    printed = run(alternative.grade_id, quiet_namespace(alternative.notebook, answers))
    assert "self-checks passed" in printed


@pytest.mark.parametrize("grade_id", sorted(CHECKS))
def test_the_solution_passes_and_says_which_sizes_it_used(grade_id: str) -> None:
    spec_notebook = next(m.notebook for m in MUTATIONS if m.grade_id == grade_id)
    answers = corpus.answers_with(
        spec_notebook, grade_id, corpus.solution_answers_of(spec_notebook)[grade_id]
    )
    printed = run(grade_id, quiet_namespace(spec_notebook, answers))
    assert "Checked " in printed and " on " in printed and "self-checks passed" in printed


def stub(*args: Any) -> Any:
    raise NotImplementedError()


@pytest.mark.parametrize("grade_id", sorted(CHECKS))
def test_an_untouched_stub_is_not_answered_yet(grade_id: str) -> None:
    names = {
        "average-loop": ["average_loop"],
        "average-matmul": ["average_matmul"],
        "average-softmax": ["average_softmax"],
        "affinities": ["affinities"],
        "mask-then-softmax": ["mask_then_softmax"],
        "nonzero-count": ["mask_then_softmax", "n_visible"],
        "attend": ["attend"],
    }[grade_id]
    ns: dict[str, Any] = {name: stub for name in names} | {"NONZERO": 36}
    with pytest.raises(sc.NotAnswered, match="not answered yet"):
        run(grade_id, ns)
    with pytest.raises(sc.NotAnswered, match="not defined"):
        run(grade_id, {})


def test_a_mask_built_from_the_notebooks_T_is_explained() -> None:
    def built_for_eight(scores: torch.Tensor) -> torch.Tensor:
        tril = torch.tril(torch.ones(8, 8))  # the notebook's T = 8, not the input's
        return F.softmax(scores.masked_fill(tril == 0, float("-inf")), dim=-1)

    with pytest.raises(sc.SelfCheckFailed) as caught:
        run("mask-then-softmax", {"mask_then_softmax": built_for_eight, "T": 8})
    text = str(caught.value)
    assert "The check uses T = 5" in text and "notebook's T is 8" in text, text
    assert "shape (3, 5, 5)" in text


def test_a_failure_shows_the_values_it_found_in_one_readable_message() -> None:
    def after(scores: torch.Tensor) -> torch.Tensor:
        tril = torch.tril(torch.ones(scores.shape[-1], scores.shape[-1]))
        return F.softmax(scores, dim=-1).masked_fill(tril == 0, 0.0)

    with pytest.raises(sc.SelfCheckFailed) as caught:
        run("mask-then-softmax", {"mask_then_softmax": after})
    lines = caught.value._render_traceback_()
    assert lines[0].startswith("SelfCheckFailed: mask_then_softmax, on scores of shape (3, 5, 5)")
    assert "row sums [" in lines[0], lines


@pytest.mark.parametrize(
    ("value", "ok"), [(..., False), ("b", True), ("(B)", True), ("e", False), (3, False)]
)
def test_prediction_forms(value: Any, ok: bool) -> None:
    ns = {"CHOICE": value, "NUMBER": 0.5}
    forms = {"CHOICE": ("a", "b", "c", "d"), "NUMBER": float}
    if ok:
        assert "predictions recorded" in run_predictions(ns, forms)
        return
    expected = sc.NotAnswered if value is ... else sc.SelfCheckFailed
    with pytest.raises(expected):
        run_predictions(ns, forms)


def run_predictions(ns: dict[str, Any], forms: dict[str, Any]) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        sc.check_predictions(ns, forms)
    return printed.getvalue()
