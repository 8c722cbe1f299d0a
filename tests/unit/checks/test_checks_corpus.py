"""Every catalog mutation loses points and is named; every alternative earns full marks.

In-process and fast: the answers run beside the notebook's setup cells, as in the grader's
sandbox. The end-to-end version through the grader is in test_grader_corpus.py.
"""

from __future__ import annotations

import pytest

from autograder.checks import all_specs, run_in_process, spec_for
from autograder.checks.catalog import BEFORE_PROBE, MISTAKES
from tests import corpus

MUTATIONS = corpus.mutations()
ALTERNATIVES = corpus.alternatives()


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.id)
def test_mutation_loses_points_and_is_named(mutation: corpus.Mutation) -> None:
    assert mutation.mistake in MISTAKES, f"{mutation.mistake} is not a catalog id"
    ns = corpus.namespace(mutation.notebook, corpus.mutated_answers(mutation))
    result = run_in_process(spec_for(mutation.grade_id), ns)
    assert result.score < result.max_score, result.render()
    assert mutation.mistake in result.mistakes, result.render()


@pytest.mark.parametrize("alternative", ALTERNATIVES, ids=lambda a: a.id)
def test_alternative_earns_full_marks(alternative: corpus.Alternative) -> None:
    answers = corpus.answers_with(alternative.notebook, alternative.grade_id, alternative.source)
    ns = corpus.namespace(alternative.notebook, answers)
    result = run_in_process(spec_for(alternative.grade_id), ns)
    assert result.score == result.max_score, result.render()
    assert not result.mistakes, result.render()


@pytest.mark.parametrize("grade_id", sorted(all_specs()))
def test_solution_earns_full_marks(grade_id: str) -> None:
    spec = spec_for(grade_id)
    answers = corpus.answers_with(
        spec.notebook, grade_id, corpus.solution_answers_of(spec.notebook)[grade_id]
    )
    result = run_in_process(spec, corpus.namespace(spec.notebook, answers))
    assert result.score == result.max_score == spec.points, result.render()


def test_every_catalog_mistake_has_a_mutation() -> None:
    covered = {m.mistake for m in MUTATIONS}
    uncovered = set(MISTAKES) - BEFORE_PROBE - covered
    assert not uncovered, f"no mutation for {sorted(uncovered)}"
