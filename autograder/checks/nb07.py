"""Checks of notebook 07, the Head on the GPU: device choice, memory, several heads, sdpa.

- pick-device: the probe fakes what is available (cuda, mps, both, neither).
- weights-bytes: exact integers for several sizes and dtypes, positional and keyword.
- multi-head: the layout documented in the notebook (`heads`, an nn.ModuleList of heads with
  `key`/`query`/`value`; `proj`, a Linear from n_head * head_size to n_embd); the probe records
  the student's own weights and outputs, and the judge rebuilds the output from those weights.
- sdpa-forward: course heads built from the case's weights are passed in; the probe records the
  output and whether `scaled_dot_product_attention` ran.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.base import CellSpec, Scorer, close, why_not
from autograder.checks.nb05 import attention

NOTEBOOK = "07_head_on_gpu.ipynb"


PROJECTIONS = ("key", "query", "value")


def _weights_of(head: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {name: head[name] for name in PROJECTIONS}


# ---- pick-device ---------------------------------------------------------------------------

SCENARIOS: dict[str, tuple[bool, bool, str]] = {
    # name: (cuda available, mps available, expected device type)
    "cuda only": (True, False, "cuda"),
    "mps only": (False, True, "mps"),
    "neither": (False, False, "cpu"),
    "cuda and mps": (True, True, "cuda"),
}


class PickDeviceSpec(CellSpec):
    notebook = NOTEBOOK
    grade_id = "pick-device"
    probe_module, probe_function = "nb07", "probe_pick_device"
    names = ("pick_device",)
    points = 2.0

    def cases(self) -> dict[str, Any]:
        return {"scenarios": dict(SCENARIOS)}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> Any:
        s = Scorer(self.grade_id)
        bad = []
        for name, (_, _, expected) in cases["scenarios"].items():
            got = observed.get(name)
            if not isinstance(got, dict) or got.get("type") != expected:
                shown = (
                    why_not(observed, name, None) if not isinstance(got, dict) else got.get("type")
                )
                bad.append(f"with {name} available it gave {shown}, expected {expected}")
        s.check("cuda if available, else mps, else cpu", 1, not bad, bad[0] if bad else "")
        if torch.cuda.is_available():
            here = "cuda"
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            here = "mps"
        else:
            here = "cpu"
        got = observed.get("this machine")
        ok = isinstance(got, dict) and got.get("is_device") and got.get("type") == here
        detail = f"expected torch.device('{here}') on this machine"
        if isinstance(got, dict) and not got.get("is_device"):
            detail = (
                f"returned {got.get('type')!r}, not a torch.device: wrap it in torch.device(...)"
            )
        s.check("returns a torch.device, the right one on this machine", 1, bool(ok), detail)
        return s.result


# ---- weights-bytes --------------------------------------------------------------------------

BYTES_CASES: dict[str, tuple[tuple, dict[str, Any]]] = {
    "B4_T8": ((4, 8), {}),
    "lecture config, 6 heads": ((64, 256, 6), {}),
    "bf16 positional": ((2, 1024, 6, "torch.bfloat16"), {}),
    "fp64 keyword": ((3, 5), {"n_head": 2, "dtype": "torch.float64"}),
    "fp16 keyword": ((1, 4096), {"dtype": "torch.float16"}),
    "T1": ((7, 1, 3), {}),
}
DEFAULT_GROUP = ["B4_T8", "lecture config, 6 heads", "T1"]
DTYPE_GROUP = ["bf16 positional", "fp64 keyword", "fp16 keyword"]


def expected_bytes(B: int, T: int, n_head: int = 1, dtype: str = "torch.float32") -> int:
    """Bytes of the (B, n_head, T, T) weights; the dtype by name, as the cases hold it."""
    torch_dtype = getattr(torch, dtype.removeprefix("torch."))
    return B * n_head * T * T * torch.empty((), dtype=torch_dtype).element_size()


class WeightsBytesSpec(CellSpec):
    notebook = NOTEBOOK
    grade_id = "weights-bytes"
    probe_module, probe_function = "nb07", "probe_weights_bytes"
    names = ("weights_bytes",)
    points = 2.0

    def cases(self) -> dict[str, Any]:
        return {"calls": dict(BYTES_CASES)}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> Any:
        s = Scorer(self.grade_id)
        for name, keys in (
            ("float32 by default: B x n_head x T x T x 4 bytes", DEFAULT_GROUP),
            ("n_head and dtype (bfloat16, float16, float64), positional or keyword", DTYPE_GROUP),
        ):
            bad = []
            for key in keys:
                args, kwargs = cases["calls"][key]
                want = expected_bytes(*args, **kwargs)
                got = observed.get(key)
                number = isinstance(got, (int, float)) and not isinstance(got, bool)
                if not (number and float(got).is_integer() and int(got) == want):
                    shown = why_not(observed, key, None) if key not in observed else repr(got)
                    bad.append(f"{key}: got {shown}, expected {want:,}")
            s.check(name, 1, not bad, bad[0] if bad else "")
        return s.result


# ---- multi-head -----------------------------------------------------------------------------

MH_CONFIGS: dict[str, tuple[int, int, int, int]] = {
    # name: (n_embd, n_head, head_size, block_size)
    "A": (24, 3, 8, 10),
    "B": (20, 4, 6, 9),  # n_head * head_size = 24 != n_embd: proj must map 24 -> 20
}
MH_INPUTS: dict[str, tuple[str, tuple[int, int]]] = {
    "A_main": ("A", (2, 7)),
    "A_BeqT": ("A", (4, 4)),
    "A_T1": ("A", (3, 1)),
    "A_full": ("A", (2, 10)),
    "B_main": ("B", (3, 9)),
    "B_short": ("B", (2, 5)),
}
MH_FUTURE_FROM = 3


def _mh_cases() -> dict[str, Any]:
    g = torch.Generator().manual_seed(707)
    xs = {
        k: torch.randn(b, t, MH_CONFIGS[c][0], generator=g) for k, (c, (b, t)) in MH_INPUTS.items()
    }
    future = xs["A_main"].clone()
    future[:, MH_FUTURE_FROM:] = torch.randn(future[:, MH_FUTURE_FROM:].shape, generator=g)
    xs["A_future"] = future
    return {"configs": dict(MH_CONFIGS), "inputs_of": dict(MH_INPUTS), "x": xs, "dropout_p": 0.3}


def multihead_reference(record: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
    """proj(concat of the heads' outputs), from the weights the probe recorded."""
    outs = []
    for head in record["heads"]:
        w = {}
        for name in ("key", "query", "value"):
            w[name] = torch.from_numpy(head[name]["weight"])
            bias = head[name]["bias"]
            w[name + "_bias"] = (
                torch.from_numpy(bias) if bias is not None else torch.zeros(w[name].shape[0])
            )
        outs.append(attention(x, w, bias=True))  # zero bias when the head has none
    cat = torch.cat(outs, dim=-1)  # (B,T,n_head*hs)
    proj = record["proj"]
    out = cat @ torch.from_numpy(proj["weight"]).double().T
    if proj["bias"] is not None:
        out = out + torch.from_numpy(proj["bias"]).double()
    return out  # (B,T,n_embd)


class MultiHeadSpec(CellSpec):
    notebook = NOTEBOOK
    grade_id = "multi-head"
    probe_module, probe_function = "nb07", "probe_multi_head"
    names = ("MultiHead",)
    points = 4.0
    dtype = "float32"

    def cases(self) -> dict[str, Any]:
        return _mh_cases()

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> Any:
        s = Scorer(self.grade_id)
        xs = cases["x"]
        # 1. layout
        problems = []
        for cfg, (n_embd, n_head, hs, _) in cases["configs"].items():
            rec = observed.get(f"layout_{cfg}")
            if not isinstance(rec, dict):
                key = f"build_{cfg}" if f"build_{cfg}!" in observed else f"layout_{cfg}"
                problems.append(why_not(observed, key, None))
                continue
            problems += _layout_problems(rec, n_embd, n_head, hs)
        s.check(
            "heads is an nn.ModuleList of n_head heads (key, query, value) and proj maps "
            "n_head * head_size back to n_embd",
            1,
            not problems,
            problems[0] if problems else "",
        )
        # 2. shapes, and the residual connection works
        bad = []
        for key, (cfg, (b, t)) in cases["inputs_of"].items():
            want = (b, t, cases["configs"][cfg][0])
            got, res = observed.get(key), observed.get(key + "_residual")
            if not (_is(got, want) and _is(res, want)):
                bad.append(
                    f"input {key}, expected {want}: {why_not(observed, key, np.zeros(want))}"
                )
        s.check(
            "returns (B,T,n_embd), so x + mh(x) works, for every size",
            1,
            not bad,
            bad[0] if bad else "",
        )
        # 3. the output from its own weights
        bad = []
        for key, (cfg, _) in cases["inputs_of"].items():
            rec = observed.get(f"layout_{cfg}")
            if not (isinstance(rec, dict) and _usable(rec)):
                bad.append("the layout above is needed to rebuild the output from your weights")
                break
            expected = multihead_reference(rec, xs[key])
            if not close(observed.get(key), expected, self.dtype):
                bad.append(f"input {key}: {why_not(observed, key, expected)}")
        s.check(
            "equals proj(concatenated head outputs) computed from its own weights",
            1,
            not bad,
            bad[0] if bad else "",
        )
        # 4. causal, and dropout off in eval mode
        main, future = observed.get("A_main"), observed.get("A_future")
        causal = (
            _is(main, None)
            and _is(future, main.shape)
            and bool(np.allclose(main[:, :MH_FUTURE_FROM], future[:, :MH_FUTURE_FROM], atol=1e-5))
        )
        ev = observed.get("dropout_eval")
        steady = False
        if (
            isinstance(ev, dict)
            and _is(ev.get("first"), None)
            and isinstance(ev.get("layout"), dict)
        ):
            first = torch.from_numpy(ev["first"])
            steady = close(ev.get("second"), first, self.dtype)
            if _usable(ev["layout"]):
                steady = steady and close(
                    ev["first"], multihead_reference(ev["layout"], xs["A_main"])
                )
        if not causal:
            detail = "earlier outputs changed when only later tokens changed (or the call failed)"
        else:
            detail = (
                "with dropout=0.3 in eval mode the output is random or differs from the heads' math"
            )
        s.check("causal, and dropout is off in eval mode", 1, causal and steady, detail)
        return s.result


def _is(value: Any, shape: tuple | None) -> bool:
    """An array, of the given shape when one is given."""
    return isinstance(value, np.ndarray) and (shape is None or value.shape == tuple(shape))


def _usable(rec: dict[str, Any]) -> bool:
    heads, proj = rec.get("heads") or [], rec.get("proj")
    if not heads or not isinstance(proj, dict) or not isinstance(proj.get("weight"), np.ndarray):
        return False
    return all(
        isinstance(h.get(n), dict) and isinstance(h[n].get("weight"), np.ndarray)
        for h in heads
        for n in ("key", "query", "value")
    )


def _layout_problems(rec: dict[str, Any], n_embd: int, n_head: int, hs: int) -> list[str]:
    problems = []
    if not rec.get("module_list"):
        problems.append(
            f"heads is a {rec.get('heads_type')}, not an nn.ModuleList: its parameters would be "
            "invisible to .parameters() and .to(device)"
        )
    heads = rec.get("heads") or []
    if len(heads) != n_head:
        problems.append(f"expected {n_head} heads, found {len(heads)}")
    for h in heads:
        for n in ("key", "query", "value"):
            w = h[n].get("weight") if isinstance(h.get(n), dict) else None
            if not (_is(w, (hs, n_embd)) and h[n].get("linear")):
                problems.append(f"each head's {n} must be nn.Linear({n_embd}, {hs})")
                break
    proj = rec.get("proj")
    pw = proj.get("weight") if isinstance(proj, dict) else None
    if not (isinstance(proj, dict) and proj.get("linear") and _is(pw, None)):
        problems.append("proj must be an nn.Linear")
    elif pw.shape != (n_embd, n_head * hs):
        problems.append(
            f"proj must map n_head * head_size = {n_head * hs} to n_embd = {n_embd}, "
            f"its weight is {tuple(pw.shape)}"
        )
    return problems


# ---- sdpa-forward ---------------------------------------------------------------------------

SDPA_CFG = (24, 10, 12)  # n_embd, head_size, block_size
SDPA_INPUTS = {"main": (3, 7), "BeqT": (5, 5), "T1": (2, 1), "full": (2, 12)}


class SdpaForwardSpec(CellSpec):
    notebook = NOTEBOOK
    grade_id = "sdpa-forward"
    probe_module, probe_function = "nb07", "probe_sdpa_forward"
    names = ("head_forward_sdpa",)
    points = 3.0
    dtype = "float32"

    def cases(self) -> dict[str, Any]:
        g = torch.Generator().manual_seed(717)
        n_embd, hs, block_size = SDPA_CFG

        def head(dropout: float) -> dict[str, Any]:
            w = {p: torch.randn(hs, n_embd, generator=g) * n_embd**-0.5 for p in PROJECTIONS}
            return {**w, "block_size": block_size, "dropout": dropout}

        heads = {"head": head(0.0), "dropping": head(0.3)}
        xs = {k: torch.randn(b, t, n_embd, generator=g) for k, (b, t) in SDPA_INPUTS.items()}
        return {**heads, "x": xs}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> Any:
        s = Scorer(self.grade_id)

        def expected_for(head: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
            return attention(x, _weights_of(head))

        def out_of(key: str) -> Any:
            rec = observed.get(key)
            return rec.get("out") if isinstance(rec, dict) else None

        bad = []
        for key, x in cases["x"].items():
            exp = expected_for(cases["head"], x)
            if not close(out_of(key), exp, self.dtype):
                source = observed if key not in observed else {key: out_of(key)}
                bad.append(f"input {key}: {why_not(source, key, exp)}")
        outputs_ok = s.check(
            "equals head(x) in eval mode (T < block_size, B == T, T = 1, T == block_size)",
            1,
            not bad,
            bad[0] if bad else "",
        )
        calls = [
            observed[k].get("sdpa_calls", 0)
            for k in [*cases["x"], "dropping"]
            if isinstance(observed.get(k), dict)
        ]
        used = bool(calls) and all(c > 0 for c in calls)
        s.check(
            "computed with torch.nn.functional.scaled_dot_product_attention",
            1,
            used,
            "" if used else "scaled_dot_product_attention was not called",
        )
        exp = expected_for(cases["dropping"], cases["x"]["main"])
        ok = close(out_of("dropping"), exp, self.dtype)
        detail = (
            "a head with dropout=0.3 left in training mode must still give its eval output "
            "(dropout_p=0)"
        )
        if "dropping" not in observed:
            detail = why_not(observed, "dropping", exp)
        s.check("no dropout: the eval-mode output even for a head in training mode", 1, ok, detail)
        if not outputs_ok:
            s.name(*self._scale_mistakes(cases, observed))
        return s.result

    def _scale_mistakes(self, cases: dict[str, Any], observed: dict[str, Any]) -> list[str]:
        found = []
        w = _weights_of(cases["head"])
        for mistake, scale in (
            ("no-scale", "none"),
            ("scale-by-C", "C"),
            ("scale-no-sqrt", "hs_no_sqrt"),
        ):
            if all(
                isinstance(observed.get(k), dict)
                and close(observed[k].get("out"), attention(x, w, scale=scale), self.dtype)
                for k, x in cases["x"].items()
            ):
                found.append(mistake)
        return found


SPECS: list[CellSpec] = [PickDeviceSpec(), WeightsBytesSpec(), MultiHeadSpec(), SdpaForwardSpec()]
