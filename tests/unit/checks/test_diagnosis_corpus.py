"""Every catalog mistake is named however it is written; every correct answer keeps full marks.

The answers are written from scratch by the corpus writers (tests/corpus/nbNN.py, WRITERS):
hypothesis draws the way each part of an answer is written (loops, matmul, einsum, bmm,
torch.where, a large negative fill, ...), one size the cell is checked on besides B == T == hs
and T = 1, which every answer meets (`corpus.extra_sizes`), and the seed of the case tensors.
A wrong answer must lose points and have its mistake named; a correct one must earn full marks
with nothing named. The answers run in-process, beside the names a notebook's setup provides
(torch, nn, F, math, Head). The naming rate per id is printed after the run (and by
benchmarks/naming_rate.py, in `make bench`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.checks import all_specs
from autograder.checks.base import CellResult
from autograder.checks.catalog import BEFORE_PROBE, MISTAKES
from tests import corpus
from tests.corpus import one_thread  # noqa: F401 (a fixture)

WRITERS = corpus.writers()
SLOW_CELLS = {"unmasked-head"}  # trains a small model per answer
EXAMPLES = 2  # each meets B == T == hs, T = 1 and a drawn size
TALLY = corpus.Tally()


class NamingRate:
    """Prints the naming rate per catalog id of this file's answers after the test run."""

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if TALLY.wrong or TALLY.right:
            terminalreporter.write_sep("-", "naming rate per catalog id (written answers)")
            terminalreporter.write_line(TALLY.table())


@pytest.fixture(scope="module", autouse=True)
def naming_rate(request: pytest.FixtureRequest, one_thread: None) -> None:  # noqa: F811
    if not request.config.pluginmanager.has_plugin("naming-rate"):
        request.config.pluginmanager.register(NamingRate(), "naming-rate")


def grade(writer: corpus.Writer, data: st.DataObject) -> tuple[str, CellResult]:
    def choose(name: str, options: Any) -> Any:
        return data.draw(st.sampled_from(list(options)), label=name)

    return corpus.grade_written(writer, choose, data.draw(st.integers(0, 2**16), label="seed"))


def check(writer: corpus.Writer, source: str, result: CellResult) -> None:
    TALLY.add(writer, result)
    shown = f"{result.render()}\n--- answer ---\n{source}"
    if writer.mistake is None:
        assert result.score == result.max_score, shown
        assert not result.mistakes, shown
    else:
        assert result.score < result.max_score, shown
        assert writer.mistake in result.mistakes, shown


def _params(slow: bool, drawn: bool = True) -> list[Any]:
    chosen = [
        w
        for w in WRITERS
        if (w.grade_id in SLOW_CELLS) == slow and (slow or corpus.draws(w) == drawn)
    ]
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
    check(writer, *grade(writer, data))


@pytest.mark.parametrize("writer", _params(slow=False, drawn=False))
def test_fixed_answer_is_graded_and_named(writer: corpus.Writer) -> None:
    """An answer that draws nothing, in a cell without sizes: one grading says it all."""
    check(writer, *corpus.grade_written(writer, corpus.first_choice, 0))


@pytest.mark.parametrize("writer", _params(slow=True))
@settings(SETTINGS, max_examples=1)
@given(data=st.data())
def test_written_answer_of_a_slow_cell(writer: corpus.Writer, data: st.DataObject) -> None:
    check(writer, *grade(writer, data))


def test_every_catalog_mistake_has_three_ways() -> None:
    ways = Counter(w.mistake for w in WRITERS if w.mistake)
    short = {m: ways[m] for m in set(MISTAKES) - BEFORE_PROBE if ways[m] < 3}
    assert not short, f"fewer than three ways to write {short}"


def test_every_answer_cell_has_three_correct_writers() -> None:
    correct = Counter(w.grade_id for w in WRITERS if w.mistake is None)
    short = {g: correct[g] for g in all_specs() if correct[g] < 3}
    assert not short, f"fewer than three correct alternatives for {short}"


def test_every_drawn_answer_meets_both_edge_sizes() -> None:
    """The sizes every answer of a sized cell is checked on include B == T == hs and T = 1."""
    for writer in WRITERS:
        sizes = corpus.extra_sizes(writer.grade_id, corpus.first_choice)
        if sizes is not None:
            assert {"edge_BTH", "edge_T1"} <= set(sizes), writer.id
