"""Notebook 04: mistakes and alternatives of the version-4 head, `attend`."""

from tests.corpus import Alternative, Mutation

NB = "04_value_aggregation.ipynb"
KT = "k.transpose(-2, -1)"
MASK_LINE = 'wei = wei.masked_fill(tril == 0, float("-inf"))'
SOFTMAX_LINE = "wei = F.softmax(wei, dim=-1)"


def _m(mistake: str, *pairs: tuple[str, str], label: str = "") -> Mutation:
    return Mutation(NB, "attend", mistake, tuple(pairs), label)


MUTATIONS = [
    _m("transpose-batch", (KT, "k.transpose(0, 1)"), label="transpose01"),
    _m("transpose-batch", (KT, "k.T"), label="dot-T"),
    _m("transpose-batch", (KT, "k.transpose(0, 1).transpose(-2, -1)"), label="mixed"),
    _m("swapped-qk", ("q @ k.transpose", "k @ q.transpose")),
    _m("tied-qk", ("k = key(x)", "k = query(x)")),
    _m("bias", ("v = value(x)", "v = F.linear(x, value.weight, torch.ones(value.out_features))")),
    _m("triu-mask", ("torch.tril(", "torch.triu(")),
    _m("mask-polarity", ("tril == 0", "tril == 1")),
    _m("fill-zero", ('float("-inf")', "0.0")),
    _m(
        "mask-after-softmax",
        (MASK_LINE, "wei = F.softmax(wei, dim=-1)"),
        ("# (B,T,T)\n    " + SOFTMAX_LINE, "# (B,T,T)\n    wei = wei.masked_fill(tril == 0, 0.0)"),
    ),
    _m("softmax-dim", ("dim=-1", "dim=1")),
    _m("aggregate-x", ("return wei @ v", "return wei @ x")),
    _m("v-at-wei", ("return wei @ v", "return v @ wei"), label="plain"),
    _m("v-at-wei", ("return wei @ v", "return (v.mT @ wei).mT"), label="transposed"),
]

ALTERNATIVES = [
    Alternative(
        NB,
        "attend",
        "einsum-where",
        """
def attend(x, key, query, value):
    T = x.shape[1]
    scores = torch.einsum("btd,bsd->bts", query(x), key(x))
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    wei = torch.where(keep, scores, -1e9).softmax(-1)
    return torch.einsum("bts,bsd->btd", wei, value(x))
""",
    ),
    Alternative(
        NB,
        "attend",
        "references",
        """
def attend(x, key, query, value):
    return mask_then_softmax(affinities(x, key, query)) @ value(x)
""",
    ),
    Alternative(
        NB,
        "attend",
        "sdpa-unscaled",
        """
def attend(x, key, query, value):
    q, k, v = query(x), key(x), value(x)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
""",
    ),
    Alternative(
        NB,
        "attend",
        "loops",
        """
def attend(x, key, query, value):
    B, T, _ = x.shape
    q, k, v = query(x), key(x), value(x)
    out = torch.zeros(B, T, v.shape[-1])
    for b in range(B):
        for t in range(T):
            w = torch.softmax(k[b, : t + 1] @ q[b, t], dim=0)
            out[b, t] = w @ v[b, : t + 1]
    return out
""",
    ),
]


# ---- writers: answers from scratch, drawn by hypothesis --------------------------------------

from functools import partial  # noqa: E402

from tests.corpus import Choose, Writer, variants  # noqa: E402
from tests.corpus.fragments import (  # noqa: E402
    AGGREGATES,
    IMPORTS,
    MASKS,
    SCORES,
    SOFTMAXES,
    UNSCALED,
    aggregate_line,
    body,
    scaled_scores,
    weights_lines,
)

PROJECT = [
    "k = key(x)\nq = query(x)\nv = value(x)",
    "k, q, v = key(x), query(x), value(x)",
    "q = query(x)\nk = key(x)\nv = value(x)",
]
ATTEND_TRILS = [
    "torch.tril(torch.ones(T, T, device=x.device))",
    "torch.ones(T, T, device=x.device).tril()",
]


def attend(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    scores = scaled_scores(choose, mistake, way, UNSCALED)
    weights = weights_lines(choose, mistake, way, tril="tril", query_axis="1")
    return f"""{IMPORTS}
def attend(x, key, query, value):
    B, T, C = x.shape
{body(choose("project", PROJECT))}
    hs = k.shape[-1]
{body(scores)}
    tril = {choose("tril", ATTEND_TRILS)}
{body(weights)}
{body(aggregate_line(choose, mistake, way))}
    return out
"""


def each_way(grade_id: str, write, tables: list[dict], label: str) -> list[Writer]:
    """One Writer per wrong piece of the tables (the rest of the answer drawn)."""
    ws = []
    for table in tables:
        for mistake, pieces in table.items():
            for way in range(len(pieces) if mistake else 0):
                fn = partial(write, mistake=mistake, way=way)
                ws.append(Writer(grade_id, mistake, f"{label}-{way}", fn))
    return ws


def _writers() -> list[Writer]:
    from tests.corpus.fragments import MASK_THEN_SOFTMAX

    ws = variants("attend", "scores", attend, "scores", len(SCORES[None]))
    after = {"mask-after-softmax": MASK_THEN_SOFTMAX["mask-after-softmax"]}
    ws += each_way("attend", attend, [SCORES, MASKS, SOFTMAXES, after, AGGREGATES], "piece")
    return ws


WRITERS = _writers()
