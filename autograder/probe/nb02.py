"""Probes of notebook 02: the raw affinities on projections built from the case's weights."""

from __future__ import annotations

from typing import Any

from .modules import linear
from .plain import attempt, clone


def probe_affinities(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    fn = ns["affinities"]
    observed: dict[str, Any] = {}

    def call(c: dict[str, Any], x: Any) -> Any:
        return fn(clone(x), linear(c["key"]), linear(c["query"]))

    for key, c in cases["args"].items():
        attempt(observed, key, lambda c=c: call(c, c["x"]))
    flip = cases["args"][cases["flip"]]
    attempt(observed, "flip:" + cases["flip"], lambda: call(flip, -flip["x"]))
    return observed
