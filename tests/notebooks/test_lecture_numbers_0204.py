"""The lecture's printed numbers come out of notebooks 02-04 when their lecture cells run.

Each test executes exactly the setup cells and the cells tagged `lecture` of a solution
notebook, in order, and inspects the namespace: the version-4 `wei[0]` of the lecture notes
(seed 1337, B,T,C = 4,8,32, head_size 16) has the second row [0.1574, 0.8426, 0, ...].
"""

from __future__ import annotations

from typing import Any

import torch

from autograder.model.notebook_io import exec_cell, is_setup, read, source
from autograder.model.paths import SOLUTIONS

LECTURE_TAG = "lecture"
SECOND_ROW = [0.1574, 0.8426]  # printed to 4 decimals in the lecture; the other six are 0


def lecture_namespace(notebook: str) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    cells = read(SOLUTIONS / notebook).cells
    tagged = [c for c in cells if is_setup(c) or LECTURE_TAG in c.metadata.get("tags", [])]
    assert any(LECTURE_TAG in c.metadata.get("tags", []) for c in tagged), (
        f"{notebook}: no lecture cells"
    )
    for i, cell in enumerate(tagged):
        exec_cell(source(cell), ns, f"<{notebook} cell {i}>")
    return ns


def assert_lecture_row(wei: torch.Tensor) -> None:
    assert tuple(wei.shape) == (4, 8, 8)
    row = wei[0, 1].detach()
    assert torch.allclose(row[:2], torch.tensor(SECOND_ROW), atol=5e-5), row
    assert torch.equal(row[2:], torch.zeros(6)), row
    assert torch.allclose(wei.sum(-1), torch.ones(4, 8), atol=1e-6)


def test_02_scores_give_the_lecture_weights() -> None:
    ns = lecture_namespace("02_queries_and_keys.ipynb")
    scores = ns["scores"]
    assert tuple(ns["k"].shape) == tuple(ns["q"].shape) == (4, 8, 16)
    tril = torch.tril(torch.ones(8, 8))
    assert_lecture_row(torch.softmax(scores.masked_fill(tril == 0, float("-inf")), dim=-1))


def test_03_weights_are_the_lecture_weights() -> None:
    ns = lecture_namespace("03_mask_then_softmax.ipynb")
    future = torch.ones(8, 8, dtype=torch.bool).triu(1)
    assert bool(torch.isneginf(ns["masked"][0][future]).all())
    assert_lecture_row(ns["weights"])


def test_04_version_4_cell() -> None:
    ns = lecture_namespace("04_value_aggregation.ipynb")
    assert_lecture_row(ns["wei"])
    out, v = ns["out"], ns["v"]
    assert tuple(out.shape) == (4, 8, 16)
    expected = 0.1574 * v[0, 0] + 0.8426 * v[0, 1]  # out[0, 1] mixes two values, as printed
    assert torch.allclose(out[0, 1], expected, atol=1e-3)


def test_04_starts_from_the_weights_of_its_own_toy() -> None:
    """Section 1 of notebook 04 takes `wei` from `lecture_weights()`: the same weights as the
    version-4 cell computes from the notebook's own x, key and query, with no random draw."""
    from attention_course.references.nb03 import lecture_weights

    ns = lecture_namespace("04_value_aggregation.ipynb")
    before = torch.random.get_rng_state()
    given = lecture_weights()
    assert torch.equal(torch.random.get_rng_state(), before)
    assert torch.allclose(given, ns["wei"].detach(), atol=1e-6)
