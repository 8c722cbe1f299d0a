"""Probe of notebook 05: the student's Head built with the case's weights, run and inspected.

For each configuration the probe builds the student's `Head`, loads the case's weights into
`key`, `query` and `value` (and the case's biases, when the student's projections have one,
so that a head with bias is recognisable from its outputs), and records outputs and structure:
parameter and buffer names, what the `dropout` submodule receives (a forward hook), the head
on the `meta` device, the mask before and after a forward pass.
"""

from __future__ import annotations

from typing import Any

import torch

from .plain import attempt

PROJECTIONS = ("key", "query", "value")


def build(Head: Any, cfg: Any, w: dict[str, Any], dropout: float | None = None) -> Any:
    """The student's Head for `cfg` with the case's weights loaded (and biases, if it has any)."""
    n_embd, hs, block_size = cfg
    if dropout is None:
        head = Head(n_embd, hs, block_size)
    else:
        head = Head(n_embd, hs, block_size, dropout=dropout)
    with torch.no_grad():
        for proj in PROJECTIONS:
            layer = getattr(head, proj)
            layer.weight.copy_(w[proj])
            if getattr(layer, "bias", None) is not None:
                layer.bias.copy_(w[proj + "_bias"])
    return head


class DropoutSpy:
    """Forward hook on the student's `dropout` submodule: what goes in, what comes out."""

    def __init__(self, module: Any) -> None:
        self.calls: list[dict[str, Any]] = []
        self.handle = module.register_forward_hook(self._hook)

    def _hook(self, module: Any, inputs: tuple, output: Any) -> None:
        if len(self.calls) < 4:
            first = inputs[0] if inputs else None
            self.calls.append({"input": first.detach().clone(), "output": output.detach().clone()})

    def remove(self) -> list[dict[str, Any]]:
        self.handle.remove()
        return self.calls


def structure(Head: Any, cfg: Any) -> dict[str, Any]:
    head = Head(*cfg)
    subs = {}
    for name in (*PROJECTIONS, "dropout"):
        sub = getattr(head, name, None)
        subs[name] = "" if sub is None else type(sub).__name__
    tril = getattr(head, "tril", None)
    return {
        "submodules": subs,
        "linear": {n: isinstance(getattr(head, n, None), torch.nn.Linear) for n in PROJECTIONS},
        "dropout_module": isinstance(getattr(head, "dropout", None), torch.nn.Dropout),
        "params": {n: list(p.shape) for n, p in head.named_parameters()},
        "buffers": {n: list(b.shape) for n, b in head.named_buffers()},
        "state_keys": list(head.state_dict()),
        "tril": tril if isinstance(tril, torch.Tensor) else None,
    }


def tril_device_after_meta(Head: Any, cfg: Any) -> str:
    head = Head(*cfg)
    head.to("meta")
    tril = getattr(head, "tril", None)
    return str(tril.device) if isinstance(tril, torch.Tensor) else "missing"


def probe_head(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    Head = ns["Head"]
    configs, weights, xs = cases["configs"], cases["weights"], cases["x"]
    prop = cases["property"]
    obs: dict[str, Any] = {}
    cfg_a, w_a = configs["A"], weights["A"]
    attempt(obs, "structure", lambda: structure(Head, cfg_a))
    attempt(obs, "tril_meta", lambda: tril_device_after_meta(Head, cfg_a))

    def run(cfg_name: str, x_key: str) -> Any:
        head = build(Head, configs[cfg_name], weights[cfg_name])
        head.eval()
        with torch.no_grad():
            return head(xs[x_key].clone())

    for key, (cfg_name, x_key) in cases["runs"].items():
        attempt(obs, key, lambda c=cfg_name, k=x_key: run(c, k))

    def dropped(p: float | None, train: bool) -> dict[str, Any]:
        head = build(Head, cfg_a, w_a, dropout=p)
        head.train(train)
        spy = DropoutSpy(head.dropout)
        torch.manual_seed(0)
        with torch.no_grad():
            out = head(xs[prop].clone())
        return {"out": out, "calls": spy.remove()}

    attempt(obs, "drop_eval_p0", lambda: dropped(None, False))
    attempt(obs, "drop_eval_p5", lambda: dropped(cases["dropout_p"], False))
    attempt(obs, "drop_train", lambda: dropped(cases["dropout_p"], True))

    attempt(obs, "meta", lambda: on_meta(build(Head, cfg_a, w_a), xs[prop].shape))
    attempt(obs, "twice", lambda: twice(build(Head, cfg_a, w_a), xs[prop]))
    return obs


def on_meta(head: Any, shape: Any) -> dict[str, Any]:
    """The head moved to the meta device, run on a meta input: the output's device, shape."""
    head.eval()
    head.to("meta")
    out = head(torch.empty(tuple(shape), device="meta"))
    return {"device": str(out.device), "shape": list(out.shape)}


def _tril_copy(head: Any) -> Any:
    tril = getattr(head, "tril", None)
    return tril.detach().clone() if isinstance(tril, torch.Tensor) else None


def twice(head: Any, x: Any) -> dict[str, Any]:
    """Two forwards of one head on the same input, and its tril before and after."""
    head.eval()
    before = _tril_copy(head)
    with torch.no_grad():
        first = head(x.clone())
        second = head(x.clone())
    return {"first": first, "second": second, "tril_before": before, "tril_after": _tril_copy(head)}
