"""Modules the probes hand to student code, built from the case's weights (no global RNG)."""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn import functional as F


def linear(weight: torch.Tensor, bias: torch.Tensor | None = None) -> nn.Linear:
    """nn.Linear holding a copy of the given (out, in) weight (and bias)."""
    out_features, in_features = weight.shape
    layer = nn.Linear(in_features, out_features, bias=bias is not None, device="meta")
    layer = layer.to_empty(device="cpu")
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


def load(module: nn.Module, weights: dict[str, torch.Tensor], names: tuple[str, ...]) -> None:
    """Copy weights[name] into module.<name>.weight for each projection name."""
    with torch.no_grad():
        for name in names:
            getattr(module, name).weight.copy_(weights[name])


class CourseHead(nn.Module):
    """The course's head (notebook 05), handed to answers that take a head as input.

    `causal=False` gives a head without the mask. Only inputs are built from it: the grader
    computes what the answers should return on its own side.
    """

    def __init__(
        self,
        n_embd: int,
        head_size: int,
        block_size: int,
        dropout: float = 0.0,
        causal: bool = True,
    ) -> None:
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        k = self.key(x)  # (B,T,hs)
        q = self.query(x)  # (B,T,hs)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B,T,T)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = self.dropout(F.softmax(wei, dim=-1))  # (B,T,T)
        return wei @ self.value(x)  # (B,T,hs)


def course_head(spec: dict, dropout: float = 0.0) -> CourseHead:
    """A CourseHead from a case dict with 'key', 'query', 'value' weights and 'block_size'."""
    hs, C = spec["key"].shape
    with torch.random.fork_rng(devices=[]):
        head = CourseHead(C, hs, int(spec["block_size"]), dropout, bool(spec.get("causal", True)))
    load(head, spec, ("key", "query", "value"))
    return head
