"""The course's reference attention head, the one trusted implementation the judges share."""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn import functional as F


class ReferenceHead(nn.Module):
    """The contract's Head (notebook 05); `causal=False` gives the unmasked head of exercise 2."""

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
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B,T,hs) @ (B,hs,T) -> (B,T,T)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B,T,T)
        wei = self.dropout(F.softmax(wei, dim=-1))  # (B,T,T)
        return wei @ self.value(x)  # (B,T,T) @ (B,T,hs) -> (B,T,hs)
