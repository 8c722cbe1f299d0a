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


# ---- writers: answers from scratch, drawn by hypothesis --------------------------------------

from functools import partial  # noqa: E402

from tests.corpus import Choose, Writer, variants  # noqa: E402
from tests.corpus.fragments import (  # noqa: E402
    IMPORTS,
    MASK_THEN_SOFTMAX,
    MASKS,
    SOFTMAXES,
    body,
    weights_lines,
)

TRILS = [
    "tril = torch.tril(torch.ones(T, T, device=scores.device))",
    "tril = torch.ones(T, T, device=scores.device).tril()",
    "tril = torch.ones_like(scores[..., :, :]).tril()[(0,) * (scores.dim() - 2)]",
]


def mask_then_softmax(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    lines = weights_lines(choose, mistake, way, tril="tril")
    return f"""{IMPORTS}
def mask_then_softmax(scores):
    T = scores.shape[-1]
    {choose("tril", TRILS)}
    wei = scores
{body(lines)}
    return wei
"""


def batch_softmax(choose: Choose) -> str:
    """softmax-dim over the batch axis (dim=0), with a finite fill."""
    return f"""{IMPORTS}
def mask_then_softmax(scores):
    T = scores.shape[-1]
    {choose("tril", TRILS)}
    wei = scores.masked_fill(tril == 0, float("-inf"))
    return F.softmax(wei, dim=0)
"""


COUNTS = {
    None: [
        "NONZERO = 36\n\ndef n_visible(T):\n    return T * (T + 1) // 2\n",
        "NONZERO = int(torch.count_nonzero(torch.softmax(torch.zeros(8, 8).masked_fill("
        "torch.tril(torch.ones(8, 8)) == 0, float('-inf')), -1)))\n\n"
        "def n_visible(T):\n    return sum(range(1, T + 1))\n",
        "NONZERO = 8 * 9 // 2\n\ndef n_visible(T):\n"
        "    count = 0\n    for t in range(T):\n        count += t + 1\n    return count\n",
    ],
    "fill-zero": [
        "NONZERO = 64\n\ndef n_visible(T):\n    return T * (T + 1) // 2\n",
        "NONZERO = 36\n\ndef n_visible(T):\n    return T * T\n",
        "NONZERO = int(torch.count_nonzero(torch.softmax(torch.zeros(8, 8).masked_fill("
        "torch.tril(torch.ones(8, 8)) == 0, 0.0), -1)))\n\n"
        "def n_visible(T):\n    return T ** 2\n",
    ],
}


def counts(choose: Choose, mistake: str | None, way: int) -> str:
    return IMPORTS + COUNTS[mistake][way]


def _writers() -> list[Writer]:
    ws = variants("mask-then-softmax", "mask", mask_then_softmax, "mask", len(MASKS[None]))
    ws.append(Writer("mask-then-softmax", "softmax-dim", "batch-axis", batch_softmax))
    for table in (MASKS, SOFTMAXES, MASK_THEN_SOFTMAX):
        for mistake, pieces in table.items():
            for way in range(len(pieces) if mistake else 0):
                fn = partial(mask_then_softmax, mistake=mistake, way=way)
                ws.append(Writer("mask-then-softmax", mistake, f"weights-{way}", fn))
    for mistake, forms in COUNTS.items():
        for way in range(len(forms)):
            fn = partial(counts, mistake=mistake, way=way)
            ws.append(Writer("nonzero-count", mistake, f"count-{way}", fn))
    return ws


WRITERS = _writers()
