"""Checks of notebook 01, uniform averaging: three ways to average the past.

Each average is a linear map of x along time, out = W @ x with a (T,T) matrix W that does
not depend on x. The probe feeds the identity as x (C = T), so that the output is W itself:
the properties of the catalog mistakes read it, however the answer was written.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks import reference
from autograder.checks.base import FunctionSpec
from autograder.checks.evidence import as_array
from autograder.checks.properties import Evidence

NOTEBOOK = "01_uniform_averaging.ipynb"
BASIS_T = 6  # the identity fed in: T = C = 6

SIZES: dict[str, tuple[int, int, int]] = {
    "B3_T5_C7": (3, 5, 7),
    "B4_T4_C2": (4, 4, 2),
    "T1": (2, 1, 3),
    "B1_T9_C32": (1, 9, 32),
}


def inputs(sizes: dict[str, tuple[int, int, int]], seed: int = 2024) -> dict[str, tuple]:
    """case key -> (x,), plus the basis: x = the (T,T) identity, one sequence."""
    g = torch.Generator().manual_seed(seed)
    args = {k: (torch.randn(*s, generator=g),) for k, s in sizes.items()}
    args["basis"] = (torch.eye(BASIS_T).unsqueeze(0),)  # (1,T,T)
    return args


class _Average(FunctionSpec):
    notebook = NOTEBOOK
    probe_module = "nb01"
    points = 3.0
    sizes = SIZES
    seed = 2024
    groups = [
        ("equals the running mean of the past, (B,T,C) = (3,5,7)", 1.0, ["B3_T5_C7"]),
        ("works for other sizes, B == T and T = 1 included", 1.0, ["B4_T4_C2", "T1", "B1_T9_C32"]),
    ]
    main = "B3_T5_C7"

    def make_cases(self) -> dict[str, tuple]:
        return inputs(self.sizes, self.seed)

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        return reference.average(x)

    def extra_checks(self, scorer: Any, cases: dict[str, Any], observed: dict[str, Any]) -> bool:
        (x,) = cases["args"][self.main]
        value = as_array(observed.get(self.main))
        ok = value is not None and value.shape == tuple(x.shape)
        ok = ok and bool(np.abs(value[:, 0] - x[:, 0].double().numpy()).max() < 1e-5)
        return scorer.check(
            "position 0 equals x[:, 0] (a token's past is itself)",
            1.0,
            ok,
            "out[:, 0] should be x[:, 0]: the only token position 0 can see is itself.",
        )

    def evidence(self, cases: dict[str, Any], observed: dict[str, Any]) -> Evidence:
        """The matrix W the answer applies along time: its output for the identity."""
        out = as_array(observed.get("basis"))
        W = out if out is not None and out.shape == (1, BASIS_T, BASIS_T) else None
        return Evidence(reference.AVERAGE, weights=W)


class AverageLoop(_Average):
    grade_id = "average-loop"
    names = ("average_loop",)
    function = "average_loop"
    probe_function = "probe_average_loop"


class AverageMatmul(_Average):
    grade_id = "average-matmul"
    names = ("average_matmul",)
    function = "average_matmul"
    probe_function = "probe_average_matmul"


class AverageSoftmax(_Average):
    grade_id = "average-softmax"
    names = ("average_softmax",)
    function = "average_softmax"
    probe_function = "probe_average_softmax"


SPECS = [AverageLoop(), AverageMatmul(), AverageSoftmax()]
