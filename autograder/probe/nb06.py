"""Probes of notebook 06: capture a head's weights, the unmasked head, the value ablation."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
from torch.nn import functional as F

from .modules import course_head, load
from .nb05 import on_meta, structure, tril_device_after_meta, twice
from .plain import attempt


def hook_count(module: nn.Module) -> int:
    """Hooks attached to the module or any submodule, plus global module hooks."""
    from torch.nn.modules import module as module_mod

    total = 0
    for m in module.modules():
        for attr in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"):
            total += len(getattr(m, attr, {}))
    for attr in ("_global_forward_hooks", "_global_forward_pre_hooks"):
        total += len(getattr(module_mod, attr, {}))
    return total


def dropout_input(head: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run head(x) and record what its `dropout` submodule received (the weights)."""
    seen: list[torch.Tensor] = []
    handle = head.dropout.register_forward_hook(lambda m, i, o: seen.append(i[0].detach()))
    try:
        with torch.no_grad():
            out = head(x)
    finally:
        handle.remove()
    return out, (seen[-1] if seen else None)


def probe_capture_attention(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    fn = ns["capture_attention"]
    observed: dict[str, Any] = {}
    for key, c in cases["heads"].items():
        head = course_head(c).eval()
        forward = type(head).forward
        before = hook_count(head)
        attempt(observed, key, lambda head=head, x=c["x"]: fn(head, x.clone()))
        observed[key + ":hooks"] = hook_count(head) - before
        observed[key + ":class"] = type(head).forward is forward
        with torch.no_grad():
            attempt(observed, key + ":out", lambda head=head, x=c["x"]: head(x.clone()))
    return observed


def _student_head(cls: type, c: dict[str, Any], names: tuple[str, ...]) -> nn.Module:
    hs, C = c["key"].shape
    head = cls(C, hs, int(c["block_size"]))
    load(head, c, names)
    return head.eval()


def probe_unmasked_head(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    cls = ns["UnmaskedHead"]
    observed: dict[str, Any] = {}
    for key, c in cases["heads"].items():

        def run(c: dict[str, Any] = c) -> tuple[torch.Tensor, torch.Tensor | None]:
            head = _student_head(cls, c, ("key", "query", "value"))
            return dropout_input(head, c["x"].clone())

        if attempt(observed, key, run) is not None:
            observed[key], observed[key + ":wei"] = observed[key]
    attempt(observed, "peek", lambda: peeking_run(cls, cases["peek"]))
    return observed


def probe_value_ablation(ns: dict[str, Any], cases: dict[str, Any]) -> dict[str, Any]:
    from attention_course.charmodel import CharModel

    cls = ns["NoValueHead"]
    observed: dict[str, Any] = {}
    for key, c in cases["heads"].items():
        build = lambda c=c: _student_head(cls, c, ("key", "query"))  # noqa: E731
        head = attempt(observed, key + ":build", build)
        if head is None:
            observed[key + "!"] = observed[key + ":build!"]
            continue
        del observed[key + ":build"]
        observed[key + ":params"] = {n: list(p.shape) for n, p in head.named_parameters()}
        with torch.no_grad():
            attempt(observed, key, lambda head=head, x=c["x"]: head(x.clone()))

    def in_model() -> Any:
        torch.manual_seed(0)
        model = CharModel(11, 7, 8, cls(7, 4, 8), 7, residual=True)
        return model(cases["idx"])[0].shape

    attempt(observed, "model", in_model)
    if cases.get("property") in cases["heads"]:
        module_facts(observed, cls, cases["heads"][cases["property"]])
    return observed


def module_facts(observed: dict[str, Any], cls: type, c: dict[str, Any]) -> None:
    """What notebook 05 records of a head, for the student's class on case c: its structure,
    its mask after .to('meta'), a run on the meta device, two forwards of one head."""
    hs, C = c["key"].shape
    cfg = (C, hs, int(c["block_size"]))
    build = lambda: _student_head(cls, c, ("key", "query"))  # noqa: E731
    attempt(observed, "structure", lambda: structure(cls, cfg))
    attempt(observed, "tril_meta", lambda: tril_device_after_meta(cls, cfg))
    attempt(observed, "meta", lambda: on_meta(build(), c["x"].shape))
    attempt(observed, "twice", lambda: twice(build(), c["x"]))


def peeking_run(cls: type, c: dict[str, Any]) -> dict[str, float]:
    """Train a tiny CharModel with head class `cls` on i.i.d. random tokens.

    Random tokens cannot be predicted from the past: an honest model cannot beat ln V. A head
    that sees the future can read the next token. Returns the teacher-forced loss (targets
    inside the window, as in training) and the causal loss (position t from tokens 0..t only).
    """
    from attention_course.charmodel import CharModel

    tokens, V, T, C, hs = c["tokens"], c["vocab"], c["block_size"], c["n_embd"], c["head_size"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(c["seed"])
        model = CharModel(V, C, T, cls(C, hs, T), hs)
        optimizer = torch.optim.AdamW(model.parameters(), lr=c["lr"])
        g = torch.Generator().manual_seed(c["seed"])

        def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
            ix = torch.randint(len(tokens) - T - 1, (n,), generator=g).tolist()
            x = torch.stack([tokens[i : i + T] for i in ix])  # (n,T)
            y = torch.stack([tokens[i + 1 : i + T + 1] for i in ix])  # (n,T)
            return x, y

        for _ in range(c["steps"]):
            x, y = batch(c["batch_size"])
            _, loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        model.eval()
        x, y = batch(c["eval_batch"])
        with torch.no_grad():
            teacher = model(x, y)[1].item()
            last = [model(x[:, : t + 1])[0][:, -1, :] for t in range(T)]  # T x (n,V)
            causal = F.cross_entropy(torch.stack(last, 1).flatten(0, 1), y.flatten()).item()
        return {"teacher": float(teacher), "causal": float(causal)}
    finally:
        torch.set_num_threads(threads)
