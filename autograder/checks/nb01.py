"""Checks of notebook 01, uniform averaging: three ways to average the past."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from autograder.checks.base import FunctionSpec

NOTEBOOK = "01_uniform_averaging.ipynb"


def _inputs() -> dict[str, tuple]:
    g = torch.Generator().manual_seed(2024)
    sizes = {"B3_T5_C7": (3, 5, 7), "B4_T4_C2": (4, 4, 2), "T1": (2, 1, 3), "B1_T9_C32": (1, 9, 32)}
    return {k: (torch.randn(*s, generator=g),) for k, s in sizes.items()}


def running_mean(x: torch.Tensor) -> torch.Tensor:
    """Reference: out[b, t] = mean of x[b, 0..t]."""
    steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)
    return x.cumsum(1) / steps


def exclusive_mean(x: torch.Tensor) -> torch.Tensor:
    """loop-exclusive: the mean of x[b, :t]; position 0 averages nothing (nan)."""
    out = torch.full_like(x, float("nan"))
    out[:, 1:] = x.cumsum(1)[:, :-1] / torch.arange(1, x.shape[1], dtype=x.dtype).view(1, -1, 1)
    return out


def exclusive_mean_zero_start(x: torch.Tensor) -> torch.Tensor:
    """loop-exclusive, written with a zero at position 0."""
    return torch.nan_to_num(exclusive_mean(x), nan=0.0)


def running_sum(x: torch.Tensor) -> torch.Tensor:
    """tril-unnormalised: the sum of the past instead of its mean."""
    return torch.tril(torch.ones(x.shape[1], x.shape[1])) @ x


def mean_of_all(x: torch.Tensor) -> torch.Tensor:
    """fill-zero on the zeros matrix: nothing is masked, every position averages all T."""
    return x.mean(1, keepdim=True).expand_as(x).clone()


def future_mean(x: torch.Tensor) -> torch.Tensor:
    """triu-mask: position t averages x[t..T-1]."""
    T = x.shape[1]
    wei = torch.triu(torch.ones(T, T))
    return (wei / wei.sum(1, keepdim=True)) @ x


def strict_future_mean(x: torch.Tensor) -> torch.Tensor:
    """mask-polarity: -inf where tril == 1, so row t sees only t+1.. and the last row is nan."""
    T = x.shape[1]
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros(T, T).masked_fill(tril == 1, float("-inf"))
    return F.softmax(wei, dim=-1) @ x


def column_softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax-dim: softmax over dim 0 of the (T,T) weights normalises columns."""
    T = x.shape[1]
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros(T, T).masked_fill(tril == 0, float("-inf"))
    return F.softmax(wei, dim=0) @ x


class _Average(FunctionSpec):
    notebook = NOTEBOOK
    probe_module = "nb01"
    points = 3.0
    groups = [
        ("equals the running mean of the past, (B,T,C) = (3,5,7)", 1.0, ["B3_T5_C7"]),
        ("works for other sizes, B == T and T = 1 included", 1.0, ["B4_T4_C2", "T1", "B1_T9_C32"]),
    ]

    def make_cases(self) -> dict[str, tuple]:
        return _inputs()

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        return running_mean(x)

    def extra_checks(self, scorer: Any, cases: dict[str, Any], observed: dict[str, Any]) -> bool:
        key = "B3_T5_C7"
        value = observed.get(key)
        first = cases["args"][key][0][:, 0]
        ok = value is not None and getattr(value, "shape", None) == tuple(first.shape[:1]) + (
            5,
            7,
        )
        ok = ok and bool(abs(value[:, 0] - first.numpy()).max() < 1e-5)
        return scorer.check(
            "position 0 equals x[:, 0] (a token's past is itself)",
            1.0,
            ok,
            "out[:, 0] should be x[:, 0]: the only token position 0 can see is itself.",
        )


class AverageLoop(_Average):
    grade_id = "average-loop"
    names = ("average_loop",)
    function = "average_loop"
    probe_function = "probe_average_loop"

    def variants(self) -> dict[str, Callable[..., Any]]:
        return {
            "loop-exclusive": exclusive_mean,
            "tril-unnormalised": running_sum,
        }


class AverageMatmul(_Average):
    grade_id = "average-matmul"
    names = ("average_matmul",)
    function = "average_matmul"
    probe_function = "probe_average_matmul"

    def variants(self) -> dict[str, Callable[..., Any]]:
        return {
            "tril-unnormalised": running_sum,
            "triu-mask": future_mean,
            "loop-exclusive": exclusive_mean_zero_start,
        }


class AverageSoftmax(_Average):
    grade_id = "average-softmax"
    names = ("average_softmax",)
    function = "average_softmax"
    probe_function = "probe_average_softmax"

    def variants(self) -> dict[str, Callable[..., Any]]:
        return {
            "fill-zero": mean_of_all,
            "triu-mask": future_mean,
            "mask-polarity": strict_future_mean,
            "softmax-dim": column_softmax,
            "tril-unnormalised": running_sum,
        }


SPECS = [AverageLoop(), AverageMatmul(), AverageSoftmax()]
