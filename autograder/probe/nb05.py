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


def _structure(Head: Any, cfg: Any) -> dict[str, Any]:
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


def _tril_device_after_meta(Head: Any, cfg: Any) -> str:
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
    attempt(obs, "structure", lambda: _structure(Head, cfg_a))
    attempt(obs, "tril_meta", lambda: _tril_device_after_meta(Head, cfg_a))

    def run(key: str, x_key: str | None = None) -> Any:
        cfg_name = cases["inputs_of"][key][0] if key in cases["inputs_of"] else "A"
        head = build(Head, configs[cfg_name], weights[cfg_name])
        head.eval()
        with torch.no_grad():
            return head(xs[x_key or key].clone())

    for key in cases["inputs_of"]:
        attempt(obs, key, lambda key=key: run(key))
    attempt(obs, "A_future", lambda: run(prop, "A_future"))

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

    def on_meta() -> dict[str, Any]:
        head = build(Head, cfg_a, w_a)
        head.eval()
        head.to("meta")
        out = head(torch.empty(xs[prop].shape, device="meta"))
        return {"device": str(out.device), "shape": list(out.shape)}

    attempt(obs, "meta", on_meta)

    def twice() -> dict[str, Any]:
        head = build(Head, cfg_a, w_a)
        head.eval()
        before = getattr(head, "tril", None)
        before = before.detach().clone() if isinstance(before, torch.Tensor) else None
        with torch.no_grad():
            first = head(xs[prop].clone())
            second = head(xs[prop].clone())
        after = getattr(head, "tril", None)
        after = after.detach().clone() if isinstance(after, torch.Tensor) else None
        return {"first": first, "second": second, "tril_before": before, "tril_after": after}

    attempt(obs, "twice", twice)
    return obs
