"""Notebook 05: mistakes and alternatives of the Head class."""

from tests.corpus import Alternative, Mutation

NB = "05_the_head.ipynb"
SCALE = "* k.shape[-1] ** -0.5"
MASK = 'wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B,T,T)'
DROP = "        wei = self.dropout(wei)  # (B,T,T)\n"
SOFTMAX = "        wei = F.softmax(wei, dim=-1)  # (B,T,T)\n"
BUFFER = 'self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))'

MUTATIONS = [
    Mutation(NB, "head", "no-scale", ((SCALE, ""),)),
    Mutation(NB, "head", "scale-by-C", ((SCALE, "* C**-0.5"),)),
    Mutation(NB, "head", "scale-no-sqrt", ((SCALE, "/ k.shape[-1]"),)),
    Mutation(
        NB,
        "head",
        "tril-not-buffer",
        ((BUFFER, "self.tril = torch.tril(torch.ones(block_size, block_size))"),),
    ),
    Mutation(
        NB,
        "head",
        "tril-not-buffer",
        ((BUFFER, "self.tril = nn.Parameter(torch.tril(torch.ones(block_size, block_size)))"),),
        label="parameter",
    ),
    Mutation(NB, "head", "tril-not-cropped", (("self.tril[:T, :T]", "self.tril"),)),
    Mutation(NB, "head", "bias", (("bias=False", "bias=True"),)),
    Mutation(
        NB,
        "head",
        "dropout-misplaced",
        ((DROP, ""), ("out = wei @ v", "out = self.dropout(wei @ v)")),
        label="on-output",
    ),
    Mutation(
        NB, "head", "dropout-misplaced", ((DROP, ""), (SOFTMAX, DROP + SOFTMAX)), label="on-scores"
    ),
    Mutation(
        NB,
        "head",
        "dropout-misplaced",
        (("self.dropout(wei)", "F.dropout(wei, self.dropout.p)"),),
        label="active-in-eval",
    ),
    Mutation(
        NB,
        "head",
        "dropout-misplaced",
        (("wei = self.dropout(wei)", "self.dropout(wei)"),),
        label="result-discarded",
    ),
    Mutation(
        NB,
        "head",
        "hardcoded-device",
        (("self.tril[:T, :T] == 0", "self.tril[:T, :T].cuda() == 0"),),
        label="cuda",
    ),
    Mutation(
        NB,
        "head",
        "hardcoded-device",
        (
            (
                "self.tril[:T, :T] == 0",
                'torch.tril(torch.ones(T, T, device="cpu")) == 0',
            ),
        ),
        label="device-cpu",
    ),
    Mutation(
        NB,
        "head",
        "mask-in-place",
        (
            (
                MASK,
                "mask = self.tril[:T, :T]\n"
                '        mask.masked_fill_(mask == 0, float("-inf"))\n'
                "        mask.masked_fill_(mask == 1, 0.0)\n"
                "        wei = wei + mask",
            ),
        ),
    ),
    Mutation(
        NB,
        "head",
        "mask-in-place",
        ((MASK, "wei = wei + self.tril[:T, :T].log_()"),),
        label="log-in-place",
    ),
]

ALTERNATIVES = [
    Alternative(
        NB,
        "head",
        "einsum-where-scaled-q",
        """
import math


class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.head_size = head_size
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("tril", torch.ones(block_size, block_size).tril().bool())

    def forward(self, x):
        T = x.size(1)
        q = self.query(x) / math.sqrt(self.head_size)
        k = self.key(x)
        scores = torch.einsum("btd,bsd->bts", q, k)
        scores = torch.where(self.tril[:T, :T], scores, torch.full_like(scores, -1e9))
        return torch.einsum("bts,bsd->btd", self.dropout(scores.softmax(-1)), self.value(x))
""",
    ),
    Alternative(
        NB,
        "head",
        "bmm-inplace-on-scores-nonpersistent",
        """
class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("tril", mask, persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        hs = k.size(-1)
        wei = torch.bmm(q, k.permute(0, 2, 1)) / hs**0.5
        wei.masked_fill_(self.tril[:T, :T].logical_not(), float("-inf"))
        wei = torch.softmax(wei, dim=2)
        wei = self.dropout(wei)
        return torch.bmm(wei, v)
""",
    ),
    Alternative(
        NB,
        "head",
        "loops-over-queries",
        """
class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        T = x.shape[1]
        k, q, v = self.key(x), self.query(x), self.value(x)
        scale = k.shape[-1] ** -0.5
        scores = (q @ k.transpose(1, 2)) * scale
        mask = self.tril[:T, :T].to(dtype=torch.bool)
        scores = scores.masked_fill(~mask, float("-inf"))
        wei = self.dropout(F.softmax(scores, dim=-1))
        rows = [(wei[:, t : t + 1, : t + 1] @ v[:, : t + 1]).squeeze(1) for t in range(T)]
        return torch.stack(rows, dim=1)
""",
    ),
]


# ---- writers: answers from scratch, drawn by hypothesis --------------------------------------

from tests.corpus import Choose, Writer, variants  # noqa: E402
from tests.corpus.fragments import (  # noqa: E402
    AGGREGATES,
    IMPORTS,
    MASK_THEN_SOFTMAX,
    MASKS,
    SCALES,
    SCORES,
    SOFTMAXES,
    aggregate_line,
    body,
    scaled_scores,
    weights_lines,
)
from tests.corpus.nb04 import each_way  # noqa: E402

LINEAR = "nn.Linear(n_embd, head_size, bias=False)"
PROJECTIONS = {
    None: [
        f"self.key = {LINEAR}\nself.query = {LINEAR}\nself.value = {LINEAR}",
        f"self.query = {LINEAR}\nself.key = {LINEAR}\nself.value = {LINEAR}",
    ],
    "bias": [
        "self.key = nn.Linear(n_embd, head_size)\nself.query = nn.Linear(n_embd, head_size)\n"
        "self.value = nn.Linear(n_embd, head_size)",
        "self.key, self.query, self.value = "
        "(nn.Linear(n_embd, head_size, bias=True) for _ in range(3))",
        f"self.key = {LINEAR}\nself.query = {LINEAR}\nself.value = nn.Linear(n_embd, head_size)",
    ],
}
ONES = "torch.ones(block_size, block_size)"
REGISTER = {
    None: [
        f'self.register_buffer("tril", torch.tril({ONES}))',
        f'self.register_buffer("tril", {ONES}.tril())',
        f'self.register_buffer("tril", torch.tril({ONES}), persistent=False)',
    ],
    "tril-not-buffer": [
        f"self.tril = torch.tril({ONES})",
        f"self.tril = nn.Parameter(torch.tril({ONES}), requires_grad=False)",
        "self.block_size = block_size",
    ],
}
TRIL_EXPR = {
    None: ["self.tril[:T, :T]"],
    "tril-not-cropped": ["self.tril", "self.tril[:T]", "self.tril[:, :T]"],
    "hardcoded-device": [
        "self.tril[:T, :T].cuda()",
        "self.tril[:T, :T].to('cpu')",
        "torch.tril(torch.ones(T, T, device='cpu'))",
    ],
}
FORWARD_BUILT = "torch.tril(torch.ones(T, T, device=x.device))"  # no buffer at all
# (before the weights, after the weights, after the output)
DROPOUT = {
    None: [("", "wei = self.dropout(wei)", "")],
    "dropout-misplaced": [
        ("", "", "out = self.dropout(out)"),
        ("wei = self.dropout(wei)", "", ""),
        ("", "wei = F.dropout(wei, self.dropout.p)", ""),
        ("", "self.dropout(wei)", ""),
    ],
}
IN_PLACE = {
    "mask-in-place": [
        'mask = self.tril[:T, :T]\nmask.masked_fill_(mask == 0, float("-inf"))\n'
        "mask.masked_fill_(mask == 1, 0.0)\nwei = F.softmax(wei + mask, dim=-1)",
        "wei = F.softmax(wei + self.tril[:T, :T].log_(), dim=-1)",
        'self.tril[:T, :T].masked_fill_(self.tril[:T, :T] == 0, float("-inf"))\n'
        "wei = (wei + self.tril[:T, :T].clamp(max=0.0)).softmax(-1)",
    ],
}
PROJECT = [
    "k = self.key(x)\nq = self.query(x)\nv = self.value(x)",
    "k, q, v = self.key(x), self.query(x), self.value(x)",
]
USES_TRIL = [m for m in MASKS[None] if "{tril}" in m]


def head(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    """The Head class; `mistake` (with `way`) picks which part is written wrong."""
    proj = PROJECTIONS.get(mistake, PROJECTIONS[None])
    register = (
        REGISTER[mistake][way] if mistake == "tril-not-buffer" else choose("reg", REGISTER[None])
    )
    tril = TRIL_EXPR[mistake][way] if mistake in TRIL_EXPR else TRIL_EXPR[None][0]
    if register == "self.block_size = block_size":
        tril = FORWARD_BUILT
    before, after, end = DROPOUT[mistake][way] if mistake in DROPOUT else DROPOUT[None][0]
    structural = mistake in {"tril-not-cropped", "hardcoded-device", "tril-not-buffer"}
    structural = structural or mistake == "mask-in-place"

    def pick_mask(name: str, options: list) -> str:
        return choose(name, USES_TRIL if name == "mask" and structural else options)

    if mistake in IN_PLACE:
        weights = IN_PLACE[mistake][way]
    else:
        weights = weights_lines(pick_mask, mistake, way, tril=tril, query_axis="1")
    lines = [scaled_scores(choose, mistake, way, SCALES), before, weights, after]
    lines += [aggregate_line(choose, mistake, way), end]
    forward = "\n".join(line for line in lines if line)
    return f"""{IMPORTS}
class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
{body(proj[way] if mistake == "bias" else choose("proj", proj), 8)}
{body(register, 8)}
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
{body(choose("project", PROJECT), 8)}
        hs = k.shape[-1]
{body(forward, 8)}
        return out
"""


def _writers() -> list[Writer]:
    ws = variants("head", "scores", head, "scores", len(SCORES[None]))
    ws += variants("head", "register", head, "reg", len(REGISTER[None]))
    after = {"mask-after-softmax": MASK_THEN_SOFTMAX["mask-after-softmax"]}
    tables = [SCORES, SCALES, MASKS, SOFTMAXES, after, AGGREGATES, PROJECTIONS, REGISTER]
    tables += [TRIL_EXPR, DROPOUT, IN_PLACE]
    ws += each_way("head", head, tables, "piece")
    return ws


WRITERS = _writers()
