"""The bug catalog: every mistake the grader can name, in words a student can act on."""

from __future__ import annotations

MISTAKES: dict[str, str] = {
    "loop-exclusive": (
        "Your running mean stops one step early: position t must average x[b, 0..t] "
        "including t itself (slice with :t+1, not :t)."
    ),
    "tril-unnormalised": (
        "Your lower-triangular matrix sums the past instead of averaging it: divide each row "
        "by its sum (wei / wei.sum(1, keepdim=True))."
    ),
    "transpose-batch": (
        "You transposed the batch axis (k.transpose(0, 1) or k.T on a 3-D tensor), which mixes "
        "different sequences; transpose the last two axes with k.transpose(-2, -1)."
    ),
    "swapped-qk": (
        "You computed k @ q^T instead of q @ k^T: row i must hold query i against every key, "
        "so the query goes on the left."
    ),
    "tied-qk": (
        "You used one projection for both queries and keys, which makes the affinities "
        "symmetric; use `query` for q and `key` for k."
    ),
    "bias": (
        "Your projections carry a bias: use nn.Linear(..., bias=False) "
        "(one head has 3 x C x hs weights and nothing else)."
    ),
    "triu-mask": (
        "You masked the lower triangle (the past) instead of the upper one (the future): keep "
        "torch.tril and fill where tril == 0."
    ),
    "mask-polarity": (
        "Your mask is inverted: row t must see columns 0..t, so fill -inf where tril == 0, "
        "not where tril == 1."
    ),
    "fill-zero": (
        "You filled the future with 0 instead of -inf: exp(0) = 1, so the future still gets "
        "weight after the softmax. Fill with float('-inf')."
    ),
    "mask-after-softmax": (
        "You masked after the softmax, so the rows no longer sum to one: mask the scores "
        "first, then take the softmax."
    ),
    "softmax-dim": (
        "Your softmax ran over the query axis, so columns sum to one instead of rows: use "
        "dim=-1 (check with wei.sum(-1))."
    ),
    "no-scale": (
        "The scores are not scaled: multiply q @ k^T by head_size ** -0.5 before the softmax."
    ),
    "scale-by-C": (
        "You scaled by the embedding width C; the scale is 1/sqrt(head_size), the width of q and k."
    ),
    "scale-no-sqrt": (
        "You divided by head_size instead of its square root: the scale is head_size ** -0.5."
    ),
    "aggregate-x": (
        "You aggregated x instead of v = value(x): the head must return weights @ value(x), "
        "head_size wide."
    ),
    "v-at-wei": (
        "Your matrix product is in the wrong order: the weights go on the left, "
        "(B,T,T) @ (B,T,width), so each row of weights mixes the rows it attends to."
    ),
    "tril-not-buffer": (
        "Your mask is not a registered buffer (a plain attribute, a parameter, or no tril at "
        "all): register it once in __init__ with self.register_buffer('tril', ...), so that it "
        "follows .to(device) with the module and is never trained."
    ),
    "tril-not-cropped": (
        "The head fails or is wrong when T < block_size: crop the mask with self.tril[:T, :T]."
    ),
    "dropout-misplaced": (
        "Dropout is in the wrong place: apply self.dropout to the attention weights after the "
        "softmax (and only through the module, so it is off in eval mode)."
    ),
    "hardcoded-device": (
        "The module pins a device (.cuda(), device='cpu', ...): create tensors from the input's "
        "device or keep them as registered buffers."
    ),
    "mask-in-place": (
        "masked_fill_ (in place) changed a shared tensor; use the out-of-place masked_fill."
    ),
    "imported-answer": (
        "The graded name is imported, not written in the answer cell: write its definition "
        "(the def, class or value) in the answer cell itself."
    ),
}


# Named from how the answer cell defines its names (before any probe runs), not from what its
# code computes: no code mutation of an answer shows them.
BEFORE_PROBE: frozenset[str] = frozenset({"imported-answer"})

_AVERAGES = ("average-matmul", "average-softmax")

# Words for a mistake where the general ones would not fit the cell: a shape table is about
# shapes, a count about counting, a loop has no mask.
CELL_WORDS: dict[tuple[str, str], str] = {
    ("transpose-batch", "shape-table"): (
        "Your k_T moves the batch axis: k is (B, T, hs), and swapping its last two axes gives "
        "(B, hs, T); (T, B, hs) or (hs, T, B) would pair one sequence's queries with another "
        "sequence's keys."
    ),
    ("aggregate-x", "shape-table"): (
        "Your out is (B, T, C), the shape of weights @ x: the head aggregates v = value(x), "
        "so out is (B, T, head_size)."
    ),
    ("bias", "param-count"): (
        "Your count includes a bias vector per projection (hs numbers each): the head's "
        "projections have no bias, so one head holds 3 x C x hs weights."
    ),
    ("fill-zero", "nonzero-count"): (
        "You counted all T x T entries: after filling the future with -inf and the softmax, "
        "the future weights are exactly zero, so row t has t + 1 nonzero weights."
    ),
    ("triu-mask", "average-loop"): (
        "Your loop averages the future, x[b, t:], instead of the past: position t averages "
        "x[b, :t+1]."
    ),
    ("fill-zero", "average-loop"): (
        "Every position averages the whole sequence, the future included: position t may "
        "only average x[b, :t+1]."
    ),
    ("mask-after-softmax", "average-loop"): (
        "Your running sums are divided by T, the whole length: position t averages t + 1 "
        "values, so divide by t + 1."
    ),
    ("tril-unnormalised", "average-loop"): (
        "Your loop sums the past instead of averaging it: divide by the number of positions, "
        "t + 1 (or use .mean)."
    ),
    ("mask-polarity", "average-loop"): (
        "Your loop averages only the positions after t, x[b, t+1:]: position t averages its "
        "past and itself, x[b, :t+1]."
    ),
    ("softmax-dim", "sdpa-forward"): (
        "The weights are normalised over the query axis: let scaled_dot_product_attention "
        "take the softmax, with q, k, v in that order."
    ),
    ("dropout-misplaced", "sdpa-forward"): (
        "Dropout is still on: pass dropout_p=0.0 to scaled_dot_product_attention, so the "
        "result is the head's eval-mode output even when the head is in training mode."
    ),
    ("dropout-misplaced", "multi-head"): (
        "Dropout is active in eval mode: apply it through registered nn.Dropout modules "
        "(self.dropout, and the heads in an nn.ModuleList), so that .eval() reaches them."
    ),
    ("softmax-dim", "average-matmul"): (
        "You normalised the columns of the matrix instead of its rows: divide each row by its "
        "sum (wei.sum(1, keepdim=True)), so that row t averages positions 0..t."
    ),
}
_MASK_CELLS = ("mask-then-softmax", "attend", "head", "value-ablation", "capture-attention")
_DIAGONAL_AVERAGE = (
    "Your weights leave out the diagonal: row t must weigh positions 0..t, itself included "
    "(keep the diagonal of the lower triangle)."
)
_DIAGONAL_MASK = (
    "Your mask hides position t from itself: row t must see columns 0..t, the diagonal "
    "included (fill -inf only where tril == 0)."
)
_UNNORMALISED = (
    "Your weights are not normalised: after masking, take the softmax (exp, then divide each "
    "row by its sum), so that every row sums to one."
)
CELL_WORDS |= {("loop-exclusive", gid): _DIAGONAL_AVERAGE for gid in _AVERAGES}
CELL_WORDS |= {("loop-exclusive", gid): _DIAGONAL_MASK for gid in _MASK_CELLS}
CELL_WORDS |= {("tril-unnormalised", gid): _UNNORMALISED for gid in _MASK_CELLS}


def describe(mistake: str, grade_id: str | None = None) -> str:
    """The words for a catalog id in the given answer cell (the id itself when unknown)."""
    if grade_id is not None and (mistake, grade_id) in CELL_WORDS:
        return CELL_WORDS[(mistake, grade_id)]
    return MISTAKES.get(mistake, mistake)
