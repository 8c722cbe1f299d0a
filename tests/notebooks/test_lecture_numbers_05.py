"""Notebook 05 shows the lecture's numbers, computed live by its `lecture`-tagged cells.

The setup cells and the lecture cells run on their own, in notebook order; the values are the
lecture's printed ones (seed 1337, the toy batch and three projections drawn first).
"""

from __future__ import annotations

from typing import Any

import pytest

from autograder.model.notebook_io import exec_cell, read, setup_sources, source
from autograder.model.paths import SOLUTIONS

NOTEBOOK = SOLUTIONS / "05_the_head.ipynb"


@pytest.fixture(scope="module")
def ns() -> dict[str, Any]:
    nb = read(NOTEBOOK)
    namespace: dict[str, Any] = {}
    for i, src in enumerate(setup_sources(nb)):
        exec_cell(src, namespace, f"<setup {i}>")
    lecture = [c for c in nb.cells if "lecture" in c.get("metadata", {}).get("tags", [])]
    assert len(lecture) == 2, "expected the variance cell and the softmax cell"
    for i, cell in enumerate(lecture):
        exec_cell(source(cell), namespace, f"<lecture {i}>")
    return namespace


def test_unit_variance_queries_and_keys(ns: dict[str, Any]) -> None:
    assert round(ns["k"].var().item(), 4) == 1.0449
    assert round(ns["q"].var().item(), 4) == 1.0700


def test_scaled_scores_keep_unit_variance(ns: dict[str, Any]) -> None:
    assert round(ns["wei"].var().item(), 4) == 1.0918
    assert round(ns["wei_unscaled"].var().item(), 2) == 17.47
    ratio = ns["wei_unscaled"].var().item() / ns["wei"].var().item()
    assert ratio == pytest.approx(ns["head_size"], rel=1e-5)  # the scale divides it by hs


def test_softmax_saturates_when_sharpened(ns: dict[str, Any]) -> None:
    assert [round(v, 4) for v in ns["soft"].tolist()] == [0.1925, 0.1426, 0.2351, 0.1426, 0.2872]
    assert [round(v, 4) for v in ns["soft8"].tolist()] == [0.0326, 0.0030, 0.1615, 0.0030, 0.8000]
