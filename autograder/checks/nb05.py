"""Checks of notebook 05, the Head: scale, buffer, crop, dropout, device, in-place masking.

The probe (`autograder.probe.nb05`) builds the student's `Head` with the case's weights and
records outputs and structure; the judge computes every reference from the same weights and
hands what it saw to the mistake properties.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from autograder.checks import reference
from autograder.checks.base import CellSpec, Scorer, close, name_mistakes, why_not
from autograder.checks.evidence import (
    buffer_facts,
    device_errors,
    first_recovered,
    logits_for,
    mixed_input,
    mixes_batch,
    on_meta_problem,
    projections,
    twice_problem,
)
from autograder.checks.properties import Evidence

NOTEBOOK = "05_the_head.ipynb"
PROJECTIONS = ("key", "query", "value")

# name -> (n_embd, head_size, block_size); every size distinct, head_size != n_embd, and
# C**-0.5 != head_size**-1 so that the three scale mistakes give three different outputs.
CONFIGS: dict[str, tuple[int, int, int]] = {
    "A": (24, 10, 12),
    "B": (20, 6, 9),
    "S": (48, 16, 32),
}
# output key -> (config, (B, T)): T < block_size, B == T, T = 1, T == block_size, hs == T,
# B == T == hs. A_main (hs, C >= T) is where the weights are recovered from.
INPUTS: dict[str, tuple[str, tuple[int, int]]] = {
    "A_main": ("A", (3, 7)),
    "A_BeqT": ("A", (5, 5)),
    "A_T1": ("A", (2, 1)),
    "A_full": ("A", (2, 12)),
    "A_hsT": ("A", (2, 10)),
    "B_main": ("B", (4, 3)),
    "B_full": ("B", (1, 9)),
    "B_BTH": ("B", (6, 6)),
    "S_full": ("S", (2, 32)),
    "S_short": ("S", (3, 20)),
}
GROUPS: list[tuple[str, list[str]]] = [
    ("matches the reference head (C=24, hs=10, block_size=12, T=7)", ["A_main"]),
    (
        "other sizes: B == T, T = 1, T == block_size, hs == T, another config",
        ["A_BeqT", "A_T1", "A_full", "A_hsT", "B_main", "B_full", "B_BTH"],
    ),
    (
        "a wider head (C=48, hs=16, block_size=32): T == block_size and T < block_size",
        ["S_full", "S_short"],
    ),
]
RECOVER_FROM = ("A_main", "A_hsT")  # hs, C >= T; then hs == T, where v @ wei runs
MIX = "B_BTH"
# The property checks (causality, dropout, two calls) run at T == block_size, so that a mask
# that is not cropped loses only the output checks.
PROPERTY = "A_full"
FUTURE_FROM = 4  # x_future equals the PROPERTY input before this position
DROPOUT_P = 0.5
GAIN = {"A": 0.6, "B": 0.6, "S": 1.0}  # q, k of moderate size: no weight rounds to zero


def head_cases(
    configs: dict[str, tuple[int, int, int]],
    inputs: dict[str, tuple[str, tuple[int, int]]],
    seed: int = 505,
) -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    weights: dict[str, dict[str, torch.Tensor]] = {}
    for name, (n_embd, hs, _) in configs.items():
        weights[name] = {}
        for proj in PROJECTIONS:
            scale = GAIN.get(name, 0.6) * n_embd**-0.5
            weights[name][proj] = torch.randn(hs, n_embd, generator=g) * scale
            weights[name][proj + "_bias"] = 0.5 * torch.randn(hs, generator=g)
    xs = {key: torch.randn(b, t, configs[c][0], generator=g) for key, (c, (b, t)) in inputs.items()}
    future = xs[PROPERTY].clone()
    future[:, FUTURE_FROM:] = torch.randn(future[:, FUTURE_FROM:].shape, generator=g)
    xs["A_future"] = future
    runs = {key: [c, key] for key, (c, _) in inputs.items()}
    runs["A_future"] = [inputs[PROPERTY][0], "A_future"]
    if MIX in inputs:
        xs["mix"] = mixed_input(xs[MIX], g)
        runs["mix:" + MIX] = [inputs[MIX][0], "mix"]
    return {
        "configs": dict(configs),
        "inputs_of": dict(inputs),
        "runs": runs,
        "weights": weights,
        "x": xs,
        "property": PROPERTY,
        "dropout_p": DROPOUT_P,
    }


def _arr(value: Any) -> np.ndarray | None:
    return value if isinstance(value, np.ndarray) else None


def _is_weights(arr: Any, B: int, T: int) -> bool:
    """A (B,T,T) tensor of non-negative weights, as after a softmax (NaN rows tolerated).

    Scores before the softmax hold -inf (masked) or negative numbers; the output is (B,T,hs).
    How the rows are normalised is left to the output checks, so that a wrong softmax is not
    also blamed on dropout.
    """
    a = _arr(arr)
    if a is None or a.shape != (B, T, T) or np.any(np.isinf(a)):
        return False
    finite = a[np.isfinite(a)]
    return bool(finite.size and np.all(finite >= 0))


def _lower_pattern(arr: Any, n: int) -> bool:
    a = _arr(arr)
    if a is None or a.shape != (n, n):
        return False
    return bool(np.array_equal(a != 0, np.tril(np.ones((n, n), dtype=bool))))


class HeadSpec(CellSpec):
    notebook = NOTEBOOK
    grade_id = "head"
    names = ("Head",)
    points = 11.0
    dtype = "float32"
    probe_module, probe_function = "nb05", "probe_head"
    configs = CONFIGS
    inputs = INPUTS
    groups = GROUPS
    seed = 505

    def cases(self) -> dict[str, Any]:
        return head_cases(self.configs, self.inputs, self.seed)

    def resized(self, extra: dict[str, tuple], seed: int | None = None) -> HeadSpec:
        """Extra inputs as key -> (n_embd, head_size, block_size, B, T), T <= block_size."""
        spec = copy.copy(self)
        spec.configs = dict(self.configs)
        spec.inputs = dict(self.inputs)
        for key, (n_embd, hs, block, B, T) in extra.items():
            spec.configs["cfg_" + key] = (n_embd, hs, block)
            spec.inputs[key] = ("cfg_" + key, (B, T))
        name, keys = self.groups[1]
        spec.groups = [self.groups[0], (name, [*keys, *extra]), *self.groups[2:]]
        if seed is not None:
            spec.seed = seed
        return spec

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> Any:
        s = Scorer(self.grade_id)
        st = observed.get("structure") if isinstance(observed.get("structure"), dict) else None
        ev = Evidence(reference.HEAD)
        self._structure(s, cases, observed, st, ev)
        has_bias = bool(ev.param_names) and any(n.endswith("bias") for n in ev.param_names or [])
        outputs_ok = self._outputs(s, cases, observed, ev, has_bias)
        self._causal(s, observed)
        self._dropout(s, cases, observed, has_bias, outputs_ok, ev)
        self._device(s, cases, observed, ev)
        self._in_place(s, observed, ev)
        name_mistakes(s, ev)
        return s.result

    def _structure(
        self, s: Scorer, cases: dict, observed: dict, st: dict | None, ev: Evidence
    ) -> None:
        n_embd, hs, block_size = cases["configs"]["A"]
        params = st["params"] if st else {}
        ok = bool(st) and all(st["linear"].values()) and st["dropout_module"]
        detail = (
            why_not(observed, "structure", None)
            if not st
            else "key, query and value must be nn.Linear and dropout an nn.Dropout, "
            f"found {st['submodules']}"
        )
        s.check(
            "Head(n_embd, head_size, block_size) has key, query, value and dropout", 1, ok, detail
        )
        expected_params = {f"{p}.weight": [hs, n_embd] for p in PROJECTIONS}
        n_found = sum(int(np.prod(shape)) for shape in params.values())
        s.check(
            f"only the three bias-free projections: 3 x C x hs = {3 * n_embd * hs} parameters",
            1,
            bool(st) and params == expected_params,
            f"found {n_found} parameters: {sorted(params)}" if st else "",
        )
        buffers = st["buffers"] if st else {}
        registered = bool(st) and "tril" in buffers and "tril" not in params
        follows = observed.get("tril_meta") == "meta"
        buffer_ok = (
            registered
            and buffers.get("tril") == [block_size, block_size]
            and _lower_pattern(st["tril"], block_size)
            and follows
        )
        detail = ""
        if st and "tril" not in buffers:
            detail = "tril is not among named_buffers(): register it with register_buffer"
        elif st and "tril" in params:
            detail = "tril is a parameter: the optimiser would train it; make it a buffer"
        elif st and not _lower_pattern(st["tril"], block_size):
            detail = f"tril must be the ({block_size}, {block_size}) lower triangle of ones"
        elif st and not follows:
            detail = "after .to('meta') tril stayed where it was: register it as a buffer"
        s.check(
            "tril is a registered (block_size, block_size) buffer that follows .to()",
            1,
            buffer_ok,
            detail,
        )
        if st:
            ev.param_names = list(params)
            ev.buffer = buffer_facts(st, observed.get("tril_meta"))

    def _outputs(self, s: Scorer, cases: dict, observed: dict, ev: Evidence, bias: bool) -> bool:
        configs, weights, xs = cases["configs"], cases["weights"], cases["x"]

        def expected_for(key: str) -> torch.Tensor:
            cfg = cases["inputs_of"][key][0]
            return reference.attention(xs[key], weights[cfg], reference.HEAD, configs[cfg][2])

        expected = {key: expected_for(key) for key in cases["inputs_of"]}
        ok = True
        for name, keys in self.groups:
            bad = [k for k in keys if not close(observed.get(k), expected[k], self.dtype)]
            detail = (
                f"on input {bad[0]}: {why_not(observed, bad[0], expected[bad[0]])}" if bad else ""
            )
            ok &= s.check(name, 1, not bad, detail)
        self._evidence_from_outputs(cases, observed, ev, bias, expected)
        return ok

    def _evidence_from_outputs(
        self, cases: dict, observed: dict, ev: Evidence, bias: bool, expected: dict
    ) -> None:
        configs, weights, xs = cases["configs"], cases["weights"], cases["x"]
        outs, values, logits = [], [], []
        for key in RECOVER_FROM:
            if key not in cases["inputs_of"]:
                continue
            w = weights[cases["inputs_of"][key][0]]
            p = projections(xs[key], w, bias)
            outs.append(observed.get(key))
            values.append({"v": p["v"], "x": xs[key].double().numpy()})
            logits.append(logits_for(xs[key], w, bias))
        n_embd, hs, _ = configs["A"]
        ev.head_size, ev.n_embd = hs, n_embd
        first_recovered(ev, outs, values, logits)
        ev.mixes_batch = mixes_batch(observed, MIX)
        full = [k for k, (c, (_, t)) in cases["inputs_of"].items() if t == configs[c][2]]
        short = [k for k in cases["inputs_of"] if k not in full]
        ran_full = all(_arr(observed.get(k)) is not None for k in full)
        right_full = all(close(observed.get(k), expected[k], self.dtype) for k in full)
        right_short = all(close(observed.get(k), expected[k], self.dtype) for k in short)
        ran_short = all(_arr(observed.get(k)) is not None for k in short)
        ev.crop = {"full_ok": ran_full, "short_ok": ran_short and (right_short or not right_full)}

    def _causal(self, s: Scorer, observed: dict) -> None:
        main, future = _arr(observed.get(PROPERTY)), _arr(observed.get("A_future"))
        causal = (
            main is not None
            and future is not None
            and main.shape == future.shape
            and bool(np.allclose(main[:, :FUTURE_FROM], future[:, :FUTURE_FROM], atol=1e-5))
        )
        if main is None or future is None:
            missing = PROPERTY if main is None else "A_future"
            detail = f"on input {missing}: {why_not(observed, missing, np.zeros(0))}"
        else:
            detail = "earlier outputs changed when only later tokens changed"
        s.check(
            f"causal: changing tokens from position {FUTURE_FROM} on leaves positions "
            f"0-{FUTURE_FROM - 1} unchanged",
            1,
            causal,
            "" if causal else detail,
        )

    def _dropout(
        self,
        s: Scorer,
        cases: dict[str, Any],
        observed: dict[str, Any],
        bias: bool,
        outputs_ok: bool,
        ev: Evidence,
    ) -> None:
        B, T = cases["x"][PROPERTY].shape[:2]
        w = cases["weights"]["A"]
        ev0, ev5, tr = (observed.get(k) for k in ("drop_eval_p0", "drop_eval_p5", "drop_train"))
        ran = isinstance(ev0, dict) and isinstance(ev0.get("out"), np.ndarray)
        calls = ev0.get("calls", []) if ran else []
        on_weights = ran and bool(calls) and all(_is_weights(c.get("input"), B, T) for c in calls)
        if not ran:
            detail = why_not(observed, "drop_eval_p0", None)
        elif not calls:
            detail = "self.dropout was never called in forward: apply it to the attention weights"
        elif not on_weights:
            shapes = [tuple(getattr(c.get("input"), "shape", ())) for c in calls]
            detail = (
                f"self.dropout received tensors of shape {shapes}: it must receive the (B,T,T) "
                "weights after the softmax"
            )
        else:
            detail = "in training mode the output is not (dropped weights) @ value(x)"
        # In training mode the output must be exactly the dropped weights times v.
        v = torch.from_numpy(projections(cases["x"][PROPERTY], w, bias)["v"])
        linked = None
        if isinstance(tr, dict) and isinstance(tr.get("out"), np.ndarray) and tr.get("calls"):
            dropped = _arr(tr["calls"][0].get("output"))
            linked = False
            if dropped is not None and dropped.shape == (B, T, T):
                linked = close(tr["out"], torch.from_numpy(dropped).double() @ v, self.dtype)
        # the link presumes value(x) is aggregated: judge it only when the outputs are right
        placed = on_weights and (bool(linked) or not outputs_ok)
        s.check("dropout is applied to the attention weights after the softmax", 1, placed, detail)
        eval_ok = (
            ran
            and isinstance(ev5, dict)
            and close(ev5.get("out"), torch.from_numpy(ev0["out"]), self.dtype)
        )
        detail = (
            "with dropout=0.5 in eval mode the output changed: apply dropout through "
            "self.dropout so that .eval() switches it off"
        )
        if not isinstance(ev5, dict):
            detail = why_not(observed, "drop_eval_p5", None)
        s.check(
            "in eval mode dropout is off (dropout=0.5 gives the same output)", 1, eval_ok, detail
        )
        if ran:
            ev.dropout = {
                "on_weights": on_weights,
                "off_in_eval": bool(eval_ok) or not isinstance(ev5, dict),
                "linked": linked if outputs_ok else None,
            }

    def _device(self, s: Scorer, cases: dict, observed: dict, ev: Evidence) -> None:
        hs = cases["configs"]["A"][1]
        detail = on_meta_problem(observed, [*cases["x"][PROPERTY].shape[:2], hs])
        s.check(
            "runs on the input's device (head and input moved to the meta device)",
            1,
            not detail,
            detail,
        )
        ran_on_cpu = isinstance(observed.get(PROPERTY), np.ndarray)
        ev.device_errors = device_errors(observed, ev.buffer, ran_on_cpu)

    def _in_place(self, s: Scorer, observed: dict[str, Any], ev: Evidence) -> None:
        tw = observed.get("twice")
        written, detail = twice_problem(tw, lambda a, b: close(a, b, self.dtype))
        if not isinstance(tw, dict):
            detail = why_not(observed, "twice", None)
        ev.mask_written = written
        s.check(
            "forward leaves the mask unchanged (two calls, same output)",
            1,
            written is False,
            detail,
        )


SPECS: list[CellSpec] = [HeadSpec()]
