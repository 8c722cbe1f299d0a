"""Probes of notebook 07: device choice, memory, several heads, sdpa.

- pick-device: fakes what is available (cuda, mps, both, neither) by patching the availability
  functions, and also calls `pick_device()` as it is.
- multi-head: records the student's own weights (read off the documented layout: `heads`, an
  nn.ModuleList of heads with key/query/value, and `proj`) and outputs.
- sdpa-forward: course heads are passed in; records the output and whether
  `scaled_dot_product_attention` ran (a TorchFunctionMode sees every call, however imported).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .modules import course_head
from .plain import attempt

# ---- pick-device ---------------------------------------------------------------------------


def _patched_availability(cuda: bool, mps: bool) -> list[tuple[Any, str, Any]]:
    """(object, attribute, replacement) for every way to ask what is available."""
    patches: list[tuple[Any, str, Any]] = [
        (torch.cuda, "is_available", lambda: cuda),
        (torch.cuda, "device_count", lambda: 1 if cuda else 0),
    ]
    backends_mps = getattr(torch.backends, "mps", None)
    if backends_mps is not None:
        patches += [
            (backends_mps, "is_available", lambda: mps),
            (backends_mps, "is_built", lambda: mps),
        ]
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        kind = "cuda" if cuda else "mps" if mps else None
        patches += [
            (accelerator, "is_available", lambda: kind is not None),
            (
                accelerator,
                "current_accelerator",
                lambda *a, **k: torch.device(kind) if kind else None,
            ),
        ]
    return patches


def _describe_device(value: Any) -> dict[str, Any]:
    if isinstance(value, torch.device):
        return {"is_device": True, "type": value.type}
    return {"is_device": False, "type": str(value)[:40]}


def probe_pick_device(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    fn = ns["pick_device"]
    obs: dict[str, Any] = {}
    for name, (cuda, mps, _) in cases["scenarios"].items():
        patches = [p for p in _patched_availability(cuda, mps) if hasattr(p[0], p[1])]
        saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in patches]
        try:
            for obj, attr, new in patches:
                setattr(obj, attr, new)
            attempt(obs, name, lambda: _describe_device(fn()))
        finally:
            for obj, attr, old in saved:
                setattr(obj, attr, old)
    attempt(obs, "this machine", lambda: _describe_device(fn()))
    return obs


# ---- weights-bytes --------------------------------------------------------------------------


def _dtypes(values: Any) -> Any:
    """Case arguments with dtype names ('torch.float16') turned into torch dtypes."""
    if isinstance(values, (list, tuple)):
        return type(values)(_dtypes(v) for v in values)
    if isinstance(values, dict):
        return {k: _dtypes(v) for k, v in values.items()}
    if isinstance(values, str) and values.startswith("torch."):
        return getattr(torch, values.removeprefix("torch."))
    return values


def probe_weights_bytes(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    fn = ns["weights_bytes"]
    obs: dict[str, Any] = {}
    for key, (args, kwargs) in cases["calls"].items():
        args, kwargs = _dtypes(args), _dtypes(kwargs)
        attempt(obs, key, lambda args=args, kwargs=kwargs: fn(*args, **kwargs))
    return obs


# ---- multi-head -----------------------------------------------------------------------------


def _linear_record(layer: Any) -> dict[str, Any]:
    bias = getattr(layer, "bias", None)
    return {
        "linear": isinstance(layer, nn.Linear),
        "weight": layer.weight,
        "bias": bias if isinstance(bias, torch.Tensor) else None,
    }


def layout_of(mh: Any) -> dict[str, Any]:
    """The weights the judge needs, read off the documented layout: heads and proj."""
    heads = getattr(mh, "heads", None)
    proj = getattr(mh, "proj", None)
    return {
        "heads_type": type(heads).__name__,
        "module_list": isinstance(heads, nn.ModuleList),
        "heads": [
            {n: _linear_record(getattr(h, n)) for n in ("key", "query", "value")}
            for h in (list(heads) if heads is not None else [])
        ],
        "proj": _linear_record(proj) if proj is not None else None,
    }


def _residual(mh: Any, x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    return x + mh(x)  # (B,T,C) + (B,T,C)


def probe_multi_head(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    MultiHead = ns["MultiHead"]
    xs = cases["x"]
    obs: dict[str, Any] = {}

    def build(cfg: str, dropout: float = 0.0) -> Any:
        torch.manual_seed(0)
        mh = MultiHead(*cases["configs"][cfg], dropout=dropout)
        mh.eval()
        return mh

    models = {}
    for cfg in cases["configs"]:
        models[cfg] = attempt(obs, f"build_{cfg}", lambda cfg=cfg: build(cfg))
        if models[cfg] is not None:
            attempt(obs, f"layout_{cfg}", lambda cfg=cfg: layout_of(models[cfg]))
    for key, (cfg, _) in cases["inputs_of"].items():
        if models[cfg] is None:
            continue
        with torch.no_grad():
            attempt(obs, key, lambda cfg=cfg, key=key: models[cfg](xs[key].clone()))
            attempt(
                obs, key + "_residual", lambda cfg=cfg, key=key: _residual(models[cfg], xs[key])
            )
    if models.get("A") is not None:
        with torch.no_grad():
            attempt(obs, "A_future", lambda: models["A"](xs["A_future"].clone()))

    def dropout_eval() -> dict[str, Any]:
        mh = build("A", dropout=cases["dropout_p"])
        with torch.no_grad():
            first, second = mh(xs["A_main"].clone()), mh(xs["A_main"].clone())
        return {"first": first, "second": second, "layout": layout_of(mh)}

    attempt(obs, "dropout_eval", dropout_eval)
    return obs


# ---- sdpa-forward ---------------------------------------------------------------------------


class CountSdpa(TorchFunctionMode):
    """Counts calls of scaled_dot_product_attention, however the student imported it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if func is F.scaled_dot_product_attention:
            self.calls += 1
        return func(*args, **(kwargs or {}))


def probe_sdpa_forward(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    fn = ns["head_forward_sdpa"]
    obs: dict[str, Any] = {}

    def call(spec: dict[str, Any], x: torch.Tensor, training: bool) -> dict[str, Any]:
        head = course_head(spec, dropout=float(spec.get("dropout", 0.0)))
        head.train(training)
        counter = CountSdpa()
        with torch.no_grad(), counter:
            out = fn(head, x.clone())
        return {"out": out, "sdpa_calls": counter.calls}

    for key, x in cases["x"].items():
        attempt(obs, key, lambda x=x: call(cases["head"], x, True))
    dropping = cases["dropping"]
    attempt(obs, "dropping", lambda: call(dropping, cases["x"]["main"], True))
    return obs
