"""Checks of notebook 03, mask then softmax: causal weights and the count of what survives."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks import reference
from autograder.checks.base import CellResult, CellSpec, FunctionSpec, Scorer, name_mistakes
from autograder.checks.evidence import as_array
from autograder.checks.nb02 import as_int
from autograder.checks.properties import Evidence

NOTEBOOK = "03_mask_then_softmax.ipynb"
DIAG = "diag"  # unit scores, B = 3, T = 6: every weight well above zero unless masked


def nonzero_count(T: int) -> int:
    """Nonzero entries of the reference weights of one (T,T) matrix of random scores."""
    g = torch.Generator().manual_seed(T)
    scores = torch.randn(T, T, generator=g, dtype=torch.float64)
    return int(torch.count_nonzero(reference.weights(scores, reference.NB04, 1, 1)))


class MaskThenSoftmax(FunctionSpec):
    notebook = NOTEBOOK
    grade_id = "mask-then-softmax"
    names = ("mask_then_softmax",)
    function = "mask_then_softmax"
    probe_module, probe_function = "nb03", "probe_mask_then_softmax"
    points = 5.0
    seed = 303
    size_attr = "shapes"
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
        g = torch.Generator().manual_seed(self.seed)
        args = {k: (2.0 * torch.randn(*s, generator=g),) for k, s in self.shapes.items()}
        args[DIAG] = (torch.randn(3, 6, 6, generator=g),)
        return args

    def cases(self) -> dict[str, Any]:
        cases = super().cases()
        (scores,) = cases["args"][self.main]
        g = torch.Generator().manual_seed(self.seed + 1)
        other = 5.0 * torch.randn(scores.shape, generator=g)
        future = ~reference.visible(scores.shape[-1], "causal")
        cases["future"] = torch.where(future, other, scores)  # same past, different future
        cases["main"] = self.main
        return cases

    def reference(self, scores: torch.Tensor) -> torch.Tensor:
        return reference.weights(scores.double(), reference.NB04, head_size=1, n_embd=1)

    def extra_checks(self, scorer: Scorer, cases: dict[str, Any], observed: dict[str, Any]) -> bool:
        keys = [k for k in ("B3_T5", "B4_T4", "T6_2d") if k in cases["args"]]
        outs = [as_array(observed.get(k)) for k in keys]
        shaped = all(
            o is not None and o.shape == cases["args"][k][0].shape and o.size
            for o, k in zip(outs, keys, strict=True)
        )
        sums_one = shaped and all(np.allclose(o.sum(-1), 1.0, atol=1e-4) for o in outs)
        upper_zero = shaped and all(
            bool(np.all(np.triu(o, k=1) == 0)) and not np.isnan(o).any() for o in outs
        )
        a, b = as_array(observed.get(self.main)), as_array(observed.get("future:" + self.main))
        blind = (
            a is not None
            and b is not None
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

    def evidence(self, cases: dict[str, Any], observed: dict[str, Any]) -> Evidence:
        (scores,) = cases["args"][DIAG]
        W = as_array(observed.get(DIAG))
        ev = Evidence(reference.NB04, head_size=1, n_embd=1)
        if W is not None and W.shape == tuple(scores.shape):
            ev.weights, ev.logits = W, {"q@k": scores.double().numpy()}
        return ev


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
        value = as_int(observed.get("NONZERO"))
        scorer.check(
            f"NONZERO is the number of nonzero weights of one ({T},{T}) matrix",
            1.0,
            value == nonzero_count(T),
            f"NONZERO is {observed.get('NONZERO', 'missing')!r}: count the nonzero entries of "
            f"one batch element's weights, e.g. torch.count_nonzero(wei[0]).",
        )
        counts = {size: as_int(observed.get(f"n_visible({size})")) for size in cases["sizes"]}
        wrong = [(size, got) for size, got in counts.items() if got != nonzero_count(size)]
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
        # the counts that are every entry of the matrix: nothing masked (NONZERO first)
        full = {size: n for size, n in counts.items() if n == size * size and size > 1}
        if value == T * T:
            full[T] = value
        name_mistakes(scorer, Evidence(reference.NB04, counts=full or None))
        return scorer.result


SPECS = [MaskThenSoftmax(), NonzeroCount()]
