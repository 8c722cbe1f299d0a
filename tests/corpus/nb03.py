"""Notebook 03: mistakes and alternatives of the causal softmax and the nonzero count."""

from tests.corpus import Alternative, Mutation

NB = "03_mask_then_softmax.ipynb"
MASK_LINE = 'masked = scores.masked_fill(tril == 0, float("-inf"))'
SOFTMAX_LINE = "return F.softmax(masked, dim=-1)"

MUTATIONS = [
    Mutation(NB, "mask-then-softmax", "triu-mask", (("torch.tril(", "torch.triu("),)),
    Mutation(NB, "mask-then-softmax", "mask-polarity", (("tril == 0", "tril == 1"),)),
    Mutation(NB, "mask-then-softmax", "fill-zero", (('float("-inf")', "0.0"),)),
    Mutation(
        NB,
        "mask-then-softmax",
        "mask-after-softmax",
        (
            (MASK_LINE, "masked = F.softmax(scores, dim=-1)"),
            (SOFTMAX_LINE, "return masked.masked_fill(tril == 0, 0.0)"),
        ),
    ),
    Mutation(NB, "mask-then-softmax", "softmax-dim", (("dim=-1", "dim=-2"),), "dim-2"),
    Mutation(NB, "mask-then-softmax", "softmax-dim", (("dim=-1", "dim=1"),), "dim1"),
    Mutation(
        NB,
        "nonzero-count",
        "fill-zero",
        (
            (
                "mask_then_softmax(torch.randn(4, 8, 8))",
                "F.softmax(torch.randn(4, 8, 8).masked_fill(torch.ones(8, 8).tril() == 0, 0), -1)",
            ),
            ("T * (T + 1) // 2", "T * T"),
        ),
    ),
]

ALTERNATIVES = [
    Alternative(
        NB,
        "mask-then-softmax",
        "where-1e9-method-softmax",
        """
def mask_then_softmax(scores):
    T = scores.shape[-1]
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.where(keep, scores, torch.tensor(-1e9)).softmax(-1)
""",
    ),
    Alternative(
        NB,
        "mask-then-softmax",
        "arange-mask",
        """
def mask_then_softmax(scores):
    T = scores.size(-1)
    future = torch.arange(T)[None, :] > torch.arange(T)[:, None]
    return F.softmax(scores.masked_fill(future, float("-inf")), dim=scores.dim() - 1)
""",
    ),
    Alternative(
        NB,
        "mask-then-softmax",
        "explicit-exp",
        """
def mask_then_softmax(scores):
    T = scores.shape[-1]
    visible = torch.tril(torch.ones(T, T))
    shifted = scores - scores.max(dim=-1, keepdim=True).values
    e = torch.exp(shifted) * visible
    return e / e.sum(-1, keepdim=True)
""",
    ),
    Alternative(
        NB,
        "nonzero-count",
        "sum-and-comb",
        """
import math

w = mask_then_softmax(torch.zeros(2, 8, 8))
NONZERO = (w[0] != 0).sum().item()


def n_visible(T):
    return math.comb(T + 1, 2)
""",
    ),
    Alternative(
        NB,
        "nonzero-count",
        "float-formula",
        """
NONZERO = torch.count_nonzero(mask_then_softmax(torch.randn(8, 8)))
n_visible = lambda T: T * (T + 1) / 2
""",
    ),
]
