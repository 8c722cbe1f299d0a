"""Notebook 03's answer, for notebook 04: causal attention weights from raw scores."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def mask_then_softmax(scores: torch.Tensor) -> torch.Tensor:
    """(...,T,T) raw scores -> causal weights: -inf on the future, then softmax over the keys."""
    T = scores.shape[-1]
    tril = torch.tril(torch.ones(T, T, device=scores.device))  # (T,T)
    masked = scores.masked_fill(tril == 0, float("-inf"))  # (...,T,T): the future is -inf
    return F.softmax(masked, dim=-1)  # (...,T,T): each row sums to one
