"""Notebook 03's answer, for notebook 04: causal attention weights from raw scores."""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn import functional as F

from attention_course.references.nb02 import affinities


def mask_then_softmax(scores: torch.Tensor) -> torch.Tensor:
    """(...,T,T) raw scores -> causal weights: -inf on the future, then softmax over the keys."""
    T = scores.shape[-1]
    tril = torch.tril(torch.ones(T, T, device=scores.device))  # (T,T)
    masked = scores.masked_fill(tril == 0, float("-inf"))  # (...,T,T): the future is -inf
    return F.softmax(masked, dim=-1)  # (...,T,T): each row sums to one


def lecture_weights(seed: int = 1337) -> torch.Tensor:
    """The (4,8,8) weights of the lecture's toy, as notebook 03 computes them: seed, x of shape
    (4, 8, 32), then key and query projections to head_size 16, drawn in that order. The global
    random state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        x = torch.randn(4, 8, 32)  # (B,T,C)
        key = nn.Linear(32, 16, bias=False)
        query = nn.Linear(32, 16, bias=False)
        with torch.no_grad():
            return mask_then_softmax(affinities(x, key, query))  # (B,T,T)
