"""The named constants of an answer cell (a table, a count, a prediction), as plain data."""

from __future__ import annotations

from typing import Any

from .plain import attempt


def probe_values(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    """observed[name] = the value the cell gave `name`, for each name in cases['names']."""
    observed: dict[str, Any] = {}
    for name in cases["names"]:
        attempt(observed, name, lambda name=name: ns[name])
    return observed
