"""Probes of notebook 04: attend() on projections built from the case's weights."""

from __future__ import annotations

from typing import Any

from .modules import linear
from .plain import attempt, clone


def probe_attend(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    fn = ns["attend"]
    observed: dict[str, Any] = {}

    def call(c: dict[str, Any], x: Any) -> Any:
        layers = (linear(c[name]) for name in ("key", "query", "value"))
        return fn(clone(x), *layers)

    for key, c in cases["args"].items():
        attempt(observed, key, lambda c=c: call(c, c["x"]))
    main = cases["args"][cases["main"]]
    attempt(observed, "flip:" + cases["main"], lambda: call(main, -main["x"]))
    attempt(observed, "future:" + cases["main"], lambda: call(main, cases["future"]))
    return observed
