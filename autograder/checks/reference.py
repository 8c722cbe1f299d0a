"""The grader's one reference attention, with a typed switch for every catalog mistake.

`Config()` is notebook 05's head. Every judge computes what an answer should return from
`attention` (or `weights`, `average`) with the config of its cell (`NB04`, `UNMASKED`, ...),
and `SWITCHES` says which field value turns each catalog mistake on, so that the reference can
also compute what a mistaken answer returns. Everything is computed in float64.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Literal

import torch
import torch.nn as nn

NEG_INF = float("-inf")


class Scale(Enum):
    """What the scores q @ k^T are multiplied by before the softmax."""

    HEAD = "head_size ** -0.5"
    NONE = "1"
    EMBED = "n_embd ** -0.5"
    HEAD_NO_SQRT = "1 / head_size"

    def factor(self, head_size: int, n_embd: int) -> float:
        return {
            Scale.HEAD: head_size**-0.5,
            Scale.NONE: 1.0,
            Scale.EMBED: n_embd**-0.5,
            Scale.HEAD_NO_SQRT: 1.0 / head_size,
        }[self]


# which products make the scores: the query against the keys, or a mix-up
ScoreForm = Literal["q@k", "k@q", "q@q", "k@k", "mixed-batch"]
# which positions row t may see: 0..t, t..T-1, t+1..T-1, 0..t-1, or all
MaskForm = Literal["causal", "upper", "strict-upper", "strict-lower", "none"]
Dropout = Literal["weights", "scores", "output", "always"]


@dataclass(frozen=True)
class Config:
    """One attention computation; the defaults are the course's head (notebook 05)."""

    scale: Scale = Scale.HEAD
    scores: ScoreForm = "q@k"
    bias: bool = False
    mask: MaskForm = "causal"
    fill: Literal["-inf", "zero"] = "-inf"
    mask_after_softmax: bool = False
    softmax_dim: Literal[-1, -2, 0] = -1
    normalise: bool = True  # False: the masked exp(scores) (ones, for averages) are summed
    aggregate: Literal["v", "x"] = "v"
    product: Literal["wei@v", "v@wei"] = "wei@v"
    crop: bool = True
    dropout: Dropout = "weights"
    buffer: bool = True  # tril registered as a buffer
    device: Literal["input", "cpu"] = "input"
    in_place: bool = False  # the mask written into the shared tril buffer


HEAD = Config()
NB04 = Config(scale=Scale.NONE)  # the lecture's version 4: no scale yet
AFFINITIES = Config(scale=Scale.NONE)  # raw scores only
AVERAGE = Config(scale=Scale.NONE, aggregate="x")  # notebook 01: zero scores, averages of x
UNMASKED = Config(mask="none")
NO_VALUE = Config(aggregate="x")

# catalog id -> the config fields that turn the mistake on
SWITCHES: dict[str, dict[str, Any]] = {
    "loop-exclusive": {"mask": "strict-lower"},
    "tril-unnormalised": {"normalise": False},
    "transpose-batch": {"scores": "mixed-batch"},
    "swapped-qk": {"scores": "k@q"},
    "tied-qk": {"scores": "q@q"},
    "bias": {"bias": True},
    "triu-mask": {"mask": "upper"},
    "mask-polarity": {"mask": "strict-upper"},
    "fill-zero": {"fill": "zero"},
    "mask-after-softmax": {"mask_after_softmax": True},
    "softmax-dim": {"softmax_dim": -2},
    "no-scale": {"scale": Scale.NONE},
    "scale-by-C": {"scale": Scale.EMBED},
    "scale-no-sqrt": {"scale": Scale.HEAD_NO_SQRT},
    "aggregate-x": {"aggregate": "x"},
    "v-at-wei": {"product": "v@wei"},
    "tril-not-buffer": {"buffer": False},
    "tril-not-cropped": {"crop": False},
    "dropout-misplaced": {"dropout": "output"},
    "hardcoded-device": {"device": "cpu"},
    "mask-in-place": {"in_place": True},
}


def with_mistake(config: Config, *mistakes: str) -> Config:
    """`config` with the switches of the given catalog mistakes turned on."""
    for mistake in mistakes:
        config = replace(config, **SWITCHES[mistake])
    return config


def visible(T: int, mask: MaskForm, block: int | None = None) -> torch.Tensor:
    """(T,T) bool: True where row t may look. `block` > T: an uncropped (block,block) mask."""
    n = block or T
    rows = torch.arange(n).view(-1, 1)
    cols = torch.arange(n).view(1, -1)
    return {
        "causal": cols <= rows,
        "upper": cols >= rows,
        "strict-upper": cols > rows,
        "strict-lower": cols < rows,
        "none": torch.ones(n, n, dtype=torch.bool),
    }[mask]


def raw_scores(q: torch.Tensor, k: torch.Tensor, form: ScoreForm = "q@k") -> torch.Tensor:
    """(B,T,T) products of queries and keys; 'mixed-batch' pairs sequence b with key b of
    every sequence (k.transpose(0, 1)), which runs only when B == T."""
    if form == "mixed-batch":
        return q @ k.transpose(0, 1).transpose(-2, -1)
    left, right = {"q@k": (q, k), "k@q": (k, q), "q@q": (q, q), "k@k": (k, k)}[form]
    return left @ right.transpose(-2, -1)  # (B,T,hs) @ (B,hs,T) -> (B,T,T)


def weights(
    scores: torch.Tensor,
    config: Config,
    head_size: int,
    n_embd: int,
    block: int | None = None,
    hidden: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention weights (...,T,T) from raw scores: scale, mask, softmax as `config` says.

    `hidden` (True where masked) replaces the mask the config describes (a module's buffer).
    """
    wei = scores * config.scale.factor(head_size, n_embd)
    if hidden is None:
        T = wei.shape[-1]
        hidden = ~visible(T, config.mask, None if config.crop else block).to(wei.device)
    fill = NEG_INF if config.fill == "-inf" else 0.0
    if not config.normalise:  # sums instead of averages: exp of the scores, masked, unnormalised
        return torch.exp(wei).masked_fill(hidden, 0.0)
    if not config.mask_after_softmax:
        wei = wei.masked_fill(hidden, fill)
    wei = torch.softmax(wei, dim=config.softmax_dim)
    if config.mask_after_softmax:
        wei = wei.masked_fill(hidden, 0.0)
    return wei


def average(x: torch.Tensor, config: Config = AVERAGE) -> torch.Tensor:
    """Notebook 01: attention with zero scores applied to x itself, (B,T,C) -> (B,T,C)."""
    B, T, C = x.shape
    zeros = torch.zeros(T, T, dtype=torch.float64)  # (T,T): every position alike
    wei = weights(zeros, config, head_size=1, n_embd=C)  # (T,T)
    return _aggregate(wei, x.double(), config)


def project(x: torch.Tensor, w: dict[str, torch.Tensor], name: str, bias: bool) -> torch.Tensor:
    """x @ W^T (+ b) in float64 for the projection `name` of the weights dict."""
    out = x.double() @ w[name].double().T
    if bias and w.get(name + "_bias") is not None:
        out = out + w[name + "_bias"].double()
    return out


def attention(
    x: torch.Tensor,
    w: dict[str, torch.Tensor],
    config: Config = HEAD,
    block_size: int | None = None,
) -> torch.Tensor:
    """The head's output (B,T,hs) in float64 for weights w['key'|'query'|'value'(+'_bias')].

    An uncropped mask (crop=False) raises, as the student's code does, unless T == block_size.
    """
    k, q, v = (project(x, w, n, config.bias) for n in ("key", "query", "value"))  # (B,T,hs)
    scores = raw_scores(q, k, config.scores)  # (B,T,T)
    wei = weights(scores, config, k.shape[-1], x.shape[-1], block_size)
    return _aggregate(wei, v if config.aggregate == "v" else x.double(), config)


def _aggregate(wei: torch.Tensor, values: torch.Tensor, config: Config) -> torch.Tensor:
    if config.product == "v@wei":  # the order swapped, shapes repaired: wei^T @ values
        return wei.transpose(-2, -1) @ values
    return wei @ values  # (B,T,T) @ (B,T,width) -> (B,T,width)


class ReferenceHead(nn.Module):
    """The head as a module, mistakes included: what a student's `Head` is held against."""

    def __init__(
        self,
        n_embd: int,
        head_size: int,
        block_size: int,
        dropout: float = 0.0,
        config: Config = HEAD,
    ) -> None:
        super().__init__()
        self.config = config
        for name in ("key", "query", "value"):
            setattr(self, name, nn.Linear(n_embd, head_size, bias=config.bias))
        tril = torch.tril(torch.ones(block_size, block_size))
        if config.buffer:
            self.register_buffer("tril", tril)
        else:
            self.tril = tril
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg, T = self.config, x.shape[1]
        k, q, v = self.key(x), self.query(x), self.value(x)  # (B,T,hs)
        scores = raw_scores(q, k, cfg.scores)  # (B,T,T)
        if cfg.dropout == "scores":
            scores = self.dropout(scores)
        tril = self.tril[:T, :T] if cfg.crop else self.tril
        if cfg.device == "cpu":
            tril = tril.to("cpu")
        if cfg.in_place:
            tril.masked_fill_(tril == 0, NEG_INF)  # a view: writes into the shared buffer
        hidden = tril != 1
        if cfg.mask != "causal":
            hidden = ~visible(T, cfg.mask).to(x.device)
        wei = weights(scores, cfg, k.shape[-1], x.shape[-1], hidden=hidden)  # (B,T,T)
        if cfg.dropout == "weights":
            wei = self.dropout(wei)
        elif cfg.dropout == "always":
            wei = nn.functional.dropout(wei, self.dropout.p, training=True)
        out = _aggregate(wei, v if cfg.aggregate == "v" else x, cfg)
        return self.dropout(out) if cfg.dropout == "output" else out
