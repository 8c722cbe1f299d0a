"""Turn what a probe recorded into the observations the mistake properties read.

The central step recovers the attention weights an answer applied from its output alone: an
attention output is weights @ values, and with values at least T wide (a case chosen so) the
weights are out @ pinv(values), exactly, whatever code produced them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from autograder.checks.base import why_not
from autograder.checks.properties import Evidence, logit_fit, mask_form, normalised_axes
from autograder.checks.reference import project

RECOVER_RTOL = 1e-3
RECOVER_ATOL = 1e-4


def as_array(value: Any) -> np.ndarray | None:
    """A numeric numpy array in float64, or None."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.astype(np.float64)
    return None


def numpy64(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().cpu().numpy()


def projections(x: torch.Tensor, w: dict[str, Any], bias: bool = False) -> dict[str, np.ndarray]:
    """q, k and v (those the weights dict holds), float64, each (B,T,hs)."""
    return {n[0]: numpy64(project(x, w, n, bias)) for n in ("key", "query", "value") if n in w}


def logits_for(x: torch.Tensor, w: dict[str, Any], bias: bool = False) -> dict[str, np.ndarray]:
    """Every score form an answer might have used, for input x: q@k (right) and the mix-ups."""
    p = projections(x, w, bias)

    def mm(a: str, b: str) -> np.ndarray:
        return p[a] @ np.swapaxes(p[b], -1, -2)  # (B,T,hs) @ (B,hs,T) -> (B,T,T)

    forms = {"q@k": ("q", "k"), "k@q": ("k", "q"), "q@q": ("q", "q"), "k@k": ("k", "k")}
    forms["v@v"] = ("v", "v")
    return {name: mm(a, b) for name, (a, b) in forms.items() if a in p and b in p}


@dataclass(frozen=True)
class Recovered:
    aggregate: str  # which values were aggregated
    product: str  # "wei@v" or "v@wei"
    weights: np.ndarray  # (N,T,T)


def _explains(out: np.ndarray, product: np.ndarray) -> bool:
    scale = max(1.0, float(np.nanmax(np.abs(out))) if np.isfinite(out).any() else 1.0)
    return bool(
        np.allclose(product, out, rtol=RECOVER_RTOL, atol=RECOVER_ATOL * scale, equal_nan=True)
    )


def _looks_like_weights(M: np.ndarray) -> bool:
    finite = M[np.isfinite(M)]
    if not finite.size or finite.min() < -1e-4:
        return False
    return bool(normalised_axes(M)) or mask_form(M) is not None


def recover(out: Any, values: dict[str, np.ndarray]) -> Recovered | None:
    """The weights M with out = M @ values (or values @ M), for the first values that explain
    the output. Left products need values at least T wide; right ones need them T wide."""
    out = as_array(out)
    if out is None or out.ndim != 3:
        return None
    T = out.shape[1]
    for name, V in values.items():
        if V.shape[:2] != out.shape[:2]:
            continue
        options = []
        if V.shape[-1] >= T and out.shape[-1] == V.shape[-1]:
            left = np.nan_to_num(out) @ np.linalg.pinv(V)
            left = np.where(np.isnan(out).any(-1, keepdims=True), np.nan, left)
            if _explains(out, left @ V):
                options.append(Recovered(name, "wei@v", left))
        if V.shape[-1] == T and out.shape == V.shape and np.isfinite(out).all():
            right = np.linalg.pinv(V) @ out
            if _explains(out, V @ right):
                options.append(Recovered(name, "v@wei", right))
        plausible = [o for o in options if _looks_like_weights(o.weights)]
        if plausible or options:
            return (plausible or options)[0]
    return None


def add_weights(ev: Evidence, out: Any, values: dict[str, np.ndarray]) -> bool:
    """Recover the weights behind `out` into `ev` (weights, aggregate, product)."""
    found = recover(out, values)
    if found is None:
        return False
    ev.weights, ev.aggregate, ev.product = found.weights, found.aggregate, found.product
    ev.source = (as_array(out), values)  # what `properties.confirmed` replays
    causal = ev.expected.mask == "causal"
    if found.product == "wei@v" and causal and mask_form(ev.weights) == "upper":
        # weights^T @ values: the transpose of a causal matrix, its logits those of k @ q^T
        fit = logit_fit(ev)
        if fit is not None and fit.form == "k@q":
            ev.weights, ev.product = np.swapaxes(found.weights, -1, -2), "v@wei"
    return True


def first_recovered(
    ev: Evidence, outputs: list[Any], values: list[dict[str, np.ndarray]], logits: list[dict]
) -> None:
    """Fill the weights (and their logits) from the first output that can be explained."""
    for out, vals, lg in zip(outputs, values, logits, strict=True):
        ev.logits = lg
        if add_weights(ev, out, vals):
            return
    ev.logits = {}


def changed(a: Any, b: Any, atol: float = 1e-5) -> bool | None:
    """Do two recorded arrays differ (None when either is missing or their shapes differ)?"""
    a, b = as_array(a), as_array(b)
    if a is None or b is None or a.shape != b.shape:
        return None
    return not np.allclose(a, b, rtol=1e-4, atol=atol, equal_nan=True)


def mixes_batch(observed: dict[str, Any], key: str) -> bool | None:
    """Did sequence 0's output change when only the other sequences of the batch changed?"""
    a, b = as_array(observed.get(key)), as_array(observed.get("mix:" + key))
    if a is None or b is None or a.shape != b.shape or a.ndim < 2:
        return None
    return changed(a[0], b[0])


def mixed_input(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """x with every sequence but the first replaced: sequence 0's output must not move."""
    other = x.clone()
    other[1:] = torch.randn(other[1:].shape, generator=g)
    return other


# ---- facts of a module: its mask, its device, two forwards -------------------------------


def buffer_facts(structure: Any, tril_meta: Any) -> dict[str, bool] | None:
    """What the module's `tril` is (probe `nb05.structure` and `tril_device_after_meta`)."""
    if not isinstance(structure, dict):
        return None
    buffers, params = structure.get("buffers") or {}, structure.get("params") or {}
    return {
        "registered": "tril" in buffers and "tril" not in params,
        "follows_device": tril_meta == "meta",
        "in_state_dict": "tril" in (structure.get("state_keys") or []),
        "parameter": "tril" in params,
    }


def device_errors(observed: dict[str, Any], buffer: dict[str, bool] | None, ran: bool) -> bool:
    """A device named in the code: an error about cuda, or a module whose mask follows .to()
    and that ran on the CPU (`ran`) but raised on the meta device."""
    errors = " ".join(v for k, v in observed.items() if k.endswith("!") and isinstance(v, str))
    buffer_ok = bool(buffer and buffer["registered"] and buffer["follows_device"])
    return "cuda" in errors.lower() or (buffer_ok and ran and "meta!" in observed)


def on_meta_problem(observed: dict[str, Any], shape: list[int]) -> str:
    """Why the module moved to the meta device did not give a meta output of `shape`."""
    meta = observed.get("meta")
    if isinstance(meta, dict) and meta.get("device") == "meta" and meta.get("shape") == shape:
        return ""
    got = why_not(observed, "meta", None) if "meta" not in observed else f"returned {meta}"
    return f"moved to the meta device with a meta input: {got}"


def twice_problem(twice: Any, close: Any) -> tuple[bool | None, str]:
    """(the mask or the output changed across two forwards, None when they did not run; why)
    for the probe's `twice` record; `close(a, b)` compares two outputs."""
    if not isinstance(twice, dict) or as_array(twice.get("first")) is None:
        return None, "the two calls on one head did not run"
    before, after = as_array(twice.get("tril_before")), as_array(twice.get("tril_after"))
    same_mask = before is None or (
        after is not None
        and before.shape == after.shape
        and bool(np.array_equal(before, after, equal_nan=True))
    )
    if not same_mask:
        return True, "forward changed the tril buffer: the mask must be read, never written"
    if not close(twice.get("second"), torch.from_numpy(twice["first"])):
        return True, "a second call on the same input gave a different output"
    return False, ""
