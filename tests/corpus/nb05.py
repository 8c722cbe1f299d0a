"""Notebook 05: answers written from scratch for the Head class."""

from tests.corpus import Choose, Writer, exported, variants
from tests.corpus.fragments import (
    AGGREGATES,
    IMPORTS,
    MASK_THEN_SOFTMAX,
    MASKS,
    SCALES,
    SCORES,
    SOFTMAXES,
    aggregate_line,
    body,
    held,
    scaled_scores,
    weights_lines,
)
from tests.corpus.nb04 import each_way

NB = "05_the_head.ipynb"


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
STRUCTURAL = {"tril-not-cropped", "hardcoded-device", "tril-not-buffer", "mask-in-place"}


def head(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    """The Head class; `mistake` (with `way`) picks which part is written wrong."""
    biased = held(mistake, {"bias"})
    proj = PROJECTIONS[biased] if biased else PROJECTIONS[None]
    unregistered = held(mistake, {"tril-not-buffer"})
    register = REGISTER[unregistered][way] if unregistered else choose("reg", REGISTER[None])
    mask_id = held(mistake, TRIL_EXPR)
    tril = TRIL_EXPR[mask_id][way % len(TRIL_EXPR[mask_id])] if mask_id else TRIL_EXPR[None][0]
    if register == "self.block_size = block_size":
        tril = FORWARD_BUILT
    dropped = held(mistake, DROPOUT)
    before, after, end = DROPOUT[dropped][way] if dropped else DROPOUT[None][0]
    structural = held(mistake, STRUCTURAL) is not None
    in_place = held(mistake, IN_PLACE)

    def pick_mask(name: str, options: list) -> str:
        return choose(name, USES_TRIL if name == "mask" and structural else options)

    if in_place:
        weights = IN_PLACE[in_place][way]
    else:
        weights = weights_lines(pick_mask, mistake, way, tril=tril, query_axis="1")
    lines = [scaled_scores(choose, mistake, way, SCALES), before, weights, after]
    lines += [aggregate_line(choose, mistake, way), end]
    forward = "\n".join(line for line in lines if line)
    return f"""{IMPORTS}
class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
{body(proj[way] if biased else choose("proj", proj), 8)}
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


# The whole-notebook tests take the mistakes a head adds to notebooks 02-04 (the others are
# graded there, and every writer of the head is graded in
# tests/unit/checks/test_diagnosis_corpus.py).
HEAD_MISTAKES = frozenset(
    {
        "no-scale",
        "scale-by-C",
        "scale-no-sqrt",
        "bias",
        "aggregate-x",
        "tril-not-buffer",
        "tril-not-cropped",
        "dropout-misplaced",
        "hardcoded-device",
        "mask-in-place",
    }
)
MUTATIONS, ALTERNATIVES = exported(NB, WRITERS, only=HEAD_MISTAKES)
