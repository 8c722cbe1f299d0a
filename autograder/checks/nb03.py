"""Checks of notebook 03, mask then softmax: causal weights and the count of what survives."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.base import CellResult, CellSpec, FunctionSpec, Scorer
from autograder.checks.diagnostics import Variant, diagnose_variants
from autograder.checks.nb02 import _as_int

NOTEBOOK = "03_mask_then_softmax.ipynb"
NEG_INF = float("-inf")


def _tril(scores: torch.Tensor) -> torch.Tensor:
    T = scores.shape[-1]
    return torch.tril(torch.ones(T, T, dtype=torch.bool, device=scores.device))


def causal_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Reference: -inf on the strict upper triangle (the future), softmax over the keys."""
    masked = scores.masked_fill(~_tril(scores), NEG_INF)  # (...,T,T)
    return torch.softmax(masked, dim=-1)  # (...,T,T), each row sums to one


# ---- wrong variants of the weights (scores -> weights) -----------------------------------


def lower_masked(scores):
    """triu-mask: the past is masked, row t sees t..T-1."""
    return torch.softmax(scores.masked_fill(~_tril(scores).mT, NEG_INF), dim=-1)


def inverted_mask(scores):
    """mask-polarity: -inf where tril == 1, row t sees t+1..T-1 and the last row is nan."""
    return torch.softmax(scores.masked_fill(_tril(scores), NEG_INF), dim=-1)


def zero_filled(scores):
    """fill-zero: the future scores become 0 and still get weight exp(0)."""
    return torch.softmax(scores.masked_fill(~_tril(scores), 0.0), dim=-1)


def masked_after(scores):
    """mask-after-softmax: softmax over all keys, then the future zeroed."""
    return torch.softmax(scores, dim=-1).masked_fill(~_tril(scores), 0.0)


def masked_after_inf(scores):
    """mask-after-softmax: softmax over all keys, then -inf written over the future."""
    return torch.softmax(scores, dim=-1).masked_fill(~_tril(scores), NEG_INF)


def column_softmax(scores):
    """softmax-dim: the masked scores normalised over the query axis (dim=-2)."""
    return torch.softmax(scores.masked_fill(~_tril(scores), NEG_INF), dim=-2)


def dim1_softmax(scores):
    """softmax-dim: dim=1, the query axis of a (B,T,T) batch (a head axis of 4-D input)."""
    return torch.softmax(scores.masked_fill(~_tril(scores), NEG_INF), dim=1)


WEIGHT_VARIANTS: list[Variant] = [
    ("triu-mask", lower_masked),
    ("mask-polarity", inverted_mask),
    ("fill-zero", zero_filled),
    ("mask-after-softmax", masked_after),
    ("mask-after-softmax", masked_after_inf),
    ("softmax-dim", column_softmax),
    ("softmax-dim", dim1_softmax),
]


def nonzero_count(T: int) -> int:
    """Nonzero entries of the reference weights of one (T,T) matrix of random scores."""
    g = torch.Generator().manual_seed(T)
    scores = torch.randn(T, T, generator=g, dtype=torch.float64)
    return int(torch.count_nonzero(causal_softmax(scores)))


class MaskThenSoftmax(FunctionSpec):
    notebook = NOTEBOOK
    grade_id = "mask-then-softmax"
    names = ("mask_then_softmax",)
    function = "mask_then_softmax"
    probe_module, probe_function = "nb03", "probe_mask_then_softmax"
    points = 5.0
    shapes = {
        "B3_T5": (3, 5, 5),
        "B4_T4": (4, 4, 4),  # B == T
        "T1": (2, 1, 1),
        "T6_2d": (6, 6),
        "B2_H3_T5_4d": (2, 3, 5, 5),
    }
    groups = [
        ("causal weights for (B,T,T) = (3,5,5)", 1.0, ["B3_T5"]),
        (
            "other shapes: B == T, T = 1, a plain (T,T) matrix, (B,H,T,T)",
            1.0,
            ["B4_T4", "T1", "T6_2d", "B2_H3_T5_4d"],
        ),
    ]
    main = "B3_T5"

    def make_cases(self) -> dict[str, tuple]:
        g = torch.Generator().manual_seed(303)
        return {k: (2.0 * torch.randn(*s, generator=g),) for k, s in self.shapes.items()}

    def cases(self) -> dict[str, Any]:
        cases = super().cases()
        (scores,) = cases["args"][self.main]
        g = torch.Generator().manual_seed(304)
        other = 5.0 * torch.randn(scores.shape, generator=g)
        future = ~_tril(scores)
        cases["future"] = torch.where(future, other, scores)  # same past, different future
        cases["main"] = self.main
        return cases

    def reference(self, scores):
        return causal_softmax(scores)

    def extra_checks(self, scorer: Scorer, cases: dict[str, Any], observed: dict[str, Any]) -> bool:
        outs = [observed.get(k) for k in ("B3_T5", "B4_T4", "T6_2d")]
        shaped = all(
            isinstance(o, np.ndarray) and o.shape == cases["args"][k][0].shape and o.size
            for o, k in zip(outs, ("B3_T5", "B4_T4", "T6_2d"), strict=True)
        )
        sums_one = shaped and all(
            np.allclose(o.astype(np.float64).sum(-1), 1.0, atol=1e-4) for o in outs
        )
        upper_zero = shaped and all(
            bool(np.all(np.triu(o, k=1) == 0)) and not np.isnan(o).any() for o in outs
        )
        a, b = observed.get(self.main), observed.get("future:" + self.main)
        blind = (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        )
        ok = scorer.check(
            "every row sums to one",
            1.0,
            sums_one,
            "weights.sum(-1) must be all ones: mask before the softmax, and softmax over the "
            "last axis (the keys).",
        )
        ok &= scorer.check(
            "the strict upper triangle (the future) is exactly zero",
            1.0,
            upper_zero,
            "Row t may only weigh columns 0..t: fill the scores with -inf where tril == 0.",
        )
        ok &= scorer.check(
            "changing the scores of future keys changes nothing",
            1.0,
            blind,
            "Two score matrices that differ only above the diagonal must give the same weights.",
        )
        return ok

    def diagnose(self, args: dict[str, tuple], observed: dict[str, Any]) -> list[str]:
        return diagnose_variants(WEIGHT_VARIANTS, args, observed, self.dtype)


class NonzeroCount(CellSpec):
    notebook = NOTEBOOK
    grade_id = "nonzero-count"
    names = ("NONZERO", "n_visible")
    probe_module, probe_function = "nb03", "probe_nonzero_count"
    points = 2.0
    sizes = (1, 2, 3, 5, 8, 13, 64, 257)

    def cases(self) -> dict[str, Any]:
        return {"T": 8, "sizes": self.sizes}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        T = cases["T"]
        value = _as_int(observed.get("NONZERO"))
        scorer.check(
            f"NONZERO is the number of nonzero weights of one ({T},{T}) matrix",
            1.0,
            value == nonzero_count(T),
            f"NONZERO is {observed.get('NONZERO', 'missing')!r}: count the nonzero entries of "
            f"one batch element's weights, e.g. torch.count_nonzero(wei[0]).",
        )
        wrong = []
        for size in cases["sizes"]:
            got = _as_int(observed.get(f"n_visible({size})"))
            if got != nonzero_count(size):
                wrong.append((size, got))
        detail = ""
        if wrong:
            size, got = wrong[0]
            raised = observed.get(f"n_visible({size})!")
            detail = f"n_visible({size}) " + (f"raised {raised}" if raised else f"is {got}")
            detail += ": row t of the weights sees columns 0..t, itself included."
        scorer.check(
            "n_visible(T) counts the nonzero weights for T = "
            + ", ".join(map(str, cases["sizes"])),
            1.0,
            not wrong,
            detail,
        )
        counts = [value] + [_as_int(observed.get(f"n_visible({s})")) for s in (T, 5)]
        if value == T * T or counts[1:] == [T * T, 25]:
            scorer.name("fill-zero")
        return scorer.result


SPECS = [MaskThenSoftmax(), NonzeroCount()]
