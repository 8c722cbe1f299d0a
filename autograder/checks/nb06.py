"""Checks of notebook 06, experiments: capture a head's weights, remove the mask, drop the value.

The probes (`autograder.probe.nb06`) build heads from the case weights (the course's `Head`
for `capture_attention`, the student's classes for the other two), run them and record
outputs, weights, hooks and parameter names. The judges recompute every reference from the
same weights, so nothing can pass by luck or by hard-coding a number.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from autograder.checks import reference
from autograder.checks.base import CellResult, CellSpec, Scorer, close, name_mistakes, why_not
from autograder.checks.evidence import (
    as_array,
    buffer_facts,
    device_errors,
    first_recovered,
    logits_for,
    on_meta_problem,
    projections,
    twice_problem,
)
from autograder.checks.properties import Evidence

NOTEBOOK = "06_experiments.ipynb"

# name -> (B, T, C, hs, block_size): distinct sizes, B == T, T = 1, T == block_size (with
# C == T, where x @ weights runs, and without); "diag" has hs, C >= T: the weights are
# recovered from its outputs.
SIZES: dict[str, tuple[int, int, int, int, int]] = {
    "B3_T5_C7_hs4": (3, 5, 7, 4, 8),
    "B4_T4_C6_hs3": (4, 4, 6, 3, 6),
    "T1": (2, 1, 5, 3, 4),
    "T_eq_block_C_eq_T": (2, 6, 6, 4, 6),
    "T_eq_block": (2, 5, 9, 4, 5),
    "diag": (3, 5, 12, 8, 8),
}
MAIN = "B3_T5_C7_hs4"
DIAG = "diag"
SQUARE = "T_eq_block_C_eq_T"  # C == T: x @ weights runs
GAIN = 0.6  # q, k of moderate size: no weight rounds to zero


def head_cases(seed: int, sizes: dict[str, tuple[int, int, int, int, int]]) -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    cases = {}
    for key, (B, T, C, hs, bs) in sizes.items():
        cases[key] = {
            "x": torch.randn(B, T, C, generator=g),
            "key": torch.randn(hs, C, generator=g) * GAIN * C**-0.5,
            "query": torch.randn(hs, C, generator=g) * GAIN * C**-0.5,
            "value": torch.randn(hs, C, generator=g) * C**-0.5,
            "block_size": bs,
        }
    return cases


# ---- the reference, for one case ---------------------------------------------------------


def weights(c: dict[str, Any], config: reference.Config = reference.HEAD) -> torch.Tensor:
    """Attention weights (B,T,T) of case c, from the reference."""
    q, k = (reference.project(c["x"], c, n, False) for n in ("query", "key"))
    hs, C = c["key"].shape
    return reference.weights(reference.raw_scores(q, k), config, hs, C)


def head_output(c: dict[str, Any], config: reference.Config = reference.HEAD) -> torch.Tensor:
    """The head's output for case c, from the reference."""
    return reference.attention(c["x"], c, config, int(c["block_size"]))


def _evidence(
    config: reference.Config, heads: dict, observed: dict, keys: tuple[str, ...], values: str
) -> Evidence:
    """Weights recovered from the first of `keys` whose output they explain."""
    c = heads[DIAG]
    ev = Evidence(config, head_size=c["key"].shape[0], n_embd=c["x"].shape[-1])
    outs, vals, logits = [], [], []
    for key in keys:
        x = heads[key]["x"]
        p = projections(x, heads[key])
        outs.append(observed.get(key))
        vals.append({name: {"v": p["v"], "x": x.double().numpy()}[name] for name in values})
        logits.append(logits_for(x, heads[key]))
    first_recovered(ev, outs, vals, logits)
    return ev


def _peek_case() -> dict[str, Any]:
    g = torch.Generator().manual_seed(606)
    vocab = 16
    return {
        "tokens": torch.randint(0, vocab, (20_000,), generator=g),
        "vocab": vocab,
        "block_size": 8,
        "n_embd": 32,
        "head_size": 16,
        "steps": 100,  # a head that sees the future reads the next token well before this
        "batch_size": 32,
        "eval_batch": 256,
        "lr": 1e-2,
        "seed": 0,
    }


def _group_check(
    scorer: Scorer,
    name: str,
    points: float,
    keys: list[str],
    observed: dict[str, Any],
    expected: dict[str, Any],
) -> bool:
    bad = [k for k in keys if not close(observed.get(k), expected[k])]
    detail = f"on case {bad[0]}: {why_not(observed, bad[0], expected[bad[0]])}" if bad else ""
    return scorer.check(name, points, not bad, detail)


def _causal_weights(observed: dict[str, Any], keys: list[str]) -> tuple[bool, str]:
    """(ok, why not): every case's weights are (B,T,T), zero above the diagonal, rows sum to 1."""
    for key in keys:
        wei = observed.get(key)
        if not isinstance(wei, np.ndarray) or wei.ndim != 3 or wei.shape[1] != wei.shape[2]:
            return False, f"on case {key}: not a (B,T,T) tensor"
        upper = np.triu(np.ones(wei.shape[1:], dtype=bool), 1)
        if np.abs(wei[:, upper]).max(initial=0.0) > 1e-6:
            return False, f"on case {key}: weights above the diagonal (future)"
        if not np.allclose(wei.sum(-1), 1.0, atol=1e-4):
            return False, f"on case {key}: rows do not sum to one"
    return True, ""


def _left_as_it_was(observed: dict, keys: list[str], outputs: dict, expected: dict) -> str:
    """Why the head is not as it was after capture_attention ('' when it is)."""
    failed = [k for k in keys if k not in observed]
    if failed:
        why = why_not(observed, failed[0], expected[failed[0]])
        return f"the call did not return on case {failed[0]}: {why}"
    if any(observed.get(k + ":hooks", 1) != 0 for k in keys):
        return "a hook is still attached after the call: keep its handle and .remove() it"
    if any(observed.get(k + ":class") is not True for k in keys):
        return "the Head class was changed: capture the weights without editing it"
    if any(not close(observed.get(k + ":out"), outputs[k]) for k in keys):
        return "the head computes something else after the call"
    return ""


# ---- capture-attention ---------------------------------------------------------------------


class CaptureAttention(CellSpec):
    notebook = NOTEBOOK
    grade_id = "capture-attention"
    probe_module, probe_function = "nb06", "probe_capture_attention"
    names = ("capture_attention",)
    points = 5.0

    sizes = SIZES
    seed = 61

    def cases(self) -> dict[str, Any]:
        heads = head_cases(self.seed, self.sizes)
        unmasked = dict(head_cases(self.seed + 1, {MAIN: SIZES[MAIN]})[MAIN])
        unmasked["causal"] = False
        heads["unmasked"] = unmasked
        return {"heads": heads}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        heads = cases["heads"]
        configs = {
            k: reference.HEAD if c.get("causal", True) else reference.UNMASKED
            for k, c in heads.items()
        }
        expected = {k: weights(c, configs[k]) for k, c in heads.items()}
        others = [k for k in heads if k not in (MAIN, "unmasked")]
        ok = _group_check(
            scorer,
            "returns the head's own (B,T,T) weights, (B,T,C,hs) = (3,5,7,4)",
            1.0,
            [MAIN],
            observed,
            expected,
        )
        ok &= _group_check(
            scorer, "other sizes: B == T, T = 1, T == block_size", 1.0, others, observed, expected
        )
        causal_ok, detail = _causal_weights(observed, [MAIN, *others])
        ok &= scorer.check(
            "causal weights: nothing above the diagonal, rows sum to one", 1.0, causal_ok, detail
        )
        ok &= _group_check(
            scorer,
            "captures what the head really computed (tried on a head without the mask)",
            1.0,
            ["unmasked"],
            observed,
            expected,
        )
        outputs = {k: head_output(c, configs[k]) for k, c in heads.items()}
        detail = _left_as_it_was(observed, list(heads), outputs, expected)
        scorer.check(
            "leaves the head as it was: no hook left behind, class and output unchanged",
            1.0,
            not detail,
            detail,
        )
        c = heads[MAIN]
        ev = Evidence(reference.HEAD, head_size=c["key"].shape[0], n_embd=c["x"].shape[-1])
        W = as_array(observed.get(MAIN))
        if W is not None and W.shape == tuple(expected[MAIN].shape):
            ev.weights, ev.logits = W, logits_for(c["x"], c)
        name_mistakes(scorer, ev)
        return scorer.result


# ---- unmasked-head ---------------------------------------------------------------------------


class UnmaskedHeadSpec(CellSpec):
    notebook = NOTEBOOK
    grade_id = "unmasked-head"
    probe_module, probe_function = "nb06", "probe_unmasked_head"
    names = ("UnmaskedHead",)
    points = 5.0

    sizes = SIZES
    seed = 63

    def cases(self) -> dict[str, Any]:
        return {"heads": head_cases(self.seed, self.sizes), "peek": _peek_case()}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        heads = cases["heads"]
        expected = {k: head_output(c, reference.UNMASKED) for k, c in heads.items()}
        others = [k for k in heads if k != MAIN]
        ok = _group_check(
            scorer,
            "output equals the unmasked head's for the same weights, (B,T,C,hs) = (3,5,7,4)",
            1.0,
            [MAIN],
            observed,
            expected,
        )
        ok &= _group_check(
            scorer, "other sizes: B == T, T = 1, T == block_size", 1.0, others, observed, expected
        )
        detail = ""
        for key, c in heads.items():
            wei = observed.get(key + ":wei")
            ref = weights(c, reference.UNMASKED)
            if not close(wei, ref):
                detail = f"on case {key}: the weights reaching self.dropout " + (
                    "were not found (keep dropout on the weights)" if wei is None else "differ"
                )
                break
            T = wei.shape[-1]
            if T > 1 and np.abs(wei[:, np.triu(np.ones((T, T), dtype=bool), 1)]).min() <= 0:
                detail = f"on case {key}: the strict upper triangle still has zeros: still masked"
                break
        ok &= scorer.check(
            "the weights see the future: nonzero above the diagonal, rows sum to one",
            1.0,
            not detail,
            detail,
        )
        peek = observed.get("peek")
        log_v = math.log(cases["peek"]["vocab"])
        if isinstance(peek, dict) and {"teacher", "causal"} <= set(peek):
            teacher, causal = float(peek["teacher"]), float(peek["causal"])
            peeks = teacher < 0.5 * log_v and causal > teacher + 1.5
            detail = (
                f"trained on random tokens (ln V = {log_v:.2f}): teacher-forced loss "
                f"{teacher:.2f}, causal loss {causal:.2f}; a head that sees the future gets "
                "the first far below ln V and the second far above it"
            )
        else:
            peeks, detail = (
                False,
                "could not train a model with it: " + why_not(observed, "peek", 0.0),
            )
        ok &= scorer.check(
            "trained: it reads the next token (teacher-forced loss far below its causal loss)",
            2.0,
            peeks,
            detail,
        )
        ev = _evidence(reference.UNMASKED, heads, observed, (DIAG,), ("v", "x"))
        name_mistakes(scorer, ev)
        return scorer.result


# ---- value-ablation ----------------------------------------------------------------------------


class NoValueHeadSpec(CellSpec):
    notebook = NOTEBOOK
    grade_id = "value-ablation"
    probe_module, probe_function = "nb06", "probe_value_ablation"
    names = ("NoValueHead",)
    points = 4.0

    sizes = SIZES
    seed = 64

    def cases(self) -> dict[str, Any]:
        g = torch.Generator().manual_seed(self.seed)
        idx = torch.randint(0, 11, (3, 5), generator=g)
        return {"heads": head_cases(self.seed, self.sizes), "idx": idx, "property": MAIN}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        heads = cases["heads"]
        expected = {k: head_output(c, reference.NO_VALUE) for k, c in heads.items()}
        _group_check(
            scorer,
            "output equals weights @ x for the same key and query, (B,T,C,hs) = (3,5,7,4)",
            1.0,
            [MAIN],
            observed,
            expected,
        )
        written = self._other_sizes(scorer, observed, expected)
        buffer = self._parts(scorer, heads, observed)
        self._in_a_model(scorer, heads, observed)
        keys = tuple(k for k in (DIAG, SQUARE) if k in heads)
        ev = _evidence(reference.NO_VALUE, heads, observed, keys, ("x",))
        ev.crop = _crop(heads, observed, expected)
        ev.buffer, ev.mask_written = buffer, written
        ev.device_errors = device_errors(observed, buffer, as_array(observed.get(MAIN)) is not None)
        name_mistakes(scorer, ev)
        return scorer.result

    def _other_sizes(self, scorer: Scorer, observed: dict, expected: dict) -> bool | None:
        """The other sizes, and a second call on one head; whether that call found the mask
        or the output changed."""
        others = [k for k in expected if k != MAIN]
        bad = [k for k in others if not close(observed.get(k), expected[k])]
        detail = f"on case {bad[0]}: {why_not(observed, bad[0], expected[bad[0]])}" if bad else ""
        written, why = twice_problem(observed.get("twice"), close)
        scorer.check(
            "other sizes: B == T, T = 1, T == block_size; two calls on one head agree",
            1.0,
            not bad and written is not True,
            detail or (why if written else ""),
        )
        return written

    def _parts(self, scorer: Scorer, heads: dict, observed: dict) -> dict[str, bool] | None:
        """key and query only, and the tril buffer: what the mask is, for the properties."""
        detail = ""
        for key, c in heads.items():
            params = observed.get(key + ":params")
            hs, C = c["key"].shape
            if not isinstance(params, dict):
                detail = f"on case {key}: could not build it: {why_not(observed, key, 0)}"
                break
            extra = {n: s for n, s in params.items() if not n.startswith(("key.", "query."))}
            if extra or sum(math.prod(s) for s in params.values()) != 2 * C * hs:
                names = ", ".join(extra) or ", ".join(params)
                detail = (
                    f"expected only key and query (2 x C x hs = {2 * C * hs} weights), "
                    f"found {names}"
                )
                break
        buffer = buffer_facts(observed.get("structure"), observed.get("tril_meta"))
        if not detail and not (buffer and buffer["registered"] and buffer["follows_device"]):
            detail = (
                "tril must be a buffer that follows .to(): "
                "self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))"
            )
        scorer.check(
            "no value projection: only key and query (2 x C x hs parameters), and the tril buffer",
            1.0,
            not detail,
            detail,
        )
        return buffer

    def _in_a_model(self, scorer: Scorer, heads: dict, observed: dict) -> None:
        detail = ""
        if observed.get("model") != [3, 5, 11]:
            detail = "inside CharModel(..., residual=True) x + head(x) failed: " + why_not(
                observed, "model", np.zeros((3, 5, 11))
            )
        else:
            detail = on_meta_problem(observed, list(heads[MAIN]["x"].shape))
        scorer.check(
            "n_embd wide, so x + head(x) works in a residual model, on the input's device",
            1.0,
            not detail,
            detail,
        )


def _crop(heads: dict, observed: dict, expected: dict) -> dict[str, bool]:
    """Right (or running) at T == block_size, and at the shorter T."""
    full = [k for k, c in heads.items() if c["x"].shape[1] == c["block_size"]]
    short = [k for k in heads if k not in full]
    ran_full = all(as_array(observed.get(k)) is not None for k in full)
    right_full = all(close(observed.get(k), expected[k]) for k in full)
    ran_short = all(as_array(observed.get(k)) is not None for k in short)
    right_short = all(close(observed.get(k), expected[k]) for k in short)
    return {"full_ok": ran_full, "short_ok": ran_short and (right_short or not right_full)}


SPECS = [CaptureAttention(), UnmaskedHeadSpec(), NoValueHeadSpec()]
