"""The reference answers that later notebooks import agree with the grader's own references,
and the training step that notebook 06 shows is the one `train` runs."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from attention_course import charmodel
from attention_course.references import nb02, nb03, nb05, nb06
from autograder.checks.reference import ReferenceHead


def _inputs(B: int = 3, T: int = 5, C: int = 12, seed: int = 0) -> torch.Tensor:
    return torch.randn(B, T, C, generator=torch.Generator().manual_seed(seed))


def _causal(scores: torch.Tensor) -> torch.Tensor:
    T = scores.shape[-1]
    return torch.where(torch.ones(T, T).tril().bool(), scores, -math.inf).softmax(-1)


def test_affinities_is_q_dot_k_per_sequence() -> None:
    x = _inputs(B=4, T=4, C=9)  # B == T
    key, query = nn.Linear(9, 4, bias=False), nn.Linear(9, 4, bias=False)
    expected = torch.einsum("btd,bsd->bts", query(x), key(x))
    assert torch.allclose(nb02.affinities(x, key, query), expected, atol=1e-6)


def test_mask_then_softmax_for_any_leading_shape() -> None:
    scores = torch.randn(2, 3, 6, 6)
    assert torch.allclose(nb03.mask_then_softmax(scores), _causal(scores), atol=1e-6)
    assert torch.allclose(nb03.mask_then_softmax(scores[0, 0]), _causal(scores[0, 0]), atol=1e-6)


def test_head_matches_the_graders_reference_with_the_same_weights() -> None:
    torch.manual_seed(0)
    head, ref = nb05.Head(12, 4, 8).eval(), ReferenceHead(12, 4, 8).eval()
    ref.load_state_dict(head.state_dict())
    x = _inputs(T=5)
    assert torch.allclose(head(x), ref(x), atol=1e-6)
    assert "tril" in dict(head.named_buffers())


def test_no_value_head_aggregates_x() -> None:
    torch.manual_seed(0)
    head = nb06.NoValueHead(12, 4, 8).eval()
    assert sorted(n for n, _ in head.named_parameters()) == ["key.weight", "query.weight"]
    x = _inputs(T=6)
    weights = _causal(head.query(x) @ head.key(x).mT / 2.0)  # head_size 4: scale 1/2
    assert torch.allclose(head(x), weights @ x, atol=1e-5)


def test_train_step_returns_the_loss_before_the_step_and_moves_the_weights() -> None:
    torch.manual_seed(0)
    model = charmodel.CharModel(11, 8, 4, ReferenceHead(8, 8, 4), head_out=8)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randint(0, 11, (5, 4))
    y = torch.randint(0, 11, (5, 4))
    before = model(x, y)[1].item()
    weights = model.lm_head.weight.detach().clone()
    assert charmodel.train_step(model, optimizer, x, y) == before
    assert not torch.equal(model.lm_head.weight, weights)
    assert model(x, y)[1].item() < before
