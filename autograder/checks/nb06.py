"""Checks of notebook 06, experiments: capture a head's weights, remove the mask, drop the value.

The probes (`autograder.probe.nb06`) build heads from the case weights (the course's `Head`
for `capture_attention`, the student's classes for the other two), run them and record
outputs, weights, hooks and parameter names. The judges recompute every reference from the
same weights, so nothing can pass by luck or by hard-coding a number.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from autograder.checks.base import CellResult, CellSpec, Scorer, close, why_not
from autograder.checks.diagnostics import match_mistakes
from autograder.probe.modules import CourseHead as ReferenceHead  # noqa: F401 (tests patch it)

NOTEBOOK = "06_experiments.ipynb"

# name -> (B, T, C, hs, block_size): distinct sizes, B == T, T = 1, T == block_size, C == T.
SIZES: dict[str, tuple[int, int, int, int, int]] = {
    "B3_T5_C7_hs4": (3, 5, 7, 4, 8),
    "B4_T4_C6_hs3": (4, 4, 6, 3, 6),
    "T1": (2, 1, 5, 3, 4),
    "T_eq_block_C_eq_T": (2, 6, 6, 4, 6),
}
MAIN = "B3_T5_C7_hs4"
OTHERS = [k for k in SIZES if k != MAIN]
CROPPED = [k for k, s in SIZES.items() if s[1] < s[4]]


def _head_cases(seed: int) -> dict[str, dict[str, Any]]:
    g = torch.Generator().manual_seed(seed)
    cases = {}
    for key, (B, T, C, hs, bs) in SIZES.items():
        cases[key] = {
            "x": torch.randn(B, T, C, generator=g),
            "key": torch.randn(hs, C, generator=g) * C**-0.5,
            "query": torch.randn(hs, C, generator=g) * C**-0.5,
            "value": torch.randn(hs, C, generator=g) * C**-0.5,
            "block_size": bs,
        }
    return cases


# ---- trusted references ------------------------------------------------------------------


def weights(
    c: dict[str, Any],
    *,
    causal: bool = True,
    scale: str = "hs",
    softmax_dim: int = -1,
    fill: float = float("-inf"),
    mask_after: bool = False,
    triangle: str = "tril",
) -> torch.Tensor:
    """Attention weights (B,T,T) for case c; the keywords produce the catalog's mistakes."""
    x = c["x"].double()
    k = x @ c["key"].double().T  # (B,T,hs)
    q = x @ c["query"].double().T  # (B,T,hs)
    hs, C = k.shape[-1], x.shape[-1]
    factor = {"hs": hs**-0.5, "none": 1.0, "C": C**-0.5, "no-sqrt": 1.0 / hs}[scale]
    wei = q @ k.transpose(-2, -1) * factor  # (B,T,hs) @ (B,hs,T) -> (B,T,T)
    T = x.shape[1]
    ones = torch.ones(T, T, dtype=torch.float64)
    hidden = {
        "tril": torch.tril(ones) == 0,  # the future
        "triu": torch.triu(ones) == 0,  # triu-mask: the past is hidden
        "polarity": torch.tril(ones) == 1,  # mask-polarity: all but the future is hidden
    }[triangle]
    if causal and not mask_after:
        wei = wei.masked_fill(hidden, fill)
    wei = F.softmax(wei, dim=softmax_dim)
    if causal and mask_after:
        wei = wei.masked_fill(hidden, 0.0)
    return wei


def head_output(c: dict[str, Any], aggregate: str = "v", **kw: Any) -> torch.Tensor:
    """weights @ value(x) (aggregate='v'), weights @ x ('x') or x @ weights ('x-at-wei')."""
    wei = weights(c, **kw)
    x = c["x"].double()
    if aggregate == "v":
        return wei @ (x @ c["value"].double().T)  # (B,T,T) @ (B,T,hs) -> (B,T,hs)
    if aggregate == "x":
        return wei @ x  # (B,T,T) @ (B,T,C) -> (B,T,C)
    return x @ wei  # wrong order: (B,T,C) @ (B,T,T), runs only when C == T


def _peek_case() -> dict[str, Any]:
    g = torch.Generator().manual_seed(606)
    vocab = 16
    return {
        "tokens": torch.randint(0, vocab, (20_000,), generator=g),
        "vocab": vocab,
        "block_size": 8,
        "n_embd": 32,
        "head_size": 16,
        "steps": 300,
        "batch_size": 32,
        "eval_batch": 256,
        "lr": 1e-2,
        "seed": 0,
    }


def _variant_table(
    cases: dict[str, dict[str, Any]], variants: dict[str, Callable[[dict[str, Any]], Any]]
) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for mistake, wrong in variants.items():
        outputs = {}
        for key, c in cases.items():
            try:
                outputs[key] = wrong(c)
            except Exception:  # a wrong variant may not run on every size
                continue
        table[mistake] = outputs
    return table


def _group_check(
    scorer: Scorer,
    name: str,
    points: float,
    keys: list[str],
    observed: dict[str, Any],
    expected: dict[str, Any],
) -> bool:
    bad = [k for k in keys if not close(observed.get(k), expected[k])]
    detail = f"on case {bad[0]}: {why_not(observed, bad[0], expected[bad[0]])}" if bad else ""
    return scorer.check(name, points, not bad, detail)


# ---- capture-attention ---------------------------------------------------------------------


class CaptureAttention(CellSpec):
    notebook = NOTEBOOK
    grade_id = "capture-attention"
    probe_module, probe_function = "nb06", "probe_capture_attention"
    names = ("capture_attention",)
    points = 5.0

    def cases(self) -> dict[str, Any]:
        heads = _head_cases(61)
        unmasked = dict(_head_cases(62)[MAIN])
        unmasked["causal"] = False
        heads["unmasked"] = unmasked
        return {"heads": heads}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        heads = cases["heads"]
        expected = {k: weights(c, causal=c.get("causal", True)) for k, c in heads.items()}
        ok = _group_check(
            scorer,
            "returns the head's own (B,T,T) weights, (B,T,C,hs) = (3,5,7,4)",
            1.0,
            [MAIN],
            observed,
            expected,
        )
        ok &= _group_check(
            scorer, "other sizes: B == T, T = 1, T == block_size", 1.0, OTHERS, observed, expected
        )
        causal_ok, detail = True, ""
        for key in SIZES:
            wei = observed.get(key)
            if not isinstance(wei, np.ndarray) or wei.ndim != 3 or wei.shape[1] != wei.shape[2]:
                causal_ok, detail = False, f"on case {key}: not a (B,T,T) tensor"
                break
            upper = np.triu(np.ones(wei.shape[1:], dtype=bool), 1)
            if np.abs(wei[:, upper]).max(initial=0.0) > 1e-6:
                causal_ok, detail = False, f"on case {key}: weights above the diagonal (future)"
                break
            if not np.allclose(wei.sum(-1), 1.0, atol=1e-4):
                causal_ok, detail = False, f"on case {key}: rows do not sum to one"
                break
        ok &= scorer.check(
            "causal weights: nothing above the diagonal, rows sum to one", 1.0, causal_ok, detail
        )
        ok &= _group_check(
            scorer,
            "captures what the head really computed (tried on a head without the mask)",
            1.0,
            ["unmasked"],
            observed,
            expected,
        )
        left = [k for k in heads if observed.get(k + ":hooks", 1) != 0]
        edited = [k for k in heads if observed.get(k + ":class") is not True]
        outputs = {k: head_output(c, causal=c.get("causal", True)) for k, c in heads.items()}
        changed = [k for k in heads if not close(observed.get(k + ":out"), outputs[k])]
        failed = [k for k in heads if k not in observed]
        detail = ""
        if failed:
            detail = f"the call did not return on case {failed[0]}: " + why_not(
                observed, failed[0], expected[failed[0]]
            )
        elif left:
            detail = "a hook is still attached after the call: keep its handle and .remove() it"
        elif edited:
            detail = "the Head class was changed: capture the weights without editing it"
        elif changed:
            detail = "the head computes something else after the call"
        scorer.check(
            "leaves the head as it was: no hook left behind, class and output unchanged",
            1.0,
            not (failed or left or edited or changed),
            detail,
        )
        return scorer.result


# ---- unmasked-head ---------------------------------------------------------------------------

_UNMASKED_VARIANTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "no-scale": lambda c: head_output(c, causal=False, scale="none"),
    "scale-by-C": lambda c: head_output(c, causal=False, scale="C"),
    "scale-no-sqrt": lambda c: head_output(c, causal=False, scale="no-sqrt"),
    "softmax-dim": lambda c: head_output(c, causal=False, softmax_dim=-2),
    "aggregate-x": lambda c: head_output(c, aggregate="x", causal=False),
}


class UnmaskedHeadSpec(CellSpec):
    notebook = NOTEBOOK
    grade_id = "unmasked-head"
    probe_module, probe_function = "nb06", "probe_unmasked_head"
    names = ("UnmaskedHead",)
    points = 5.0

    def cases(self) -> dict[str, Any]:
        return {"heads": _head_cases(63), "peek": _peek_case()}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        heads = cases["heads"]
        expected = {k: head_output(c, causal=False) for k, c in heads.items()}
        ok = _group_check(
            scorer,
            "output equals the unmasked head's for the same weights, (B,T,C,hs) = (3,5,7,4)",
            1.0,
            [MAIN],
            observed,
            expected,
        )
        ok &= _group_check(
            scorer, "other sizes: B == T, T = 1, T == block_size", 1.0, OTHERS, observed, expected
        )
        detail = ""
        for key, c in heads.items():
            wei = observed.get(key + ":wei")
            ref = weights(c, causal=False)
            if not close(wei, ref):
                detail = f"on case {key}: the weights reaching self.dropout " + (
                    "were not found (keep dropout on the weights)" if wei is None else "differ"
                )
                break
            T = wei.shape[-1]
            if T > 1 and np.abs(wei[:, np.triu(np.ones((T, T), dtype=bool), 1)]).min() <= 0:
                detail = f"on case {key}: the strict upper triangle still has zeros: still masked"
                break
        ok &= scorer.check(
            "the weights see the future: nonzero above the diagonal, rows sum to one",
            1.0,
            not detail,
            detail,
        )
        peek = observed.get("peek")
        log_v = math.log(cases["peek"]["vocab"])
        if isinstance(peek, dict) and {"teacher", "causal"} <= set(peek):
            teacher, causal = float(peek["teacher"]), float(peek["causal"])
            peeks = teacher < 0.5 * log_v and causal > teacher + 1.5
            detail = (
                f"trained on random tokens (ln V = {log_v:.2f}): teacher-forced loss "
                f"{teacher:.2f}, causal loss {causal:.2f}; a head that sees the future gets "
                "the first far below ln V and the second far above it"
            )
        else:
            peeks, detail = (
                False,
                "could not train a model with it: " + why_not(observed, "peek", 0.0),
            )
        ok &= scorer.check(
            "trained: it reads the next token (teacher-forced loss far below its causal loss)",
            2.0,
            peeks,
            detail,
        )
        if not ok:
            table = _variant_table(heads, _UNMASKED_VARIANTS)
            scorer.name(*match_mistakes(observed, table))
        return scorer.result


# ---- value-ablation ----------------------------------------------------------------------------

_NO_VALUE_VARIANTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "v-at-wei": lambda c: head_output(c, aggregate="x-at-wei"),
    "softmax-dim": lambda c: head_output(c, aggregate="x", softmax_dim=-2),
    "no-scale": lambda c: head_output(c, aggregate="x", scale="none"),
    "scale-by-C": lambda c: head_output(c, aggregate="x", scale="C"),
    "scale-no-sqrt": lambda c: head_output(c, aggregate="x", scale="no-sqrt"),
    "fill-zero": lambda c: head_output(c, aggregate="x", fill=0.0),
    "mask-after-softmax": lambda c: head_output(c, aggregate="x", mask_after=True),
    "triu-mask": lambda c: head_output(c, aggregate="x", triangle="triu"),
    "mask-polarity": lambda c: head_output(c, aggregate="x", triangle="polarity"),
}


class NoValueHeadSpec(CellSpec):
    notebook = NOTEBOOK
    grade_id = "value-ablation"
    probe_module, probe_function = "nb06", "probe_value_ablation"
    names = ("NoValueHead",)
    points = 4.0

    def cases(self) -> dict[str, Any]:
        g = torch.Generator().manual_seed(64)
        return {"heads": _head_cases(64), "idx": torch.randint(0, 11, (3, 5), generator=g)}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        heads = cases["heads"]
        expected = {k: head_output(c, aggregate="x") for k, c in heads.items()}
        ok = _group_check(
            scorer,
            "output equals weights @ x for the same key and query, (B,T,C,hs) = (3,5,7,4)",
            1.0,
            [MAIN],
            observed,
            expected,
        )
        ok &= _group_check(
            scorer, "other sizes: B == T, T = 1, T == block_size", 1.0, OTHERS, observed, expected
        )
        detail = ""
        for key, c in heads.items():
            params = observed.get(key + ":params")
            hs, C = c["key"].shape
            if not isinstance(params, dict):
                detail = f"on case {key}: could not build it: {why_not(observed, key, 0)}"
                break
            extra = {n: s for n, s in params.items() if not n.startswith(("key.", "query."))}
            if extra or sum(math.prod(s) for s in params.values()) != 2 * C * hs:
                names = ", ".join(extra) or ", ".join(params)
                detail = (
                    f"expected only key and query (2 x C x hs = {2 * C * hs} weights), "
                    f"found {names}"
                )
                break
        ok &= scorer.check(
            "no value projection: only key and query, 2 x C x hs parameters",
            1.0,
            not detail,
            detail,
        )
        shapes_ok = observed.get("model") == [3, 5, 11]
        detail = ""
        if not shapes_ok:
            detail = "inside CharModel(..., residual=True) x + head(x) failed: " + why_not(
                observed, "model", np.zeros((3, 5, 11))
            )
        ok &= scorer.check(
            "n_embd wide, so x + head(x) works in a residual model", 1.0, shapes_ok, detail
        )
        if not ok:
            table = _variant_table(heads, _NO_VALUE_VARIANTS)
            found = match_mistakes(observed, table)
            cropped_fail = all(k + "!" in observed for k in CROPPED)
            if cropped_fail and close(
                observed.get("T_eq_block_C_eq_T"), expected["T_eq_block_C_eq_T"]
            ):
                found.append("tril-not-cropped")
            scorer.name(*found)
        return scorer.result


SPECS = [CaptureAttention(), UnmaskedHeadSpec(), NoValueHeadSpec()]
