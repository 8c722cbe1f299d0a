"""Pieces of attention code, correct or with one catalog mistake, for the corpus writers.

Every piece is source text over the names the templates define: `x`, `q`, `k`, `v`, `wei`,
`T`, `hs`, `C`, and the mask expression `{tril}` (a (T,T) lower triangle of ones). A
writer picks one piece per slot with `choose` (drawn by hypothesis), so that each mistake is
met in the company of every correct way to write the rest.
"""

from __future__ import annotations

from textwrap import indent

from tests.corpus import Choose

IMPORTS = "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

ARANGE = "torch.arange({T}, device=wei.device)"
FUTURE = f"{ARANGE}[None, :] > {ARANGE}[:, None]"
ONES = "torch.ones({T}, {T}, device=wei.device)"
NEG = 'float("-inf")'

SCORES = {
    None: [
        "wei = q @ k.transpose(-2, -1)",
        "wei = torch.einsum('btd,bsd->bts', q, k)",
        "wei = torch.bmm(q, k.permute(0, 2, 1))",
        "wei = (q.unsqueeze(2) * k.unsqueeze(1)).sum(-1)",
        "wei = torch.matmul(q, k.mT)",
    ],
    "swapped-qk": [
        "wei = k @ q.transpose(-2, -1)",
        "wei = torch.einsum('btd,bsd->bts', k, q)",
        "wei = (q @ k.transpose(-2, -1)).transpose(-2, -1)",
    ],
    "tied-qk": [
        "wei = q @ q.transpose(-2, -1)",
        "wei = k @ k.transpose(-2, -1)",
        "k = q\nwei = q @ k.transpose(-2, -1)",
    ],
    "transpose-batch": [
        "wei = q @ k.transpose(0, 1)",
        "wei = q @ k.transpose(0, 1).transpose(-2, -1)",
        "wei = torch.einsum('btd,tsd->bts', q, k)",
    ],
}

# (position, code): "pre" scales q before the scores, "post" scales the scores
SCALES = {
    None: [
        ("post", "wei = wei * hs ** -0.5"),
        ("post", "wei = wei / math.sqrt(hs)"),
        ("pre", "q = q * hs ** -0.5"),
        ("post", "wei = torch.div(wei, k.size(-1) ** 0.5)"),
    ],
    "no-scale": [
        ("post", ""),
        ("post", "wei = wei * 1.0"),
        ("pre", "q = q * 1"),
    ],
    "scale-by-C": [
        ("post", "wei = wei * C ** -0.5"),
        ("post", "wei = wei / math.sqrt(x.shape[-1])"),
        ("pre", "q = q / x.size(-1) ** 0.5"),
    ],
    "scale-no-sqrt": [
        ("post", "wei = wei / hs"),
        ("post", "wei = wei * k.shape[-1] ** -1"),
        ("pre", "q = q / hs"),
    ],
}
UNSCALED = {None: [("post", "")]}

MASKS = {
    None: [
        'wei = wei.masked_fill({tril} == 0, float("-inf"))',
        "wei = torch.where({tril}.bool(), wei, torch.full_like(wei, -1e9))",
        "wei = wei.masked_fill(~{tril}.bool(), -1e30)",
        'wei = wei + torch.zeros_like({tril}).masked_fill({tril} == 0, float("-inf"))',
        f'wei = wei.masked_fill({FUTURE}, float("-inf"))',
    ],
    "triu-mask": [
        f"wei = wei.masked_fill(torch.triu({ONES}) == 0, {NEG})",
        "wei = torch.where({tril}.T.bool(), wei, torch.full_like(wei, -1e9))",
        f'wei = wei.masked_fill({ARANGE}[None, :] < {ARANGE}[:, None], float("-inf"))',
    ],
    "mask-polarity": [
        'wei = wei.masked_fill({tril} == 1, float("-inf"))',
        "wei = torch.where({tril}.bool(), torch.full_like(wei, -1e9), wei)",
        f'wei = wei.masked_fill({ARANGE}[None, :] <= {ARANGE}[:, None], float("-inf"))',
    ],
    "loop-exclusive": [
        f"wei = wei.masked_fill(torch.tril({ONES}, diagonal=-1) == 0, {NEG})",
        f"wei = torch.where({ARANGE}[None, :] < {ARANGE}[:, None], wei, wei.new_full((), -1e9))",
        'wei = wei.masked_fill({tril}.T == 1, float("-inf"))',
    ],
    "fill-zero": [
        "wei = wei.masked_fill({tril} == 0, 0.0)",
        "wei = torch.where({tril}.bool(), wei, torch.zeros_like(wei))",
        "wei = wei * {tril}",
    ],
}

SOFTMAXES = {
    None: [
        "wei = F.softmax(wei, dim=-1)",
        "wei = wei.softmax(-1)",
        "wei = torch.softmax(wei, dim=-1)",
        "wei = torch.exp(wei - wei.amax(-1, keepdim=True))\nwei = wei / wei.sum(-1, keepdim=True)",
    ],
    "softmax-dim": [
        "wei = F.softmax(wei, dim=-2)",
        "wei = torch.exp(wei) / torch.exp(wei).sum(-2, keepdim=True)",
        "wei = wei.softmax({query_axis})",
    ],
}

MASK_THEN_SOFTMAX = {
    "mask-after-softmax": [
        "wei = F.softmax(wei, dim=-1)\nwei = wei.masked_fill({tril} == 0, 0.0)",
        "wei = wei.softmax(-1) * {tril}",
        "wei = torch.where({tril}.bool(), F.softmax(wei, dim=-1), torch.zeros_like(wei))",
    ],
    "tril-unnormalised": [
        "wei = torch.exp(wei).masked_fill({tril} == 0, 0.0)",
        "wei = torch.exp(wei) * {tril}",
        "wei = torch.where({tril}.bool(), wei.exp(), torch.zeros_like(wei))",
    ],
}

AGGREGATES = {
    None: [
        "out = wei @ {v}",
        "out = torch.einsum('bts,bsd->btd', wei, {v})",
        "out = torch.bmm(wei, {v})",
        "out = torch.stack([(wei[:, t, :, None] * {v}).sum(1) for t in range(T)], dim=1)",
    ],
    "aggregate-x": [
        "out = wei @ x",
        "out = torch.einsum('bts,bsc->btc', wei, x)",
        "out = torch.bmm(wei, x)",
    ],
    "v-at-wei": [
        "out = {v} @ wei",
        "out = ({v}.transpose(-2, -1) @ wei).transpose(-2, -1)",
        "out = torch.einsum('bts,btd->bsd', wei, {v})",
        "out = wei.mT @ {v}",
    ],
}

MASK_IDS = set(MASKS) - {None}
SOFTMAX_IDS = set(SOFTMAXES) - {None}
JOINT_IDS = set(MASK_THEN_SOFTMAX)
WEIGHT_IDS = MASK_IDS | SOFTMAX_IDS | JOINT_IDS
# what a mask mistake makes of the lower triangle, for a joint piece that masks with {tril}
SEEN_BY = {
    "triu-mask": "{tril}.T",
    "mask-polarity": "(1 - {tril})",
    "loop-exclusive": "torch.tril({tril}, -1)",
}

# one catalog id, several (a piece each, from different tables), or None
Mistakes = str | tuple[str, ...] | None


def ids(mistake: Mistakes) -> tuple[str, ...]:
    if mistake is None:
        return ()
    return (mistake,) if isinstance(mistake, str) else tuple(mistake)


def held(mistake: Mistakes, table: dict | set | tuple) -> str | None:
    """The id of `mistake` (one, or one of several) that `table` holds, or None."""
    return next((m for m in ids(mistake) if m in table), None)


def pick(choose: Choose, name: str, table: dict, mistake: Mistakes, way: int | None) -> str:
    """The piece of `table` for the mistake it holds (way `way` of it) or a correct piece
    (drawn)."""
    for m in ids(mistake):
        if m in table:
            return table[m][(way or 0) % len(table[m])]
    return choose(name, table[None])


def weights_lines(
    choose: Choose,
    mistake: Mistakes,
    way: int | None,
    tril: str,
    T: str = "T",
    query_axis: str = "-2",
) -> str:
    """Scores `wei` -> weights `wei`: mask then softmax, with the mistakes of either, or a
    joint piece (masked after the softmax, unnormalised) under the mask a mask mistake sees."""
    joint = [m for m in ids(mistake) if m in JOINT_IDS]
    if joint:
        seen = [SEEN_BY[m] for m in ids(mistake) if m in SEEN_BY]
        tril = seen[0].replace("{tril}", tril) if seen else tril
        text = pick(choose, "joint", MASK_THEN_SOFTMAX, joint[0], way)
    else:
        mask = pick(choose, "mask", MASKS, mistake, way)
        softmax = pick(choose, "softmax", SOFTMAXES, mistake, way)
        text = mask + "\n" + softmax
    return text.replace("{T}", T).replace("{tril}", tril).replace("{query_axis}", query_axis)


def scaled_scores(choose: Choose, mistake: Mistakes, way: int | None, scales: dict = SCALES) -> str:
    """q, k -> scores `wei`, scaled as `scales` says (or one mistake of the scores or scale)."""
    where, scale = pick(choose, "scale", scales, mistake, way)
    scores = pick(choose, "scores", SCORES, mistake, way)
    lines = [scale, scores] if where == "pre" else [scores, scale]
    return "\n".join(line for line in lines if line)


def aggregate_line(choose: Choose, mistake: Mistakes, way: int | None, v: str = "v") -> str:
    return pick(choose, "aggregate", AGGREGATES, mistake, way).replace("{v}", v)


def body(text: str, spaces: int = 4) -> str:
    """Indent a block of statements for a function body."""
    return indent(text.strip("\n"), " " * spaces)


def ways(table: dict, mistake: str) -> int:
    return len(table[mistake])
