"""Checks of notebook 04, value aggregation: the lecture's version-4 cell as a function."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.base import CellResult, FunctionSpec, Scorer, close
from autograder.checks.diagnostics import Variant, diagnose_variants
from autograder.checks.nb02 import (
    LECTURE_SIZES,
    SCORE_VARIANTS,
    head_inputs,
    modules_of,
    scores,
    sign_symmetric,
)
from autograder.checks.nb03 import WEIGHT_VARIANTS, causal_softmax

NOTEBOOK = "04_value_aggregation.ipynb"


def attention(x, key, query, value):
    """Reference: the version-4 cell, (B,T,C) -> (B,T,hs), no scale."""
    with torch.no_grad():
        wei = causal_softmax(scores(x, key, query))  # (B,T,T)
        return wei @ value(x)  # (B,T,T) @ (B,T,hs) -> (B,T,hs)


def _with_scores(wrong_scores):
    return lambda x, key, query, value: causal_softmax(wrong_scores(x, key, query)) @ value(x)


def _with_weights(wrong_weights):
    return lambda x, key, query, value: wrong_weights(scores(x, key, query)) @ value(x)


def aggregate_x(x, key, query, value):
    """aggregate-x: the weights average x itself, C wide."""
    return causal_softmax(scores(x, key, query)) @ x


def v_at_wei(x, key, query, value):
    """v-at-wei: v @ wei, which runs only when head_size == T."""
    return value(x) @ causal_softmax(scores(x, key, query))


def wei_transposed_at_v(x, key, query, value):
    """v-at-wei, shapes repaired with transposes: (v^T @ wei)^T = wei^T @ v."""
    return (value(x).mT @ causal_softmax(scores(x, key, query))).mT


def scaled(x, key, query, value):
    """Not a catalog mistake here: the scale belongs to notebook 05, not to version 4."""
    s = scores(x, key, query) * key.weight.shape[0] ** -0.5
    return causal_softmax(s) @ value(x)


ATTEND_VARIANTS: list[Variant] = (
    [(m, _with_scores(f)) for m, f in SCORE_VARIANTS]
    + [(m, _with_weights(f)) for m, f in WEIGHT_VARIANTS]
    + [
        ("aggregate-x", aggregate_x),
        ("v-at-wei", v_at_wei),
        ("v-at-wei", wei_transposed_at_v),
    ]
)


class Attend(FunctionSpec):
    notebook = NOTEBOOK
    grade_id = "attend"
    names = ("attend",)
    function = "attend"
    probe_module, probe_function = "nb04", "probe_attend"
    points = 5.0
    sizes = {
        "B3_T5_C12_hs7": (3, 5, 12, 7),
        "B6_T6_C10_hs5": (6, 6, 10, 5),  # B == T
        "B4_T4_C9_hs4": (4, 4, 9, 4),  # B == T == hs
        "B3_T6_C11_hs6": (3, 6, 11, 6),  # hs == T: v @ wei runs
        "T1": (2, 1, 9, 5),
        "lecture": LECTURE_SIZES,
    }
    groups = [
        ("softmax(mask(q @ k^T)) @ v for (B,T,C,hs) = (3,5,12,7)", 1.0, ["B3_T5_C12_hs7"]),
        (
            "other sizes: B == T, B == T == hs, hs == T, T = 1, the lecture's (4,8,32,16)",
            1.0,
            ["B6_T6_C10_hs5", "B4_T4_C9_hs4", "B3_T6_C11_hs6", "T1", "lecture"],
        ),
    ]
    main = "B3_T5_C12_hs7"
    cut = 3  # tokens from here on are changed in the causality case

    def make_cases(self) -> dict[str, Any]:
        return head_inputs(self.sizes, seed=404, n_proj=3)

    def call_args(self, case: dict[str, Any]) -> tuple:
        return modules_of(case)

    def cases(self) -> dict[str, Any]:
        cases = super().cases()
        x = cases["args"][self.main]["x"]
        g = torch.Generator().manual_seed(405)
        later = x.clone()
        later[:, self.cut :] = 3.0 * torch.randn(later[:, self.cut :].shape, generator=g)
        cases["future"] = later  # the same first tokens, a different future
        cases["main"] = self.main
        return cases

    def reference(self, x, key, query, value):
        return attention(x, key, query, value)

    def extra_checks(self, scorer: Scorer, cases: dict[str, Any], observed: dict[str, Any]) -> bool:
        x, _, _, value = modules_of(cases["args"][self.main])
        with torch.no_grad():
            v0 = value(x)[:, 0].numpy()  # (B,hs)
        out = observed.get(self.main)
        shaped = isinstance(out, np.ndarray) and out.ndim == 3 and out.shape[:2] == x.shape[:2]
        first = shaped and close(out[:, 0], v0)
        later = observed.get("future:" + self.main)
        causal = (
            shaped
            and isinstance(later, np.ndarray)
            and later.shape == out.shape
            and close(later[:, : self.cut], out[:, : self.cut].astype(np.float64))
        )
        odd = sign_symmetric(observed, self.main, -1.0)
        if odd is False:
            scorer.name("bias")
        ok = scorer.check(
            "position 0 sees only itself: out[:, 0] == value(x)[:, 0]",
            1.0,
            first,
            "The first token has no past: its output must be its own value vector v[:, 0].",
        )
        ok &= scorer.check(
            f"causal: changing tokens {self.cut}.. leaves outputs 0..{self.cut - 1} unchanged",
            1.0,
            causal,
            "An output may depend only on its own token and earlier ones: mask the future.",
        )
        ok &= scorer.check(
            "no bias: the output for -x is minus the output for x",
            1.0,
            bool(odd),
            "Without biases, flipping the sign of x flips v and leaves the weights alone, so "
            "the output must flip sign too; yours did not (or did not run).",
        )
        return ok

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        result = super().judge(cases, observed)
        if result.score < result.max_score:
            args = {k: modules_of(a) for k, a in cases["args"].items()}
            if all(close(observed.get(k), scaled(*a)) for k, a in args.items()):
                result.checks[0].detail += (
                    " Your output is scaled by head_size ** -0.5: version 4 has no scale yet "
                    "(it arrives in notebook 05)."
                )
        return result

    def diagnose(self, args: dict[str, tuple], observed: dict[str, Any]) -> list[str]:
        return diagnose_variants(ATTEND_VARIANTS, args, observed, self.dtype)


SPECS = [Attend()]
