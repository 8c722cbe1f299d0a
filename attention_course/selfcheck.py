"""Self-checks that teach: the visible checks of notebooks 01-04, torch only (works in Colab).

Each check looks up the student's answer by name in the notebook's namespace (`globals()`),
runs it on inputs of its own (it says which sizes), and either prints what it found and
"self-checks passed", or stops the cell with one readable message: "not answered yet" for an
untouched stub, or the mistake the values show, told apart by their properties (rows summing
below one with the future at zero, columns summing to one, weight on the future, nan rows),
with the values it found. It computes no answer itself: it compares properties, so reading
this file gives none away.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn

Namespace = Mapping[str, Any]
TOL = 1e-5


class SelfCheckFailed(AssertionError):
    """A self-check found a problem: Jupyter shows its message, not a traceback."""

    def _render_traceback_(self) -> list[str]:
        lines = str(self).splitlines() or [""]
        return [f"{type(self).__name__}: {lines[0]}", *lines[1:]]


class NotAnswered(SelfCheckFailed):
    """The answer is still the stub it was handed out as."""


# ---- looking answers up and calling them ----------------------------------------------------


def lookup(ns: Namespace, name: str) -> Any:
    """The value of `name` in the notebook, or NotAnswered while it is missing or still `...`."""
    if name not in ns:
        raise NotAnswered(
            f"{name} is not answered yet: it is not defined. Write it in its answer cell, run "
            "that cell (Shift+Enter), then this one."
        )
    value = ns[name]
    if value is ...:
        raise NotAnswered(f"{name} is not answered yet: replace the `...` with your answer.")
    return value


def shape_of(value: Any) -> str:
    return str(tuple(value.shape)) if isinstance(value, torch.Tensor) else type(value).__name__


def call(
    fn: Callable,
    name: str,
    args: Sequence[Any],
    used: str,
    ns: Namespace,
    T: int | None = None,
    hint: str = "",
) -> Any:
    """fn(*args), with "not answered yet" for a stub and a readable message for an error.

    `T`: the sequence length of the check's input, named when the error shows the notebook's;
    `hint`: a line added to the message of any other error.
    """
    try:
        with torch.no_grad():
            return fn(*args)
    except NotImplementedError as err:
        raise NotAnswered(
            f"{name} is not answered yet: its cell still raises NotImplementedError. Replace "
            "`raise NotImplementedError()` with your code, run the cell, then this one."
        ) from err
    except Exception as err:  # the student's code may raise anything
        text = f"{name} raised {type(err).__name__}: {err}\n(called on {used})"
        size = _size_hint(err, T, ns)
        raise SelfCheckFailed(text + (size or (f"\n{hint}" if hint else ""))) from None


def _size_hint(err: Exception, T: int | None, ns: Namespace) -> str:
    """A mask built from the notebook's T meeting the check's T, said in words."""
    notebook_T = ns.get("T")
    if T is None or not isinstance(notebook_T, int) or T == notebook_T:
        return ""
    if not re.search(rf"\b{notebook_T}\b", str(err)):
        return ""
    return (
        f"\nThe check uses T = {T}; your notebook's T is {notebook_T}, and the error names "
        f"size {notebook_T}. Something in your function was built for the notebook's T (a mask "
        "made with torch.ones(T, T)?): take the size from the input instead, so that the "
        "function works for any T."
    )


def fmt(values: torch.Tensor, digits: int = 3) -> str:
    """A short printout of a small tensor."""
    flat = [round(float(v), digits) for v in values.detach().flatten()[:10]]
    more = " ..." if values.numel() > 10 else ""
    return "[" + ", ".join(f"{v:g}" for v in flat) + more + "]"


def _passed(name: str, used: str) -> None:
    print(f"Checked {name} on {used}.")
    print(f"{name}: self-checks passed")


# ---- attention weights: the catalog's mistakes by their properties --------------------------


def _future(T: int) -> torch.Tensor:
    return torch.ones(T, T, dtype=torch.bool).triu(1)  # (T,T) True where the key is later


def diagnose_weights(
    weights: torch.Tensor,
    scores: torch.Tensor | None = None,
    others: Mapping[str, torch.Tensor] | None = None,
) -> str:
    """'' when (...,T,T) weights look like causal attention weights (of `scores`, if given);
    else what is wrong, said by its properties, with the values found. `others`: what the
    weights would be a softmax of for a known mistake (a message -> those scores)."""
    T = weights.shape[-1]
    w = weights.detach().double().reshape(-1, T, T)  # (N,T,T)
    s = None if scores is None else scores.detach().double().reshape(-1, T, T)
    future = _future(T)
    rows, cols = w.sum(-1), w.sum(-2)  # (N,T) each
    nan_rows = torch.isnan(w).any(-1)  # (N,T)
    if bool(nan_rows.any()):
        return _nan_rows(w, nan_rows, future)
    on_future = (w * future).sum(-1)  # (N,T): weight each row gives to later keys
    if float(on_future.abs().max()) > 1e-6:
        return _future_weight(w, s, on_future, future, cols)
    own = w.diagonal(dim1=-2, dim2=-1)  # (N,T): each token's weight on itself
    if float(own[:, 1:].abs().max()) < 1e-12 and float((w * ~future).sum()) > 0:
        return (
            f"Each token's weight on itself is 0 (row 1 is {fmt(w[0, 1])}): row t sees keys "
            "0..t-1 but not t. A token's past includes the token itself: keep the diagonal."
        )
    if torch.allclose(rows, torch.ones_like(rows), atol=TOL):
        if s is None:
            return ""
        for message, alternative in (others or {}).items():
            if not _not_softmax(w, alternative.detach().double().reshape(-1, T, T)):
                return message
        return _not_softmax(w, s)
    if torch.allclose(cols, torch.ones_like(cols), atol=TOL):
        return (
            f"Each column sums to one ({fmt(cols[0])}), the rows do not ({fmt(rows[0])}): the "
            "softmax ran over dim=-2, the queries, so every key's weights are spread over the "
            "queries instead of every query's over the keys. Normalise each row: the key axis "
            "is the last one, dim=-1."
        )
    if bool((rows <= 1 + TOL).all()):
        last = "; the last row, which has no future to lose, still sums to one" * bool(
            abs(float(rows[0, -1]) - 1) < TOL
        )
        return (
            f"Rows sum below one while the future is exactly zero: row sums {fmt(rows[0])}"
            f"{last}. That is a softmax over all T keys, future included, with the future "
            "zeroed afterwards (masking after the softmax): the future still took its share "
            "of each row's denominator. Hide the future first (-inf), then take the softmax."
        )
    return (
        f"The rows do not sum to one: {fmt(rows[0])}. Each row must be a distribution over "
        "the keys it may see: a softmax along the key axis does that."
    )


def _nan_rows(w: torch.Tensor, nan_rows: torch.Tensor, future: torch.Tensor) -> str:
    bad = sorted({int(t) for t in nan_rows.nonzero()[:, 1]})
    nan = torch.isnan(w)  # (N,T,T)
    if bool(nan[:, future].all()) and not bool(nan[:, ~future].any()):
        return (
            "Every weight above the diagonal is nan and the others are numbers: the softmax ran "
            "along an axis on which the hidden entries are all -inf, such as the batch axis. "
            "Each query's weights are a distribution over the keys: normalise over the last axis."
        )
    if bad == [0] and float(w[0].diagonal()[1:].abs().max()) < 1e-12:
        return (
            "Row 0 is nan and every other token's weight on itself is 0 (row 1 is "
            f"{fmt(w[0, 1])}): the diagonal is hidden as well as the future, so row 0 sees "
            "nothing. Row t must see keys 0..t, itself included."
        )
    clean = w[0].nan_to_num(0.0)
    seen = "; the other rows weigh keys after themselves (the future)" * bool(
        float((clean * future).sum()) > 1e-6
    )
    return (
        f"Rows {bad} are nan{seen}. A row turns nan when every one of its scores is -inf: "
        "the softmax divides 0 by 0. Row t must keep keys 0..t, itself included, so the -inf "
        "goes where the key comes after the query (where tril == 0), not on the past."
    )


def _future_weight(
    w: torch.Tensor,
    s: torch.Tensor | None,
    on_future: torch.Tensor,
    future: torch.Tensor,
    cols: torch.Tensor,
) -> str:
    T = w.shape[-1]
    past = torch.ones(T, T, dtype=torch.bool).tril(-1)
    found = f"row 0 gives {float(on_future[0, 0]):.3f} to keys 1..{T - 1}"
    if float((w * past).abs().sum()) < 1e-9:
        return (
            f"The weight sits on the future and the past gets none: {found}, and every key "
            "before a query gets 0. The mask hides the wrong triangle: row t must see keys "
            "0..t, so the -inf goes above the diagonal (where tril == 0)."
        )
    if s is not None:
        ratio = w / w.diagonal(dim1=-2, dim2=-1).unsqueeze(-1)  # (N,T,T) weight / own weight
        zero_fill = torch.exp(-s.diagonal(dim1=-2, dim2=-1)).unsqueeze(-1).expand_as(w)
        if torch.allclose(ratio[:, future], zero_fill[:, future], rtol=1e-3, atol=1e-9):
            return (
                f"Every future key gets the weight of a score of exactly 0 ({found}): the "
                "future was filled with 0, and exp(0) = 1, so it keeps its weight. Fill with "
                "float('-inf') (or a very negative number such as -1e9)."
            )
        own = torch.exp(s - s.diagonal(dim1=-2, dim2=-1).unsqueeze(-1))  # (N,T,T)
        if torch.allclose(ratio, own, rtol=1e-3, atol=1e-9):
            return (
                f"The future gets exactly the weight it would get with no mask at all "
                f"({found}). If a line reads scores.masked_fill(...) on its own, its result "
                "is thrown away: masked_fill returns a new tensor, so assign it."
            )
    if torch.allclose(cols, torch.ones_like(cols), atol=TOL):
        return (
            f"Each column sums to one ({fmt(cols[0])}) and the future gets weight ({found}): "
            "the softmax ran over dim=-2, the queries, over scores the mask did not hide."
        )
    return f"Weight leaks to the future: {found}. Row t may only weigh keys 0..t."


def _not_softmax(w: torch.Tensor, s: torch.Tensor) -> str:
    """'' when the visible weights of each row are a softmax of that row's visible scores."""
    T = w.shape[-1]
    seen = ~_future(T)
    log_w = torch.log(w.clamp_min(1e-300)) - torch.log(w[..., :1].clamp_min(1e-300))  # vs key 0
    diff = s - s[..., :1]  # (N,T,T): score minus the score of key 0
    if torch.allclose(log_w[:, seen], diff[:, seen], atol=1e-3):
        return ""
    moved = diff[:, seen].abs() > 1e-3
    factor = (log_w[:, seen][moved] / diff[:, seen][moved]).median() if bool(moved.any()) else 1
    if bool(moved.any()) and torch.allclose(
        log_w[:, seen], float(factor) * diff[:, seen], atol=1e-3
    ):
        return (
            f"Rows sum to one and the future is zero, but the weights are a softmax of the "
            f"scores times {float(factor):.3g}, not of the scores themselves: leave the scores "
            "as they are here."
        )
    return (
        "Rows sum to one and the future is zero, but the weights are not a softmax of the "
        f"visible scores: row {T - 1} is {fmt(w[0, -1])}."
    )


# ---- notebook 01: three ways to average the past --------------------------------------------


def check_average(ns: Namespace, name: str) -> None:
    """Self-check of average_loop / average_matmul / average_softmax: out[b, t] = mean of
    x[b, 0..t], read as the (T,T) matrix the function applies along time."""
    fn = lookup(ns, name)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 5, 7, generator=g)  # (B,T,C)
    basis = torch.eye(6).unsqueeze(0)  # (1,T,T): the output is the averaging matrix itself
    used = (
        "x of shape (B, T, C) = (3, 5, 7), and the (1, 6, 6) identity (its output is the matrix "
        "applied along time)"
    )
    out = call(fn, name, [x.clone()], used, ns, T=5)
    _expect_tensor(name, out, tuple(x.shape), used)
    W = call(fn, name, [basis.clone()], used, ns, T=6)
    _expect_tensor(name, W, (1, 6, 6), used)
    W = W[0]  # (T,T)
    problem = _average_problem(W)
    if problem:
        raise SelfCheckFailed(f"{name}: {problem}\n(checked on {used})")
    if not torch.allclose(out[:, 0], x[:, 0], atol=1e-5):
        raise SelfCheckFailed(f"{name}: out[:, 0] must equal x[:, 0] (checked on {used}).")
    if not torch.allclose(out[:, -1], x.mean(1), atol=1e-5):
        raise SelfCheckFailed(
            f"{name}: the last position must average the whole sequence; it differs by "
            f"{float((out[:, -1] - x.mean(1)).abs().max()):.3g} (checked on {used})."
        )
    print(f"The matrix {name} applies along time, for T = 6 (row t: weights on positions 0..5):")
    print(W.detach().double().numpy().round(3))
    _passed(name, used)


def _average_problem(W: torch.Tensor) -> str:
    T = W.shape[-1]
    W = W.detach().double()
    if bool(torch.isnan(W[0]).any()) and not bool(torch.isnan(W[1:]).any()):
        return (
            f"position 0 is nan and row 1 is {fmt(W[1])}: position t averages the positions "
            "before it but not itself, and position 0 averages nothing. The past of t "
            "includes t: slice up to t + 1."
        )
    rows = W.sum(-1)
    counts = torch.arange(1, T + 1, dtype=W.dtype)
    if torch.allclose(rows, counts, atol=1e-4) and not bool((W * _future(T)).any()):
        return (
            f"row t sums to t + 1 ({fmt(rows)}): the past is summed, not averaged. Divide each "
            "row by how many positions it sees."
        )
    zeros = torch.zeros(T, T, dtype=W.dtype)
    problem = diagnose_weights(W, zeros)
    if problem:
        return problem
    return ""


def _expect_tensor(name: str, out: Any, shape: tuple[int, ...], used: str) -> None:
    if not isinstance(out, torch.Tensor):
        raise SelfCheckFailed(f"{name} returned {type(out).__name__}, not a tensor ({used}).")
    if tuple(out.shape) != shape:
        raise SelfCheckFailed(f"{name}: expected shape {shape}, got {shape_of(out)} ({used}).")


# ---- notebook 02: the shape table, the parameter count, the scores --------------------------


def check_shape_table(ns: Namespace, steps: Sequence[str]) -> None:
    """The form of SHAPES: the eight keys, tuples of ints, the three (T,T) steps alike."""
    table = lookup(ns, "SHAPES")
    if not isinstance(table, dict):
        raise SelfCheckFailed(f"SHAPES must be a dict; it is a {type(table).__name__}.")
    missing, extra = set(steps) - set(table), set(table) - set(steps)
    if missing or extra:
        raise SelfCheckFailed(
            f"SHAPES needs exactly the keys {list(steps)}; missing {sorted(missing)}, "
            f"not asked for {sorted(extra)}."
        )
    for key, shape in table.items():
        if shape is ...:
            raise NotAnswered(f'SHAPES["{key}"] is not answered yet: replace the `...`.')
        if not (isinstance(shape, tuple) and all(isinstance(n, int) for n in shape)):
            raise SelfCheckFailed(f"SHAPES[{key!r}] = {shape!r}: write a tuple of ints.")
    if not table["scores"] == table["masked"] == table["weights"]:
        raise SelfCheckFailed(
            f"scores {table['scores']}, masked {table['masked']}, weights {table['weights']}: "
            "masking and the softmax keep the shape of the scores."
        )
    print("SHAPES: the form is right (its values are checked when you hand the notebook in)")


def check_whole_number(ns: Namespace, name: str) -> None:
    value = lookup(ns, name)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SelfCheckFailed(f"{name} = {value!r}: it must be a positive whole number.")
    print(f"{name}: the form is right (its value is checked when you hand the notebook in)")


def check_affinities(ns: Namespace) -> None:
    """Self-check of affinities(x, key, query): shape, entries by the definition, no mixing
    of sequences, a single token."""
    fn = lookup(ns, "affinities")
    g = torch.Generator().manual_seed(3)
    torch_state = torch.random.get_rng_state()
    key, query = nn.Linear(12, 7, bias=False), nn.Linear(12, 7, bias=False)
    torch.random.set_rng_state(torch_state)
    x = torch.randn(3, 5, 12, generator=g)  # (B,T,C)
    used = "x of shape (B, T, C) = (3, 5, 12) with head_size 7, a batch with B == T == 4, and T = 1"
    s = call(fn, "affinities", [x.clone(), key, query], used, ns, T=5, hint=TRANSPOSE_HINT)
    _expect_tensor("affinities", s, (3, 5, 5), used)
    with torch.no_grad():
        q, k = query(x), key(x)  # (B,T,hs) each: one token at a time, nothing mixed yet
    pairs = [(0, 4, 1), (1, 2, 4), (2, 0, 3), (1, 4, 2), (0, 3, 3)]  # (b, i, j)
    want = torch.stack([q[b, i].dot(k[b, j]) for b, i, j in pairs])
    got = torch.stack([s[b, i, j] for b, i, j in pairs]).detach()
    if not torch.allclose(got, want, atol=1e-4):
        raise SelfCheckFailed(_scores_problem(got, want, pairs, q, k) + f"\n(checked on {used})")
    square = torch.randn(4, 4, 12, generator=g)  # B == T
    other = square.clone()
    other[1:] = 0.0  # change every sequence but sequence 0
    s0 = call(fn, "affinities", [square, key, query], used, ns, T=4)[0]
    s1 = call(fn, "affinities", [other, key, query], used, ns, T=4)[0]
    if not torch.allclose(s0, s1, atol=1e-5):
        raise SelfCheckFailed(
            "Sequence 0's scores changed when only the other sequences did (B == T == 4): the "
            "transpose swapped the batch axis. Swap the last two axes only: transpose(-2, -1) "
            f"or .mT.\n(checked on {used})"
        )
    one = call(fn, "affinities", [torch.randn(2, 1, 12, generator=g), key, query], used, ns)
    _expect_tensor("affinities", one, (2, 1, 1), used)
    _passed("affinities", used)


TRANSPOSE_HINT = (
    "Shapes to check: key(x) and query(x) are (B, T, hs); the keys need their last two axes "
    "swapped, (B, hs, T), with the batch axis left in front."
)


def _scores_problem(got, want, pairs, q, k) -> str:  # noqa: ANN001 - tensors and pairs
    found = f"scores[{pairs[0][0]}, {pairs[0][1]}, {pairs[0][2]}] is {float(got[0]):.4f}"
    swapped = torch.stack([q[b, j].dot(k[b, i]) for b, i, j in pairs])
    tied = torch.stack([q[b, i].dot(q[b, j]) for b, i, j in pairs])
    if torch.allclose(got, swapped, atol=1e-4):
        return (
            f"{found}, which is key {pairs[0][1]} against query {pairs[0][2]}: rows and columns "
            "are swapped. Row i must be query i against every key: the query goes on the left."
        )
    if torch.allclose(got, tied, atol=1e-4):
        return (
            f"{found}, the query map against itself: the scores use query(x) on both sides. "
            "The keys come from key(x)."
        )
    ratio = got / want
    if torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-3):
        return (
            f"{found}: every score is {float(ratio[0]):.3g} times q . k. Raw scores have no scale."
        )
    return (
        f"{found}, but query({pairs[0][1]}) . key({pairs[0][2]}) of that sequence is "
        f"{float(want[0]):.4f}: scores[b, i, j] must be query(x[b, i]) . key(x[b, j])."
    )


# ---- notebook 03: mask, then softmax --------------------------------------------------------


def check_mask_then_softmax(ns: Namespace) -> None:
    """Self-check of mask_then_softmax(scores) for (B,T,T), (T,T) and (B,H,T,T) scores."""
    fn = lookup(ns, "mask_then_softmax")
    g = torch.Generator().manual_seed(3)
    used = "scores of shape (B, T, T) = (3, 5, 5), a plain (6, 6) matrix and a (2, 3, 4, 4) stack"
    for shape in ((3, 5, 5), (6, 6), (2, 3, 4, 4)):
        scores = 2 * torch.randn(*shape, generator=g)
        w = call(
            fn, "mask_then_softmax", [scores.clone()], f"scores of shape {shape}", ns, shape[-1]
        )
        _expect_tensor("mask_then_softmax", w, shape, f"scores of shape {shape}")
        problem = diagnose_weights(w, scores)
        if problem:
            raise SelfCheckFailed(
                f"mask_then_softmax, on scores of shape {shape}: {problem}\n"
                f"Row sums found: {fmt(w.detach().reshape(-1, shape[-1], shape[-1])[0].sum(-1))}"
            )
    _passed("mask_then_softmax", used)


def check_nonzero_count(ns: Namespace) -> None:
    """Self-check of NONZERO and n_visible(T), against the weights your mask_then_softmax makes."""
    count, closed_form = lookup(ns, "NONZERO"), lookup(ns, "n_visible")
    fn = lookup(ns, "mask_then_softmax")
    if isinstance(count, bool) or not isinstance(count, int):
        raise SelfCheckFailed(
            f"NONZERO = {count!r}: count with torch.count_nonzero, then int(...)."
        )
    if count == 64:
        raise SelfCheckFailed("NONZERO = 64: every entry is nonzero, so nothing was masked.")
    first = call(closed_form, "n_visible", [1], "T = 1", ns)
    if first != 1:
        raise SelfCheckFailed(f"n_visible(1) = {first!r}: a single token sees itself, so 1.")
    for T in (2, 5, 13):
        matrix = f"a ({T}, {T}) matrix"
        weights = call(fn, "mask_then_softmax", [torch.randn(T, T)], matrix, ns, T)
        counted = int(torch.count_nonzero(weights))
        claimed = call(closed_form, "n_visible", [T], f"T = {T}", ns)
        if claimed != counted:
            raise SelfCheckFailed(
                f"n_visible({T}) = {claimed!r}, but your mask_then_softmax leaves {counted} "
                f"nonzero weights in a ({T}, {T}) matrix. Row t sees keys 0..t."
            )
    at_eight = call(closed_form, "n_visible", [8], "T = 8", ns)
    if count != at_eight:
        raise SelfCheckFailed(f"NONZERO = {count} but n_visible(8) = {at_eight!r}.")
    _passed("NONZERO and n_visible", "T = 1, 2, 5, 8 and 13")


# ---- notebook 04: the whole head --------------------------------------------------------------


def check_attend(ns: Namespace) -> None:
    """Self-check of attend(x, key, query, value): shape, the first position, causality, no
    mixing of sequences, and the weights themselves, read through values that name positions."""
    fn = lookup(ns, "attend")
    g = torch.Generator().manual_seed(11)
    state = torch.random.get_rng_state()
    key, query, value = (nn.Linear(12, 7, bias=False) for _ in range(3))
    torch.random.set_rng_state(state)
    x = torch.randn(3, 5, 12, generator=g)  # (B,T,C)
    used = "x of shape (B, T, C) = (3, 5, 12) with head_size 7, and a batch with B == T == 4"
    hint = (
        "Shapes to check: the scores are (B, T, hs) @ (B, hs, T), with only the keys' last two "
        "axes swapped; the weights (B, T, T) go on the left of the values (B, T, hs)."
    )
    out = call(fn, "attend", [x.clone(), key, query, value], used, ns, T=5, hint=hint)
    if isinstance(out, torch.Tensor) and tuple(out.shape) == (3, 5, 12):
        raise SelfCheckFailed(
            f"attend returned shape (3, 5, 12), as wide as x (C = 12), not head_size 7: it "
            f"averages x itself. The head hands over value(x).\n(checked on {used})"
        )
    if isinstance(out, torch.Tensor) and tuple(out.shape) == (3, 7, 5):
        raise SelfCheckFailed(
            "attend returned shape (3, 7, 5), (B, hs, T): the product is the wrong way round. "
            f"The weights (B, T, T) go on the left of the values (B, T, hs).\n(checked on {used})"
        )
    _expect_tensor("attend", out, (3, 5, 7), used)
    with torch.no_grad():
        v = value(x)  # (B,T,hs)
    weights, scores, tied = _weights_through_values(fn, ns, g)
    others = {
        "The weights are a softmax of key . query, the scores transposed: row t must be query "
        "t against every key, with the query on the left.": scores.mT,
        "The weights are a softmax of query . query: the scores use the query map on both "
        "sides. The keys come from key(x).": tied,
    }
    problem = diagnose_weights(weights, scores, others)
    if problem:
        raise SelfCheckFailed(
            f"attend: {problem}\n(the weights were read off the output, with values that name "
            "their positions, on x of shape (2, 4, 9))"
        )
    if not torch.allclose(out[:, 0], v[:, 0], atol=1e-5):
        raise SelfCheckFailed(f"attend: out[:, 0] must be value(x)[:, 0] ({used}).")
    later = x.clone()
    later[:, 3:] = 0.0  # change the future of positions 0..2
    out_later = call(fn, "attend", [later, key, query, value], used, ns, T=5)
    if not torch.allclose(out_later[:, :3], out[:, :3], atol=1e-5):
        raise SelfCheckFailed(
            "attend: outputs 0..2 changed when only tokens 3.. did: the future leaks in."
        )
    _no_mixing(fn, ns, g, used)
    _passed("attend", used)


def _weights_through_values(
    fn: Callable, ns: Namespace, g: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The (B,T,T) weights an answer applies, read from its output: x carries its position as
    a one-hot part, and value(x) copies that part (with a zero channel, so that the two orders
    of the product cannot both fit), so out[b, t, :T] = weights[b, t]."""
    B, T, C = 2, 4, 9
    x = torch.cat([torch.randn(B, T, C - T, generator=g), torch.eye(T).expand(B, T, T)], -1)
    key, query = nn.Linear(C, 5, bias=False), nn.Linear(C, 5, bias=False)
    value = nn.Linear(C, T + 1, bias=False)
    with torch.no_grad():
        value.weight.zero_()
        value.weight[:T, C - T :] = torch.eye(T)  # v = (one-hot position, 0)
        q, k = query(x), key(x)
    used = "x of shape (2, 4, 9) whose last 4 channels name the position"
    out = call(fn, "attend", [x, key, query, value], used, ns, T=T)
    _expect_tensor("attend", out, (B, T, T + 1), used)

    def pairs(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """(B,T,T): left[b, i] . right[b, j], one pair at a time."""
        return torch.stack(
            [
                torch.stack(
                    [torch.stack([left[b, i].dot(right[b, j]) for j in range(T)]) for i in range(T)]
                )
                for b in range(B)
            ]
        )

    return out[..., :T].detach(), pairs(q, k), pairs(q, q)


def _no_mixing(fn: Callable, ns: Namespace, g: torch.Generator, used: str) -> None:
    key, query, value = (nn.Linear(6, 4, bias=False) for _ in range(3))  # hs == B == T
    square = torch.randn(4, 4, 6, generator=g)
    other = square.clone()
    other[1:] = 0.0
    a = call(fn, "attend", [square, key, query, value], used, ns, T=4)[0]
    b = call(fn, "attend", [other, key, query, value], used, ns, T=4)[0]
    if not torch.allclose(a, b, atol=1e-5):
        raise SelfCheckFailed(
            "attend: sequence 0's output changed when only the other sequences did (B == T == "
            "head_size == 4): a transpose or a product mixed the batch axis."
        )


# ---- predictions -----------------------------------------------------------------------------

Form = tuple[str, ...] | type | tuple[type, ...]


def check_predictions(ns: Namespace, forms: Mapping[str, Form]) -> None:
    """The form of prediction answers: each name set (not `...`), a choice among the allowed
    strings, or a value of the allowed type. Says nothing of whether it is right."""
    missing = [name for name in forms if ns.get(name, ...) is ...]
    if missing:
        raise NotAnswered(
            f"{', '.join(missing)} not answered yet: replace each `...` in the prediction cell "
            "with your answer and run it."
        )
    for name, form in forms.items():
        value = ns[name]
        if isinstance(form, tuple) and all(isinstance(f, str) for f in form):
            if not (isinstance(value, str) and value.strip().strip("()").lower() in form):
                raise SelfCheckFailed(
                    f"{name} = {value!r}: answer with one of {', '.join(map(repr, form))}."
                )
        elif form is float:
            if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
                raise SelfCheckFailed(f"{name} = {value!r}: write a number.")
        elif not isinstance(value, form) or (form is int and isinstance(value, bool)):
            raise SelfCheckFailed(f"{name} = {value!r}: write a {getattr(form, '__name__', form)}.")
    print(f"predictions recorded ({', '.join(forms)}): run the next cells")
