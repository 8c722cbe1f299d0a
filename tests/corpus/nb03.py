"""Notebook 03: answers written from scratch for the causal softmax and the nonzero count."""

from functools import partial

from tests.corpus import Choose, Writer, exported, variants
from tests.corpus.fragments import (
    IMPORTS,
    MASK_THEN_SOFTMAX,
    MASKS,
    SOFTMAXES,
    body,
    weights_lines,
)

NB = "03_mask_then_softmax.ipynb"


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


MUTATIONS, ALTERNATIVES = exported(NB, WRITERS)
