"""Probes of notebook 03: the causal weights and the count of what survives the mask."""

from __future__ import annotations

from typing import Any

from .plain import attempt, call_each, clone


def probe_mask_then_softmax(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    fn = ns["mask_then_softmax"]
    observed = call_each({}, fn, cases["args"])
    attempt(observed, "future:" + cases["main"], lambda: fn(clone(cases["future"])))
    return observed


def probe_nonzero_count(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    observed: dict[str, Any] = {}
    attempt(observed, "NONZERO", lambda: ns["NONZERO"])
    fn = ns["n_visible"]
    for T in cases["sizes"]:
        attempt(observed, f"n_visible({T})", lambda T=T: fn(T))
    return observed
