"""The bound `make bench` prints for two workers against one on two cores."""

import importlib.util

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.model.paths import ROOT

_spec = importlib.util.spec_from_file_location("bench_grade", ROOT / "benchmarks/bench_grade.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

capacities = st.floats(1.0, 2.0)
busy = st.floats(0.0, 2.5)


@given(capacities)
def test_a_worker_on_one_core_leaves_the_whole_second_core(capacity):
    assert bench.best_ratio(1.0, capacity) == pytest.approx(1.0 / capacity)


@given(capacities)
def test_a_worker_on_both_cores_leaves_nothing_to_gain(capacity):
    assert bench.best_ratio(2.0, capacity) == pytest.approx(1.0)


def test_half_the_second_core_on_two_whole_cores():
    assert bench.best_ratio(1.5, 2.0) == pytest.approx(0.75)


@given(busy, busy, capacities)
def test_the_more_one_worker_uses_the_less_a_second_gains(a, b, capacity):
    low, high = sorted((a, b))
    assert bench.best_ratio(low, capacity) <= bench.best_ratio(high, capacity) + 1e-12
