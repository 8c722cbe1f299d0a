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
        "tril is a plain attribute: register it with self.register_buffer('tril', ...) so it "
        "is saved in the state_dict and follows .to(device)."
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


def describe(mistake: str) -> str:
    """The words for a catalog id (the id itself when unknown)."""
    return MISTAKES.get(mistake, mistake)
