"""Probes of notebook 01: the three averaging functions on the case inputs."""

from __future__ import annotations

from typing import Any

from .plain import call_each


def _calls(name: str, ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    return call_each({}, ns[name], cases["args"])


def probe_average_loop(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    return _calls("average_loop", ns, cases)


def probe_average_matmul(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    return _calls("average_matmul", ns, cases)


def probe_average_softmax(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    return _calls("average_softmax", ns, cases)
