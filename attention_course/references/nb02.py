"""Notebook 02's answer, for notebook 03: the raw scores of one head."""

from __future__ import annotations

import torch
import torch.nn as nn


def affinities(x: torch.Tensor, key: nn.Module, query: nn.Module) -> torch.Tensor:
    """(B,T,C) -> (B,T,T): raw scores q @ k^T, no mask, no scale."""
    k = key(x)  # (B,T,hs)
    q = query(x)  # (B,T,hs)
    return q @ k.transpose(-2, -1)  # (B,T,hs) @ (B,hs,T) -> (B,T,T)
