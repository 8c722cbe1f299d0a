"""The one mistake matcher: each catalog id is a property of what an answer produced.

A judge turns what the probe recorded into `Evidence` (the attention weights the answer
applied, recovered from its outputs where it returns none; what it aggregated; whether a
sequence's output depends on another sequence; the buffer before and after a forward; ...).
`diagnose(evidence)` returns every catalog id whose property holds, in catalog order. A
property never compares with one enumerated wrong implementation: loops, einsum, torch.where
or any other way of writing a mistake leave the same property behind. `confirmed(evidence)`
keeps of those only what the reference, with the switches of the catalog on, reproduces:
two mistakes in one answer can hide each other's property or together show a third's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from autograder.checks.reference import (
    AVERAGE,
    SWITCHES,
    Config,
    Scale,
    visible,
    weights,
)

ZERO = 1e-5  # below this a weight counts as masked (recovered weights carry ~1e-6 noise)
SUM_TOL = 1e-3  # a row or column "sums to one" within this
FIT_TOL = 2e-2  # relative residual of a logit fit that counts as an explanation
SCALE_TOL = 0.03  # relative distance of a fitted scale from 1/sqrt(hs), 1/sqrt(C), 1/hs or 1


@dataclass
class Evidence:
    """What a judge learned about one answer; None means unknown (never means 'fine')."""

    expected: Config
    head_size: int | None = None
    n_embd: int | None = None
    weights: np.ndarray | None = None  # (...,T,T) the attention weights the answer applied
    scores: np.ndarray | None = None  # (...,T,T) raw scores the answer returned
    logits: dict[str, np.ndarray] = field(default_factory=dict)  # score form -> (...,T,T)
    aggregate: str | None = None  # "v" or "x": what the weights were applied to
    product: str | None = None  # "wei@v" or "v@wei"
    mixes_batch: bool | None = None  # an output changed when only another sequence changed
    affine: bool | None = None  # a bias term: -x does not give +-(the output of x)
    n_params: int | None = None  # a parameter count the answer wrote down
    shapes: dict[str, tuple[int, ...]] | None = None  # a shape table the answer wrote down
    sizes: tuple[int, int, int, int] | None = None  # (B, T, C, hs) of that table or count
    counts: dict[int, int] | None = None  # T -> nonzero weights the answer counted
    param_names: list[str] | None = None  # the module's parameters
    # {"registered", "follows_device", "in_state_dict", "parameter"}: what the mask is
    buffer: dict[str, bool] | None = None
    crop: dict[str, bool] | None = None  # {"full_ok": T == block_size, "short_ok": T < block}
    dropout: dict[str, Any] | None = None  # {"on_weights", "off_in_eval", "linked"}
    device_errors: bool | None = None  # fails only away from one fixed device
    mask_written: bool | None = None  # the shared mask changed during a forward
    # what the weights were read from, for `confirmed`: (the answer's output, the values it
    # may have aggregated), or (the weights the answer returned, None)
    source: tuple[np.ndarray, dict[str, np.ndarray] | None] | None = None


# ---- observations shared by the properties ------------------------------------------------


def mask_form(weights: np.ndarray | None) -> str | None:
    """Which positions each row sees: a reference.MaskForm, or None when no form fits.

    A form fits when every weight outside it is zero (masked) and every row it lets see
    something keeps some weight; the smallest form that fits is the answer, so that a
    weight that underflows inside a row (a large score elsewhere) never hides the form.
    Rows that see nothing under a form (row 0 of 'strict-lower', the last row of
    'strict-upper') are skipped, whatever they hold; rows holding NaN are skipped too.
    """
    if weights is None or weights.ndim < 2 or weights.shape[-1] < 2:
        return None
    W = weights.reshape(-1, *weights.shape[-2:])
    T = W.shape[-1]
    seen = np.isfinite(W) & (np.abs(np.nan_to_num(W, posinf=1.0)) > ZERO)
    defined = ~np.isnan(W).any(-1)  # (N,T)
    for form in ("strict-lower", "strict-upper", "causal", "upper", "none"):
        pattern = visible(T, form).numpy()  # type: ignore[arg-type]
        rows = defined & pattern.any(-1)[None, :]
        outside_zero = np.all((~seen | pattern[None])[rows])
        if rows.any() and outside_zero and bool(np.all(seen[rows].any(-1))):
            return form
    return None


def seeing_rows(weights: np.ndarray) -> np.ndarray:
    """(T,) bool: the rows that see some position under the weights' mask form (all rows
    when no form fits)."""
    T = weights.shape[-1]
    form = mask_form(weights)
    if form is None:
        return np.ones(T, dtype=bool)
    return visible(T, form).numpy().any(-1)  # type: ignore[arg-type]


def sums_to_one(weights: np.ndarray, axis: int) -> bool:
    """Every complete line along `axis` sums to one (lines holding NaN are skipped)."""
    if weights.shape[axis] < 2:
        return False
    W = np.where(np.isneginf(weights), 0.0, weights)
    sums = W.sum(axis)
    ok = np.isfinite(sums)
    return bool(ok.any() and np.all(np.abs(sums[ok] - 1.0) < SUM_TOL))


def normalised_axes(weights: np.ndarray) -> set[int]:
    """Axes (-1, -2, or 0 for a batch) along which the weights sum to one."""
    axes = {a for a in (-1, -2) if sums_to_one(weights, a)}
    if weights.ndim >= 3 and weights.shape[0] >= 2 and sums_to_one(weights, 0):
        axes.add(0)
    return axes


@dataclass(frozen=True)
class Fit:
    form: str  # the score form whose multiple the logits are ("q@k", "k@q", ...)
    scale: float
    residual: float


def logit_fit(ev: Evidence) -> Fit | None:
    """The score form and factor that explain the answer's logits, when one does."""
    if ev.scores is not None:
        return _fit_raw(ev.scores, ev.logits)
    if ev.weights is None or ev.weights.shape[-1] < 2:
        return None
    W = ev.weights
    form = mask_form(W)
    if form in (None, "none"):
        form = ev.expected.mask
    usable = visible(W.shape[-1], form).numpy() & np.isfinite(W) & (W > ZERO)  # type: ignore
    logs = np.log(np.where(usable, W, 1.0))
    best: Fit | None = None
    for name, X in ev.logits.items():
        if X.shape != W.shape:
            continue
        for axis in (-1, -2):
            fit = _fit_lines(logs, X, usable, axis, name)
            if fit is not None and (best is None or fit.residual < best.residual):
                best = fit
    return best if best is not None and best.residual < FIT_TOL else None


def _fit_lines(logs: np.ndarray, X: np.ndarray, usable: np.ndarray, axis: int, name: str):
    """Fit log W = a * X + (a constant per line along `axis`) on the usable entries."""
    y, x, u = (np.moveaxis(a, axis, -1) for a in (logs, X, usable))
    n = u.sum(-1, keepdims=True)
    if not (n >= 2).any():
        return None
    safe = np.maximum(n, 1)
    yc = np.where(u, y - np.where(u, y, 0).sum(-1, keepdims=True) / safe, 0.0)
    xc = np.where(u, x - np.where(u, x, 0).sum(-1, keepdims=True) / safe, 0.0)
    sxx, sxy, syy = (xc * xc).sum(), (xc * yc).sum(), (yc * yc).sum()
    if sxx < 1e-12 or syy < 1e-12:
        return None
    a = sxy / sxx
    return Fit(name, float(a), float(np.sqrt(max(syy - a * sxy, 0.0) / syy)))


def _fit_raw(scores: np.ndarray, logits: dict[str, np.ndarray]) -> Fit | None:
    R = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(R).all() or not (R * R).sum():
        return None
    best: Fit | None = None
    for name, X in logits.items():
        if X.shape != R.shape or not (X * X).sum():
            continue
        a = float((R * X).sum() / (X * X).sum())
        fit = Fit(name, a, float(np.linalg.norm(R - a * X) / np.linalg.norm(R)))
        if best is None or fit.residual < best.residual:
            best = fit
    return best if best is not None and best.residual < FIT_TOL else None


def fitted_scale(ev: Evidence) -> Scale | None:
    """The Scale whose factor the logits were multiplied by (for cells scaled by 1/sqrt(hs))."""
    fit = logit_fit(ev)
    if fit is None or ev.head_size is None or ev.n_embd is None:
        return None
    for scale in Scale:
        factor = scale.factor(ev.head_size, ev.n_embd)
        if abs(fit.scale - factor) <= SCALE_TOL * factor:
            return scale
    return None


# ---- one property per catalog id --------------------------------------------------------------


def _mask_seen(ev: Evidence) -> str | None:
    if ev.expected.mask != "causal":
        return None
    form = mask_form(ev.weights)
    return form if form != "causal" else None


def loop_exclusive(ev: Evidence) -> bool:
    """Rows t >= 1 see exactly positions 0..t-1, whatever row 0 holds."""
    return _mask_seen(ev) == "strict-lower"


def triu_mask(ev: Evidence) -> bool:
    """Row t sees exactly positions t..T-1: it depends only on positions >= t."""
    return _mask_seen(ev) == "upper"


def mask_polarity(ev: Evidence) -> bool:
    """Rows t < T-1 see exactly positions t+1..T-1: everything but the future is masked."""
    return _mask_seen(ev) == "strict-upper"


def fill_zero(ev: Evidence) -> bool:
    """Every position keeps weight and the future gets the same weight at every future
    position (a finite fill); or a count of nonzero weights that is all T x T entries."""
    if ev.expected.mask != "causal":
        return False
    if ev.counts:
        return any(n == T * T for T, n in ev.counts.items() if T > 1)
    W = ev.weights
    if W is None or W.shape[-1] < 2 or not np.isfinite(W).all() or mask_form(W) != "none":
        return False
    future = np.triu(np.ones(W.shape[-2:], dtype=bool), 1)
    rows = future.any(-1)
    for t in np.flatnonzero(rows):
        ahead = W[..., t, future[t]]
        if not (ahead > ZERO).all() or np.ptp(ahead, -1).max() > SUM_TOL * ahead.max():
            return False
    return True


def mask_after_softmax(ev: Evidence) -> bool:
    """A softmax over every position, masked afterwards: under whatever positions the rows
    see (any mask form), the weights outside are exactly zero, rows that see part of the
    sequence sum below one, and rows that see all of it (if any) sum to one."""
    if ev.expected.mask != "causal" or ev.weights is None or ev.weights.shape[-1] < 2:
        return False
    W = np.where(np.isneginf(ev.weights), 0.0, ev.weights)
    form = mask_form(W)
    if form in (None, "none") or not np.isfinite(W).all() or (W < -ZERO).any():
        return False
    pattern = visible(W.shape[-1], form).numpy()  # type: ignore[arg-type]
    sees_all, sees_some = pattern.all(-1), pattern.any(-1)
    sums = W.sum(-1)
    part = sums[..., sees_some & ~sees_all]
    if (sums[..., sees_some] > 1 + SUM_TOL).any() or not (part < 1 - SUM_TOL).any():
        return False
    return bool(np.all(np.abs(sums[..., sees_all] - 1) < SUM_TOL))


def softmax_dim(ev: Evidence) -> bool:
    """The weights sum to one over the query axis (or the batch axis), not over the keys."""
    if ev.weights is None or ev.weights.shape[-1] < 2:
        return False
    axes = normalised_axes(ev.weights)
    return -1 not in axes and bool(axes & {-2, 0})


def tril_unnormalised(ev: Evidence) -> bool:
    """Non-negative weights with some row summing above one, normalised along no axis; rows
    that see nothing under the mask form (row 0 of a loop that stops early) are left out."""
    W = ev.weights
    if W is None or W.shape[-1] < 2 or not np.isfinite(W).all() or (W < -ZERO).any():
        return False
    W = W[..., seeing_rows(W), :]
    return bool((W.sum(-1) > 1 + SUM_TOL).any()) and not normalised_axes(W)


def transpose_batch(ev: Evidence) -> bool:
    """A sequence's output depends on other sequences; or a shape table whose k_T moved the
    batch axis."""
    if ev.mixes_batch:
        return True
    if ev.shapes is None or ev.sizes is None:
        return False
    B, T, _, hs = ev.sizes
    return ev.shapes.get("k_T") in {(T, B, hs), (hs, T, B)}


def swapped_qk(ev: Evidence) -> bool:
    """The logits are a multiple of k @ q^T: row i holds key i against every query."""
    fit = logit_fit(ev)
    return fit is not None and fit.form == "k@q" and ev.expected.scores == "q@k"


def tied_qk(ev: Evidence) -> bool:
    """The logits come from one projection on both sides (q @ q^T, k @ k^T, v @ v^T), or raw
    scores that are symmetric."""
    if ev.scores is not None and ev.scores.shape[-1] > 1 and np.isfinite(ev.scores).all():
        S = ev.scores
        if np.allclose(S, np.swapaxes(S, -1, -2), rtol=1e-4, atol=1e-5):
            return True
    fit = logit_fit(ev)
    return fit is not None and fit.form in ("q@q", "k@k", "v@v")


def bias(ev: Evidence) -> bool:
    """Affine terms: -x does not mirror the output, a parameter named bias, or a count of
    3 x C x hs weights plus hs per biased projection."""
    if ev.affine or (ev.param_names and any(n.endswith("bias") for n in ev.param_names)):
        return True
    if ev.n_params is None or ev.sizes is None:
        return False
    _, _, C, hs = ev.sizes
    return ev.n_params in {3 * C * hs + m * hs for m in (1, 2, 3)}


def _scale_is(ev: Evidence, scale: Scale) -> bool:
    return ev.expected.scale == Scale.HEAD and fitted_scale(ev) == scale


def no_scale(ev: Evidence) -> bool:
    """The logits are the raw scores: factor 1."""
    return _scale_is(ev, Scale.NONE)


def scale_by_c(ev: Evidence) -> bool:
    """The logits are the scores times 1/sqrt(C), the embedding width."""
    return _scale_is(ev, Scale.EMBED)


def scale_no_sqrt(ev: Evidence) -> bool:
    """The logits are the scores times 1/head_size."""
    return _scale_is(ev, Scale.HEAD_NO_SQRT)


def aggregate_x(ev: Evidence) -> bool:
    """The output is weights @ x (C wide); or a shape table whose out is (B, T, C)."""
    if ev.expected.aggregate == "v" and ev.aggregate == "x":
        return True
    if ev.shapes is None or ev.sizes is None:
        return False
    B, T, C, hs = ev.sizes
    return C != hs and ev.shapes.get("out") == (B, T, C)


def v_at_wei(ev: Evidence) -> bool:
    """The weights multiply from the wrong side: values @ weights, or weights^T @ values."""
    return ev.expected.product == "wei@v" and ev.product == "v@wei"


def tril_not_buffer(ev: Evidence) -> bool:
    """The mask is no buffer: a plain attribute (or none), missing from the state_dict and
    left behind by .to(); a parameter; or a buffer that stays behind when the module moves.
    A buffer registered with persistent=False is missing from the state_dict, and right."""
    b = ev.buffer
    if b is None:
        return False
    if b.get("registered"):
        return not b.get("follows_device", True)
    if b.get("parameter"):
        return True
    return not b.get("in_state_dict") and not b.get("follows_device")


def tril_not_cropped(ev: Evidence) -> bool:
    """Right (or at least running) at T == block_size, failing or wrong at T < block_size."""
    c = ev.crop
    return c is not None and bool(c.get("full_ok")) and not c.get("short_ok")


def dropout_misplaced(ev: Evidence) -> bool:
    """Dropout does not act on the weights only, or stays on in eval mode."""
    d = ev.dropout
    if d is None:
        return False
    placed = d.get("on_weights", True) and d.get("off_in_eval", True)
    return not placed or d.get("linked") is False


def hardcoded_device(ev: Evidence) -> bool:
    """Runs on one device and fails on another (a device named in the code)."""
    return bool(ev.device_errors)


def mask_in_place(ev: Evidence) -> bool:
    """The shared mask, or the output for the same input, changed during a forward."""
    return bool(ev.mask_written)


PROPERTIES: dict[str, Callable[[Evidence], bool]] = {
    "loop-exclusive": loop_exclusive,
    "tril-unnormalised": tril_unnormalised,
    "transpose-batch": transpose_batch,
    "swapped-qk": swapped_qk,
    "tied-qk": tied_qk,
    "bias": bias,
    "triu-mask": triu_mask,
    "mask-polarity": mask_polarity,
    "fill-zero": fill_zero,
    "mask-after-softmax": mask_after_softmax,
    "softmax-dim": softmax_dim,
    "no-scale": no_scale,
    "scale-by-C": scale_by_c,
    "scale-no-sqrt": scale_no_sqrt,
    "aggregate-x": aggregate_x,
    "v-at-wei": v_at_wei,
    "tril-not-buffer": tril_not_buffer,
    "tril-not-cropped": tril_not_cropped,
    "dropout-misplaced": dropout_misplaced,
    "hardcoded-device": hardcoded_device,
    "mask-in-place": mask_in_place,
}


def diagnose(ev: Evidence) -> list[str]:
    """Every catalog id whose property holds for this evidence, in catalog order."""
    return [mistake for mistake, holds in PROPERTIES.items() if holds(ev)]


# ---- confirmation: the reference with the switches on gives what the answer gave ---------------

# ids whose switch `replay` can compute from the evidence alone (the score forms, the values),
# each with the ways its switch is written (a softmax over the queries or over the batch, ...)
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "loop-exclusive": [SWITCHES["loop-exclusive"]],
    "triu-mask": [SWITCHES["triu-mask"]],
    "mask-polarity": [SWITCHES["mask-polarity"]],
    "fill-zero": [SWITCHES["fill-zero"]],
    "mask-after-softmax": [SWITCHES["mask-after-softmax"]],
    "softmax-dim": [{"softmax_dim": -2}, {"softmax_dim": 0}],
    "tril-unnormalised": [SWITCHES["tril-unnormalised"]],
    "no-scale": [SWITCHES["no-scale"]],
    "scale-by-C": [SWITCHES["scale-by-C"]],
    "scale-no-sqrt": [SWITCHES["scale-no-sqrt"]],
    "swapped-qk": [SWITCHES["swapped-qk"]],
    "tied-qk": [{"scores": "q@q"}, {"scores": "k@k"}],
    "aggregate-x": [SWITCHES["aggregate-x"]],
    "v-at-wei": [SWITCHES["v-at-wei"]],
}
EXPLAIN_SIZE = 2  # mistakes combined at most in one explanation
REPLAY_RTOL, REPLAY_ATOL = 1e-3, 1e-4


def replay(ev: Evidence, config: Config) -> tuple[str, np.ndarray] | None:
    """The matrix an answer made like the reference with `config` applies to its values, and
    which values ("v", "x"; "weights" for a cell that returns its weights); None when the
    evidence cannot tell (a score form it lacks). Rows that see nothing are NaN."""
    source = _source(ev)
    if source is None:
        return None
    observed, values = source
    if config.scores in ev.logits:
        S = ev.logits[config.scores]
    elif ev.expected == AVERAGE and config.scores == "q@k" and observed.ndim >= 2:
        S = np.zeros(observed.shape[:-1] + (observed.shape[-2],))  # averages: equal scores
    else:
        return None
    S = np.asarray(S, dtype=np.float64)
    if S.ndim < 2 or S.shape[config.softmax_dim] < 2:
        return None  # a softmax along an axis of one normalises nothing: not that mistake
    hs, C = ev.head_size or 1, ev.n_embd or 1
    wei = weights(torch.from_numpy(S), config, hs, C).numpy()
    if values is None:
        return "weights", wei
    left = np.swapaxes(wei, -1, -2) if config.product == "v@wei" else wei  # out = left @ values
    return config.aggregate, left


def _source(ev: Evidence) -> tuple[np.ndarray, dict[str, np.ndarray] | None] | None:
    """What the weights were read from: the output they were recovered from, or the weights
    the answer returned itself."""
    if ev.source is not None:
        return ev.source
    return (ev.weights, None) if ev.weights is not None else None


def applied(ev: Evidence) -> dict[str, np.ndarray]:
    """The matrices the answer applied, by what they multiply: out = M @ values (exactly, from
    values at least T wide), or the weights it returned."""
    source = _source(ev)
    if source is None:
        return {}
    out, values = source
    if values is None:
        return {"weights": np.asarray(out, dtype=np.float64)}
    out = np.asarray(out, dtype=np.float64)
    found = {}
    for name, V in values.items():
        V = np.asarray(V, dtype=np.float64)
        if out.ndim != 3 or V.shape[:2] != out.shape[:2] or V.shape[-1] != out.shape[-1]:
            continue
        if V.shape[-1] < out.shape[1]:
            continue  # too narrow to tell the weights apart
        M = np.nan_to_num(out) @ np.linalg.pinv(V)
        scale = max(1.0, float(np.abs(np.nan_to_num(out)).max()))
        if np.allclose(M @ V, out, rtol=REPLAY_RTOL, atol=REPLAY_ATOL * scale, equal_nan=True):
            found[name] = M
    return found


def _same(expected: np.ndarray, answer: np.ndarray) -> bool:
    """The answer's matrix equals the replay wherever the replay is defined (a row that sees
    nothing is NaN there, and may hold anything in the answer)."""
    if expected.shape != answer.shape:
        return False
    defined = np.isfinite(expected)
    if not defined.any() or not np.isfinite(answer[defined]).all():
        return False
    return bool(np.allclose(answer[defined], expected[defined], rtol=REPLAY_RTOL, atol=REPLAY_ATOL))


def explanations(ev: Evidence) -> list[frozenset[str]]:
    """The smallest sets of catalog mistakes (at most EXPLAIN_SIZE) with which the reference
    applies exactly the weights the answer applied; [] when none does (a mistake outside the
    catalog, or nothing to compare)."""
    matrices = applied(ev)
    if not matrices:
        return []
    ids = [m for m in VARIANTS if any(_changes(ev.expected, sw) for sw in VARIANTS[m])]
    for size in range(EXPLAIN_SIZE + 1):
        found = []
        for combo in itertools.combinations(ids, size):
            for switches in itertools.product(*(VARIANTS[m] for m in combo)):
                fields = [f for sw in switches for f in sw]
                if len(fields) != len(set(fields)):
                    continue  # two mistakes of one part (two masks) cannot meet
                config = replace(ev.expected, **{k: v for sw in switches for k, v in sw.items()})
                made = replay(ev, config)
                if made is not None and made[0] in matrices and _same(made[1], matrices[made[0]]):
                    found.append(frozenset(combo))
                    break
        if found:
            return found
    return []


def _changes(config: Config, switch: dict[str, Any]) -> bool:
    return any(getattr(config, field) != value for field, value in switch.items())


def confirmed(ev: Evidence) -> list[str]:
    """The catalog ids to name: every id whose property holds (`diagnose`), except that where
    the reference can replay the answer (`ev.source`), an id read off the weights is named
    only when it belongs to every smallest set of mistakes that reproduces the answer's output
    exactly. A mistake hidden by another (its property masked) is then left unnamed, and so
    is one the combination only seems to show; an answer nothing in the catalog reproduces
    keeps the ids its properties show."""
    candidates = diagnose(ev)
    replayable = [m for m in candidates if m in VARIANTS]
    if not replayable or _source(ev) is None:
        return candidates
    found = explanations(ev)
    if not found:
        return candidates
    common = frozenset.intersection(*found)
    return [m for m in candidates if m not in VARIANTS or m in common]
