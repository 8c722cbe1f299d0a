"""Checks of notebook 05, the Head: scale, buffer, crop, dropout, device, in-place masking.

The probe (`autograder.probe.nb05`) builds the student's `Head` with the case's weights and
records outputs and structure; the judge computes every reference from the same weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from autograder.checks.base import CellSpec, Scorer, close, why_not

NOTEBOOK = "05_the_head.ipynb"
PROJECTIONS = ("key", "query", "value")

# name -> (n_embd, head_size, block_size); every size distinct, head_size != n_embd, and
# C**-0.5 != head_size**-1 so that the three scale mistakes give three different outputs.
CONFIGS: dict[str, tuple[int, int, int]] = {
    "A": (24, 10, 12),
    "B": (20, 6, 9),
    "S": (48, 16, 32),
}
# output key -> (config, (B, T)): T < block_size, B == T, T = 1 and T == block_size.
INPUTS: dict[str, tuple[str, tuple[int, int]]] = {
    "A_main": ("A", (3, 7)),
    "A_BeqT": ("A", (5, 5)),
    "A_T1": ("A", (2, 1)),
    "A_full": ("A", (2, 12)),
    "B_main": ("B", (4, 3)),
    "B_full": ("B", (1, 9)),
    "S_full": ("S", (2, 32)),
    "S_short": ("S", (3, 20)),
}
# The property checks (causality, dropout, two calls) run at T == block_size, so that a mask
# that is not cropped loses only the output checks.
PROPERTY = "A_full"
FUTURE_FROM = 4  # x_future equals the PROPERTY input before this position
MAIN_GROUP = ["A_main"]
SIZE_GROUP = ["A_BeqT", "A_T1", "A_full", "B_main", "B_full"]
SDPA_GROUP = ["S_full", "S_short"]
OUTPUT_KEYS = list(INPUTS)
DROPOUT_P = 0.5


def _cases() -> dict[str, Any]:
    g = torch.Generator().manual_seed(505)
    weights: dict[str, dict[str, torch.Tensor]] = {}
    for name, (n_embd, hs, _) in CONFIGS.items():
        weights[name] = {}
        for proj in PROJECTIONS:
            # unit-variance q, k, v for unit-variance x: scores of variance hs before scaling
            weights[name][proj] = torch.randn(hs, n_embd, generator=g) * n_embd**-0.5
            weights[name][proj + "_bias"] = 0.5 * torch.randn(hs, generator=g)
    inputs = {
        key: torch.randn(b, t, CONFIGS[cfg][0], generator=g)
        for key, (cfg, (b, t)) in INPUTS.items()
    }
    future = inputs[PROPERTY].clone()
    future[:, FUTURE_FROM:] = torch.randn(future[:, FUTURE_FROM:].shape, generator=g)
    inputs["A_future"] = future
    return {
        "configs": dict(CONFIGS),
        "inputs_of": dict(INPUTS),
        "weights": weights,
        "x": inputs,
        "property": PROPERTY,
        "dropout_p": DROPOUT_P,
    }


# ---- references (trusted side) ------------------------------------------------------------


def attention(
    x: torch.Tensor,
    w: dict[str, torch.Tensor],
    scale: str = "hs",
    bias: bool = False,
    crop: bool = True,
    block_size: int | None = None,
    mistake: str = "",
) -> torch.Tensor:
    """The head's output in float64, with one catalog mistake switched on by name.

    scale: "hs" (correct), "none", "C" or "hs_no_sqrt". crop=False reproduces an uncropped
    mask: it raises, as the student's code does, unless T == block_size.
    """
    x = x.double()

    def proj(name: str) -> torch.Tensor:
        out = x @ w[name].double().T
        return out + w[name + "_bias"].double() if bias else out

    B, T, C = x.shape
    k, q, v = proj("key"), proj("query"), proj("value")  # (B,T,hs)
    if mistake == "tied-qk":
        q = k
    hs = k.shape[-1]
    factor = {"hs": hs**-0.5, "none": 1.0, "C": C**-0.5, "hs_no_sqrt": 1.0 / hs}[scale]
    if mistake == "swapped-qk":
        scores = k @ q.transpose(-2, -1) * factor
    else:
        scores = q @ k.transpose(-2, -1) * factor  # (B,T,T)
    size = T if crop else block_size
    tril = torch.tril(torch.ones(size, size, dtype=torch.float64))
    if mistake == "fill-zero":
        wei = scores.masked_fill(tril == 0, 0.0)
    elif mistake == "triu-mask":
        wei = scores.masked_fill(torch.triu(torch.ones(T, T)) == 0, float("-inf"))
    elif mistake == "mask-polarity":
        wei = scores.masked_fill(tril == 1, float("-inf"))
    elif mistake == "mask-after-softmax":
        wei = F.softmax(scores, dim=-1).masked_fill(tril == 0, 0.0)
    else:
        wei = scores.masked_fill(tril == 0, float("-inf"))
    if mistake == "softmax-dim":
        wei = F.softmax(wei, dim=1)
    elif mistake != "mask-after-softmax":
        wei = F.softmax(wei, dim=-1)
    if mistake == "aggregate-x":
        return wei @ x
    return wei @ v  # (B,T,hs)


def sdpa_reference(x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """PyTorch's fused attention on the same projections (float32, as the student runs)."""
    k, q, v = (x @ w[p].T for p in PROJECTIONS)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


# (catalog id, keyword arguments of `attention`) for the output-level diagnoses
OUTPUT_MISTAKES: list[tuple[str, dict[str, Any]]] = [
    ("no-scale", {"scale": "none"}),
    ("scale-by-C", {"scale": "C"}),
    ("scale-no-sqrt", {"scale": "hs_no_sqrt"}),
    ("tril-not-cropped", {"crop": False}),
    ("swapped-qk", {"mistake": "swapped-qk"}),
    ("tied-qk", {"mistake": "tied-qk"}),
    ("fill-zero", {"mistake": "fill-zero"}),
    ("triu-mask", {"mistake": "triu-mask"}),
    ("mask-polarity", {"mistake": "mask-polarity"}),
    ("mask-after-softmax", {"mistake": "mask-after-softmax"}),
    ("softmax-dim", {"mistake": "softmax-dim"}),
    ("aggregate-x", {"mistake": "aggregate-x"}),
]


# ---- judge (trusted side) -------------------------------------------------------------------


def _arr(value: Any) -> np.ndarray | None:
    return value if isinstance(value, np.ndarray) else None


def _is_weights(arr: Any, B: int, T: int) -> bool:
    """A (B,T,T) tensor of probabilities, as after a softmax (NaN rows tolerated).

    Scores before the softmax hold -inf (masked) or negative numbers; the output is (B,T,hs).
    Rows summing to one are left to the output checks, so that a wrong softmax is not also
    blamed on dropout.
    """
    a = _arr(arr)
    if a is None or a.shape != (B, T, T) or np.any(np.isinf(a)):
        return False
    finite = a[np.isfinite(a)]
    return bool(finite.size and np.all(finite >= 0) and np.all(finite <= 1 + 1e-6))


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

    def cases(self) -> dict[str, Any]:
        return _cases()

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> Any:
        s = Scorer(self.grade_id)
        configs, weights, xs = cases["configs"], cases["weights"], cases["x"]
        n_embd, hs, block_size = configs["A"]
        st = observed.get("structure") if isinstance(observed.get("structure"), dict) else None
        params = st["params"] if st else {}
        has_bias = any(name.endswith("bias") for name in params)
        named: list[str] = []

        # 1. structure
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

        # 2. parameters: three bias-free projections
        expected_params = {f"{p}.weight": [hs, n_embd] for p in PROJECTIONS}
        n_found = sum(int(np.prod(shape)) for shape in params.values())
        ok = bool(st) and params == expected_params
        s.check(
            f"only the three bias-free projections: 3 x C x hs = {3 * n_embd * hs} parameters",
            1,
            ok,
            f"found {n_found} parameters: {sorted(params)}" if st else "",
        )
        if has_bias:
            named.append("bias")

        # 3. the registered buffer
        buffers = st["buffers"] if st else {}
        buffer_ok = (
            bool(st)
            and buffers.get("tril") == [block_size, block_size]
            and "tril" not in params
            and _lower_pattern(st["tril"], block_size)
            and observed.get("tril_meta") == "meta"
        )
        tril_is_buffer = bool(st) and "tril" in buffers and "tril" not in params
        detail = ""
        if st and "tril" not in buffers:
            detail = "tril is not among named_buffers(): register it with register_buffer"
        elif st and "tril" in params:
            detail = "tril is a parameter: the optimiser would train it; make it a buffer"
        elif st and not _lower_pattern(st["tril"], block_size):
            detail = f"tril must be the ({block_size}, {block_size}) lower triangle of ones"
        s.check(
            "tril is a registered (block_size, block_size) buffer that follows .to()",
            1,
            buffer_ok,
            detail,
        )
        if st and not tril_is_buffer:
            named.append("tril-not-buffer")

        # 4-6. outputs against the reference
        def reference(key: str, **kw: Any) -> torch.Tensor:
            cfg = cases["inputs_of"][key][0] if key in cases["inputs_of"] else "A"
            return attention(xs[key], weights[cfg], block_size=configs[cfg][2], **kw)

        expected = {key: reference(key) for key in OUTPUT_KEYS}
        for key in SDPA_GROUP:
            expected[key] = sdpa_reference(xs[key], weights[cases["inputs_of"][key][0]])

        def group(name: str, keys: list[str]) -> bool:
            bad = [k for k in keys if not close(observed.get(k), expected[k], self.dtype)]
            detail = (
                f"on input {bad[0]}: {why_not(observed, bad[0], expected[bad[0]])}" if bad else ""
            )
            return s.check(name, 1, not bad, detail)

        outputs_ok = group(
            f"matches the reference head (C={n_embd}, hs={hs}, block_size={block_size}, T=7)",
            MAIN_GROUP,
        )
        outputs_ok &= group(
            "other sizes: B == T, T = 1, T == block_size, another config", SIZE_GROUP
        )
        outputs_ok &= group(
            "agrees with scaled_dot_product_attention(is_causal=True) (C=48, hs=16)", SDPA_GROUP
        )

        # 7. causality, a property of the student's own outputs
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
            "causal: changing tokens from position 4 on leaves positions 0-3 unchanged",
            1,
            causal,
            "" if causal else detail,
        )

        if not outputs_ok:
            named.extend(self._output_mistakes(cases, observed, has_bias))

        # 8-9. dropout
        named.extend(self._dropout(s, cases, observed, has_bias, outputs_ok))

        # 10. device
        meta = observed.get("meta")
        meta_shape = [*xs["A_full"].shape[:2], hs]
        meta_ok = (
            isinstance(meta, dict)
            and meta.get("device") == "meta"
            and meta.get("shape") == meta_shape
        )
        detail = ""
        if not meta_ok:
            detail = "moved to the meta device with a meta input: " + (
                why_not(observed, "meta", None) if "meta" not in observed else f"returned {meta}"
            )
        s.check(
            "runs on the input's device (head and input moved to the meta device)",
            1,
            meta_ok,
            detail,
        )
        errors = " ".join(v for k, v in observed.items() if k.endswith("!") and isinstance(v, str))
        ran_on_cpu = isinstance(observed.get("A_full"), np.ndarray)
        if "cuda" in errors.lower() or (tril_is_buffer and ran_on_cpu and "meta!" in observed):
            named.append("hardcoded-device")

        # 11. the mask survives a forward pass
        named.extend(self._in_place(s, observed, block_size))

        s.name(*dict.fromkeys(named))
        return s.result

    def _output_mistakes(
        self, cases: dict[str, Any], observed: dict[str, Any], bias: bool
    ) -> list[str]:
        """Catalog mistakes whose outputs reproduce the student's on every input that ran."""
        configs, weights, xs = cases["configs"], cases["weights"], cases["x"]
        ran = {k for k in OUTPUT_KEYS if isinstance(observed.get(k), np.ndarray)}
        if not ran:
            return []
        found = []
        for mistake, kw in OUTPUT_MISTAKES:
            outputs: dict[str, torch.Tensor] = {}
            for key in OUTPUT_KEYS:
                cfg = cases["inputs_of"][key][0]
                try:
                    outputs[key] = attention(
                        xs[key], weights[cfg], bias=bias, block_size=configs[cfg][2], **kw
                    )
                except RuntimeError:  # this mistake raises on this size, as the student's did
                    continue
            if set(outputs) == ran and all(close(observed[k], outputs[k], self.dtype) for k in ran):
                found.append(mistake)
        return found

    def _dropout(
        self,
        s: Scorer,
        cases: dict[str, Any],
        observed: dict[str, Any],
        bias: bool,
        outputs_ok: bool,
    ) -> list[str]:
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
        v = cases["x"][PROPERTY].double() @ w["value"].double().T
        if bias:
            v = v + w["value_bias"].double()
        linked = False
        if isinstance(tr, dict) and isinstance(tr.get("out"), np.ndarray) and tr.get("calls"):
            dropped = _arr(tr["calls"][0].get("output"))
            if dropped is not None and dropped.shape == (B, T, T):
                linked = close(tr["out"], torch.from_numpy(dropped).double() @ v, self.dtype)
        # the link presumes value(x) is aggregated: judge it only when the outputs are right
        placed = on_weights and (linked or not outputs_ok)
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
        return ["dropout-misplaced"] if ran and (not placed or not eval_ok) else []

    def _in_place(self, s: Scorer, observed: dict[str, Any], block_size: int) -> list[str]:
        tw = observed.get("twice")
        ok = False
        detail = why_not(observed, "twice", None) if not isinstance(tw, dict) else ""
        changed = False
        if isinstance(tw, dict) and _arr(tw.get("first")) is not None:
            before, after = _arr(tw.get("tril_before")), _arr(tw.get("tril_after"))
            same_mask = before is None or (
                after is not None
                and before.shape == after.shape
                and bool(np.array_equal(before, after, equal_nan=True))
            )
            same_out = close(tw.get("second"), torch.from_numpy(tw["first"]), self.dtype)
            changed = not same_mask or not same_out
            ok = not changed
            if not same_mask:
                detail = "forward changed the tril buffer: the mask must be read, never written"
            elif not same_out:
                detail = "a second call on the same input gave a different output"
        s.check("forward leaves the mask unchanged (two calls, same output)", 1, ok, detail)
        return ["mask-in-place"] if changed else []


SPECS: list[CellSpec] = [HeadSpec()]
