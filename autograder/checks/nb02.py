"""Checks of notebook 02, queries and keys: the shape table, the parameter count, the scores."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from autograder.checks.base import CellResult, CellSpec, FunctionSpec, Scorer, close
from autograder.checks.diagnostics import Variant, diagnose_variants

NOTEBOOK = "02_queries_and_keys.ipynb"
LECTURE_SIZES = (4, 8, 32, 16)  # B, T, C, head_size of the lecture's toy

# ---- shared by the checks of notebooks 02-04 ---------------------------------------------


PROJECTION_NAMES = ("key", "query", "value")


def projection_weight(C: int, hs: int, g: torch.Generator) -> torch.Tensor:
    """The (hs, C) weight of a bias-free projection: scores of order one, never exactly tied."""
    return torch.randn(hs, C, generator=g) * C**-0.5


def head_inputs(sizes: dict[str, tuple[int, int, int, int]], seed: int, n_proj: int) -> dict:
    """case key -> {"x", "key", "query"[, "value"]} (weights as tensors) for each (B, T, C, hs)."""
    g = torch.Generator().manual_seed(seed)
    cases = {}
    for name, (B, T, C, hs) in sizes.items():
        case = {"x": torch.randn(B, T, C, generator=g)}
        for proj in PROJECTION_NAMES[:n_proj]:
            case[proj] = projection_weight(C, hs, g)
        cases[name] = case
    return cases


def modules_of(case: dict[str, Any]) -> tuple:
    """(x, key, query[, value]) with the projections as nn.Linear, as the probe calls them."""
    from autograder.probe.modules import linear

    names = [n for n in PROJECTION_NAMES if n in case]
    return (case["x"], *(linear(case[n]) for n in names))


def sign_symmetric(observed: dict[str, Any], key: str, sign: float) -> bool | None:
    """Is the output for -x equal to `sign` times the output for x? None when unobserved.

    Bias-free projections make the scores even in x (sign +1) and a head's output odd (-1);
    a bias adds terms that break the symmetry.
    """
    a, b = observed.get(key), observed.get("flip:" + key)
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
        return None
    if not (np.issubdtype(a.dtype, np.number) and np.issubdtype(b.dtype, np.number)):
        return None
    return close(b, sign * a.astype(np.float64))


# ---- references and wrong variants of the scores -----------------------------------------


def scores(x: torch.Tensor, key: nn.Module, query: nn.Module) -> torch.Tensor:
    """Reference: raw affinities q @ k^T, (B,T,C) -> (B,T,T)."""
    with torch.no_grad():
        return query(x) @ key(x).transpose(-2, -1)  # (B,T,hs) @ (B,hs,T) -> (B,T,T)


def batch_transpose(x, key, query):
    """transpose-batch: q @ k.transpose(0, 1); runs only when B == T == hs."""
    return query(x) @ key(x).transpose(0, 1)


def reversed_transpose(x, key, query):
    """transpose-batch: q @ k.T, which reverses all three axes of k."""
    return query(x) @ key(x).permute(2, 1, 0)


def batch_then_last(x, key, query):
    """transpose-batch: q @ k.transpose(0, 1).transpose(-2, -1); silent whenever B == T."""
    return query(x) @ key(x).transpose(0, 1).transpose(-2, -1)


def keys_on_left(x, key, query):
    """swapped-qk: k @ q^T, the transpose of the scores."""
    return key(x) @ query(x).transpose(-2, -1)


def query_twice(x, key, query):
    """tied-qk: the query projection for both sides."""
    q = query(x)
    return q @ q.transpose(-2, -1)


def key_twice(x, key, query):
    """tied-qk: the key projection for both sides."""
    k = key(x)
    return k @ k.transpose(-2, -1)


SCORE_VARIANTS: list[Variant] = [
    ("transpose-batch", batch_transpose),
    ("transpose-batch", reversed_transpose),
    ("transpose-batch", batch_then_last),
    ("swapped-qk", keys_on_left),
    ("tied-qk", query_twice),
    ("tied-qk", key_twice),
]


def reference_shapes(B: int, T: int, C: int, hs: int) -> dict[str, tuple[int, ...]]:
    """The eight steps of the version-4 cell, run on meta tensors of the given sizes."""
    x = torch.empty(B, T, C, device="meta")
    key, query, value = (nn.Linear(C, hs, bias=False, device="meta") for _ in range(3))
    with torch.no_grad():
        k, q = key(x), query(x)  # (B,T,hs)
        k_T = k.transpose(-2, -1)  # (B,hs,T)
        wei = q @ k_T  # (B,T,T)
        tril = torch.tril(torch.ones(T, T, device="meta"))
        masked = wei.masked_fill(tril == 0, float("-inf"))  # (B,T,T)
        weights = torch.softmax(masked, dim=-1)  # (B,T,T)
        v = value(x)  # (B,T,hs)
        out = weights @ v  # (B,T,hs)
    steps = {"k": k, "q": q, "k_T": k_T, "scores": wei, "masked": masked}
    steps |= {"weights": weights, "v": v, "out": out}
    return {name: tuple(t.shape) for name, t in steps.items()}


def head_parameters(C: int, hs: int, bias: bool = False) -> int:
    """Parameters of one head's key, query and value projections."""
    layers = [nn.Linear(C, hs, bias=bias, device="meta") for _ in range(3)]
    return sum(p.numel() for layer in layers for p in layer.parameters())


def _as_int(value: Any) -> int | None:
    """An integral number as int (1536, 1536.0, a 0-d array); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, np.ndarray) and value.size == 1 and np.issubdtype(value.dtype, np.number):
        value = value.item()
    if isinstance(value, (int, float)) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    return None


def _as_shape(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    dims = [_as_int(v) for v in value]
    return None if any(d is None for d in dims) else tuple(dims)


# ---- the specs ---------------------------------------------------------------------------


class ShapeTable(CellSpec):
    notebook = NOTEBOOK
    grade_id = "shape-table"
    names = ("SHAPES",)
    points = 4.0
    groups = [
        ("k, q and v are (B, T, head_size)", 1.0, ["k", "q", "v"]),
        ("k_T swaps the last two axes of k", 1.0, ["k_T"]),
        (
            "scores, masked and weights hold one (T, T) matrix per sequence",
            1.0,
            ["scores", "masked", "weights"],
        ),
        ("out is (B, T, head_size)", 1.0, ["out"]),
    ]

    probe_module, probe_function = "values", "probe_values"

    def cases(self) -> dict[str, Any]:
        return {"sizes": LECTURE_SIZES, "names": list(self.names)}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        table = observed.get("SHAPES")
        if not isinstance(table, dict):
            problem = "SHAPES must be a dict from step name to shape, e.g. {'k': (4, 8, 16), ...}"
            if "SHAPES!" in observed:
                problem += f" ({observed['SHAPES!']})"
            return scorer.fail_all([(n, p) for n, p, _ in self.groups], problem)
        B, T, C, hs = cases["sizes"]
        expected = reference_shapes(B, T, C, hs)
        for name, points, keys in self.groups:
            bad = [k for k in keys if _as_shape(table.get(k)) != expected[k]]
            detail = ""
            if bad and bad[0] not in table:
                detail = f"SHAPES has no entry {bad[0]!r}."
            elif bad:
                got = _as_shape(table[bad[0]]) or table[bad[0]]
                detail = f"SHAPES[{bad[0]!r}] is {got}: not the shape of that step for B,T,C,hs = "
                detail += f"{B},{T},{C},{hs} (write each shape as a tuple of ints)."
            scorer.check(name, points, not bad, detail)
        k_T = _as_shape(table.get("k_T"))
        if k_T in {(T, B, hs), (hs, T, B)}:
            scorer.name("transpose-batch")
        if _as_shape(table.get("out")) == (B, T, C):
            scorer.name("aggregate-x")
        return scorer.result


class ParamCount(CellSpec):
    notebook = NOTEBOOK
    grade_id = "param-count"
    names = ("N_PARAMS",)
    points = 1.0
    check_name = "N_PARAMS counts the weights of key, query and value for C = 32, head_size = 16"

    probe_module, probe_function = "values", "probe_values"

    def cases(self) -> dict[str, Any]:
        return {"C": 32, "hs": 16, "names": list(self.names)}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        C, hs = cases["C"], cases["hs"]
        value = _as_int(observed.get("N_PARAMS"))
        expected = head_parameters(C, hs)
        detail = ""
        if value is None:
            detail = f"N_PARAMS is {observed.get('N_PARAMS', 'missing')!r}: it must be a number."
        elif value == head_parameters(C, hs, bias=True):
            scorer.name("bias")
        elif value != expected:
            detail = f"N_PARAMS = {value:,}: count the entries of each weight matrix, then add."
            if value == 2 * expected // 3:
                detail += " A head has three projections: key, query and value."
        scorer.check(self.check_name, self.points, value == expected, detail)
        return scorer.result


class Affinities(FunctionSpec):
    notebook = NOTEBOOK
    grade_id = "affinities"
    names = ("affinities",)
    function = "affinities"
    points = 3.0
    sizes = {
        "B3_T5_C12_hs7": (3, 5, 12, 7),
        "B6_T6_C10_hs5": (6, 6, 10, 5),  # B == T: transpose(0, 1) keeps the shape
        "B4_T4_C9_hs4": (4, 4, 9, 4),  # B == T == hs: even k.T runs
        "T1": (2, 1, 9, 5),
        "lecture": LECTURE_SIZES,
    }
    groups = [
        ("q @ k^T for (B,T,C,hs) = (3,5,12,7)", 1.0, ["B3_T5_C12_hs7"]),
        (
            "other sizes: B == T, B == T == hs, T = 1, the lecture's (4,8,32,16)",
            1.0,
            ["B6_T6_C10_hs5", "B4_T4_C9_hs4", "T1", "lecture"],
        ),
    ]
    flip_case = "B3_T5_C12_hs7"

    probe_module, probe_function = "nb02", "probe_affinities"

    def make_cases(self) -> dict[str, Any]:
        return head_inputs(self.sizes, seed=202, n_proj=2)

    def cases(self) -> dict[str, Any]:
        return {"args": self.make_cases(), "flip": self.flip_case}

    def call_args(self, case: dict[str, Any]) -> tuple:
        return modules_of(case)

    def reference(self, x, key, query):
        return scores(x, key, query)

    def extra_checks(self, scorer: Scorer, cases: dict[str, Any], observed: dict[str, Any]) -> bool:
        even = sign_symmetric(observed, self.flip_case, 1.0)
        if even is False:
            scorer.name("bias")
        return scorer.check(
            "no bias: the scores of -x equal those of x",
            1.0,
            bool(even),
            "Scores from bias-free projections are a product of two linear maps of x, so "
            "flipping the sign of x must leave them unchanged; yours changed (or did not run).",
        )

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        result = super().judge(cases, observed)
        value = observed.get(self.flip_case)
        if isinstance(value, np.ndarray) and value.size and not result.checks[0].passed:
            if np.isneginf(value).any() or np.allclose(np.nan_to_num(value).sum(-1), 1):
                result.checks[
                    0
                ].detail += (
                    " Your output looks masked or softmaxed: affinities returns the raw scores."
                )
        return result

    def diagnose(self, args: dict[str, tuple], observed: dict[str, Any]) -> list[str]:
        return diagnose_variants(SCORE_VARIANTS, args, observed, self.dtype)


SPECS = [ShapeTable(), ParamCount(), Affinities()]
