"""Checks of notebook 02, queries and keys: the shape table, the parameter count, the scores."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from autograder.checks import reference
from autograder.checks.base import CellResult, CellSpec, FunctionSpec, Scorer, name_mistakes
from autograder.checks.evidence import as_array, changed, logits_for, mixed_input, mixes_batch
from autograder.checks.properties import Evidence

NOTEBOOK = "02_queries_and_keys.ipynb"
LECTURE_SIZES = (4, 8, 32, 16)  # B, T, C, head_size of the lecture's toy
PROJECTION_NAMES = ("key", "query", "value")

# ---- shared by the checks of notebooks 02-04 ---------------------------------------------


def projection_weight(C: int, hs: int, g: torch.Generator, gain: float = 1.0) -> torch.Tensor:
    """The (hs, C) weight of a bias-free projection: outputs of variance gain**2 for unit x."""
    return torch.randn(hs, C, generator=g) * gain * C**-0.5


def head_inputs(
    sizes: dict[str, tuple[int, int, int, int]], seed: int, n_proj: int, gain: float = 1.0
) -> dict:
    """case key -> {"x", "key", "query"[, "value"]} (weights as tensors) for each (B, T, C, hs)."""
    g = torch.Generator().manual_seed(seed)
    cases = {}
    for name, (B, T, C, hs) in sizes.items():
        case = {"x": torch.randn(B, T, C, generator=g)}
        for proj in PROJECTION_NAMES[:n_proj]:
            case[proj] = projection_weight(C, hs, g, gain)
        cases[name] = case
    return cases


def modules_of(case: dict[str, Any]) -> tuple:
    """(x, key, query[, value]) with the projections as nn.Linear, as the probe calls them."""
    from autograder.probe.modules import linear

    names = [n for n in PROJECTION_NAMES if n in case]
    return (case["x"], *(linear(case[n]) for n in names))


def add_mix_case(cases: dict[str, Any], key: str, seed: int) -> None:
    """cases['mix'] = (case key, its x with every sequence but the first replaced)."""
    g = torch.Generator().manual_seed(seed)
    cases["mix"] = {"key": key, "x": mixed_input(cases["args"][key]["x"], g)}


def scores(x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """Raw affinities q @ k^T from the reference, (B,T,C) -> (B,T,T)."""
    q = reference.project(x, w, "query", False)
    k = reference.project(x, w, "key", False)
    return reference.raw_scores(q, k)


def reference_shapes(B: int, T: int, C: int, hs: int) -> dict[str, tuple[int, ...]]:
    """The eight steps of the version-4 cell, from the reference on zeros of these sizes."""
    x = torch.zeros(B, T, C, dtype=torch.float64)
    w = {n: torch.zeros(hs, C, dtype=torch.float64) for n in PROJECTION_NAMES}
    k, q, v = (reference.project(x, w, n, False) for n in PROJECTION_NAMES)  # (B,T,hs)
    wei = reference.raw_scores(q, k)  # (B,T,T)
    masked = wei.masked_fill(~reference.visible(T, "causal"), reference.NEG_INF)
    weights = reference.weights(wei, reference.NB04, hs, C)  # (B,T,T)
    steps = {"k": k, "q": q, "k_T": k.transpose(-2, -1), "scores": wei, "masked": masked}
    steps |= {"weights": weights, "v": v, "out": reference.attention(x, w, reference.NB04)}
    return {name: tuple(t.shape) for name, t in steps.items()}


def head_parameters(C: int, hs: int, bias: bool = False) -> int:
    """Parameters of one head's key, query and value projections."""
    return 3 * (C * hs + (hs if bias else 0))


def as_int(value: Any) -> int | None:
    """An integral number as int (1536, 1536.0, a 0-d array); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, np.ndarray) and value.size == 1 and np.issubdtype(value.dtype, np.number):
        value = value.item()
    if isinstance(value, (int, float)) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    return None


def as_shape(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    dims = [as_int(v) for v in value]
    return None if any(d is None for d in dims) else tuple(dims)


# ---- the specs ---------------------------------------------------------------------------


class ShapeTable(CellSpec):
    notebook = NOTEBOOK
    grade_id = "shape-table"
    names = ("SHAPES",)
    points = 4.0
    probe_module, probe_function = "values", "probe_values"
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
        shapes = {k: as_shape(v) for k, v in table.items()}
        for name, points, keys in self.groups:
            bad = [k for k in keys if shapes.get(k) != expected[k]]
            detail = ""
            if bad and bad[0] not in table:
                detail = f"SHAPES has no entry {bad[0]!r}."
            elif bad:
                got = shapes[bad[0]] or table[bad[0]]
                detail = f"SHAPES[{bad[0]!r}] is {got}: not the shape of that step for B,T,C,hs = "
                detail += f"{B},{T},{C},{hs} (write each shape as a tuple of ints)."
            scorer.check(name, points, not bad, detail)
        found = {k: v for k, v in shapes.items() if v is not None}
        name_mistakes(scorer, Evidence(reference.NB04, shapes=found, sizes=(B, T, C, hs)))
        return scorer.result


class ParamCount(CellSpec):
    notebook = NOTEBOOK
    grade_id = "param-count"
    names = ("N_PARAMS",)
    points = 1.0
    probe_module, probe_function = "values", "probe_values"
    check_name = "N_PARAMS counts the weights of key, query and value for C = 32, head_size = 16"

    def cases(self) -> dict[str, Any]:
        return {"C": 32, "hs": 16, "names": list(self.names)}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        C, hs = cases["C"], cases["hs"]
        value = as_int(observed.get("N_PARAMS"))
        expected = head_parameters(C, hs)
        detail = ""
        if value is None:
            detail = f"N_PARAMS is {observed.get('N_PARAMS', 'missing')!r}: it must be a number."
        elif value != expected:
            detail = f"N_PARAMS = {value:,}: count the entries of each weight matrix, then add."
            if value == 2 * expected // 3:
                detail += " A head has three projections: key, query and value."
        scorer.check(self.check_name, self.points, value == expected, detail)
        name_mistakes(scorer, Evidence(reference.NB04, n_params=value, sizes=(0, 0, C, hs)))
        return scorer.result


class Affinities(FunctionSpec):
    notebook = NOTEBOOK
    grade_id = "affinities"
    names = ("affinities",)
    function = "affinities"
    probe_module, probe_function = "nb02", "probe_affinities"
    points = 3.0
    seed = 202
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
    mix_case = "B4_T4_C9_hs4"

    def make_cases(self) -> dict[str, Any]:
        return head_inputs(self.sizes, seed=self.seed, n_proj=2)

    def cases(self) -> dict[str, Any]:
        cases = {"args": self.make_cases(), "flip": self.flip_case}
        add_mix_case(cases, self.mix_case, self.seed + 1)
        return cases

    def call_args(self, case: dict[str, Any]) -> tuple:
        return (case["x"], case)

    def reference(self, x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
        return scores(x, w)

    def extra_checks(self, scorer: Scorer, cases: dict[str, Any], observed: dict[str, Any]) -> bool:
        key = self.flip_case
        odd = changed(observed.get(key), observed.get("flip:" + key))
        if scorer.result.checks and not scorer.result.checks[0].passed:
            value = as_array(observed.get(key))
            if (
                value is not None
                and value.size
                and (np.isneginf(value).any() or np.allclose(np.nan_to_num(value).sum(-1), 1))
            ):
                scorer.result.checks[
                    0
                ].detail += (
                    " Your output looks masked or softmaxed: affinities returns the raw scores."
                )
        return scorer.check(
            "no bias: the scores of -x equal those of x",
            1.0,
            odd is False,
            "Scores from bias-free projections are a product of two linear maps of x, so "
            "flipping the sign of x must leave them unchanged; yours changed (or did not run).",
        )

    def evidence(self, cases: dict[str, Any], observed: dict[str, Any]) -> Evidence:
        key = self.flip_case
        case = cases["args"][key]
        ev = Evidence(reference.AFFINITIES, head_size=case["key"].shape[0])
        ev.n_embd = case["x"].shape[-1]
        raw = as_array(observed.get(key))
        if raw is not None and raw.shape == (*case["x"].shape[:2], case["x"].shape[1]):
            ev.scores, ev.logits = raw, logits_for(case["x"], case)
        ev.affine = changed(observed.get(key), observed.get("flip:" + key))
        ev.mixes_batch = mixes_batch(observed, self.mix_case)
        return ev


SPECS = [ShapeTable(), ParamCount(), Affinities()]
