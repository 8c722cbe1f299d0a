"""Checks of notebook 04, value aggregation: the lecture's version-4 cell as a function."""

from __future__ import annotations

from typing import Any

import torch

from autograder.checks import reference
from autograder.checks.base import CellResult, FunctionSpec, Scorer, close
from autograder.checks.evidence import (
    as_array,
    changed,
    first_recovered,
    logits_for,
    mixes_batch,
    numpy64,
    projections,
)
from autograder.checks.nb02 import LECTURE_SIZES, add_mix_case, head_inputs
from autograder.checks.properties import Evidence, fitted_scale

NOTEBOOK = "04_value_aggregation.ipynb"


class Attend(FunctionSpec):
    notebook = NOTEBOOK
    grade_id = "attend"
    names = ("attend",)
    function = "attend"
    probe_module, probe_function = "nb04", "probe_attend"
    points = 5.0
    seed = 404
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
    # cases the weights are recovered from: hs, C >= T; then hs == T (where v @ wei runs)
    recover_from = ("B3_T5_C12_hs7", "B3_T6_C11_hs6")
    mix_case = "B4_T4_C9_hs4"
    cut = 3  # tokens from here on are changed in the causality case

    def make_cases(self) -> dict[str, Any]:
        return head_inputs(self.sizes, seed=self.seed, n_proj=3, gain=0.6)

    def call_args(self, case: dict[str, Any]) -> tuple:
        return (case["x"], case)

    def cases(self) -> dict[str, Any]:
        cases = super().cases()
        x = cases["args"][self.main]["x"]
        g = torch.Generator().manual_seed(self.seed + 1)
        later = x.clone()
        later[:, self.cut :] = 3.0 * torch.randn(later[:, self.cut :].shape, generator=g)
        cases["future"] = later  # the same first tokens, a different future
        cases["main"] = self.main
        add_mix_case(cases, self.mix_case, self.seed + 2)
        return cases

    def reference(self, x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
        return reference.attention(x, w, reference.NB04)  # version 4: no scale yet

    def extra_checks(self, scorer: Scorer, cases: dict[str, Any], observed: dict[str, Any]) -> bool:
        case = cases["args"][self.main]
        x = case["x"]
        v0 = numpy64(reference.project(x, case, "value", False))[:, 0]  # (B,hs)
        out = as_array(observed.get(self.main))
        shaped = out is not None and out.ndim == 3 and out.shape[:2] == x.shape[:2]
        first = shaped and close(out[:, 0], v0)
        later = as_array(observed.get("future:" + self.main))
        causal = (
            shaped
            and later is not None
            and later.shape == out.shape
            and close(later[:, : self.cut], out[:, : self.cut])
        )
        flipped = as_array(observed.get("flip:" + self.main))
        odd = changed(None if flipped is None else -flipped, out) is False
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
            odd,
            "Without biases, flipping the sign of x flips v and leaves the weights alone, so "
            "the output must flip sign too; yours did not (or did not run).",
        )
        return ok

    def evidence(self, cases: dict[str, Any], observed: dict[str, Any]) -> Evidence:
        main = cases["args"][self.main]
        ev = Evidence(reference.NB04, head_size=main["key"].shape[0], n_embd=main["x"].shape[-1])
        outs, values, logits = [], [], []
        for key in self.recover_from:
            case = cases["args"][key]
            p = projections(case["x"], case)
            outs.append(observed.get(key))
            values.append({"v": p["v"], "x": case["x"].double().numpy()})
            logits.append(logits_for(case["x"], case))
        first_recovered(ev, outs, values, logits)
        flipped = as_array(observed.get("flip:" + self.main))
        ev.affine = changed(None if flipped is None else -flipped, observed.get(self.main))
        ev.mixes_batch = mixes_batch(observed, self.mix_case)
        return ev

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        result = super().judge(cases, observed)
        if result.score < result.max_score:
            ev = self.evidence(cases, observed)
            if ev.weights is not None and fitted_scale(ev) == reference.Scale.HEAD:
                result.checks[0].detail += (
                    " Your output is scaled by head_size ** -0.5: version 4 has no scale yet "
                    "(it arrives in notebook 05)."
                )
        return result


SPECS = [Attend()]
