"""Notebook 01: answers written from scratch for the three averaging cells."""

from functools import partial

from tests.corpus import Choose, Writer, exported, variants
from tests.corpus.fragments import IMPORTS, body, weights_lines

NB = "01_uniform_averaging.ipynb"

LOOP_INITS = [
    "out = torch.zeros_like(x)",
    "out = torch.empty_like(x)",
    "out = x.new_zeros(x.shape)",
]

# average-loop: the statement computing out[b, t] (the loops around it are the template's)
LOOP_BODIES = {
    None: [
        "out[b, t] = x[b, : t + 1].mean(0)",
        "out[b, t] = x[b, : t + 1].sum(dim=0) / (t + 1)",
        "out[b, t] = torch.mean(x[b, 0 : t + 1], dim=0)",
    ],
    "loop-exclusive": [
        "out[b, t] = x[b, :t].mean(0)",
        "out[b, t] = x[b, :t].mean(0) if t > 0 else torch.zeros(C)",
        "out[b, t] = x[b, :t].mean(0) if t > 0 else x[b, 0]",
    ],
    "triu-mask": [
        "out[b, t] = x[b, t:].mean(0)",
        "out[b, t] = x[b].flip(0)[: T - t].mean(0)",
    ],
    "tril-unnormalised": [
        "out[b, t] = x[b, : t + 1].sum(0)",
        "out[b, t] = x[b, t] + (out[b, t - 1] if t > 0 else 0)",
    ],
    "fill-zero": ["out[b, t] = x[b].mean(0)", "out[b, t] = sum(x[b, s] for s in range(T)) / T"],
    "mask-after-softmax": ["out[b, t] = x[b, : t + 1].sum(0) / T"],
    "mask-polarity": ["out[b, t] = x[b, t + 1 :].mean(0)"],
}

RUNNING = {
    None: "total = total + x[b, t]\nout[b, t] = total / (t + 1)",
    "loop-exclusive": "out[b, t] = total / max(t, 1)\ntotal = total + x[b, t]",
    "tril-unnormalised": "total = total + x[b, t]\nout[b, t] = total",
}


def loop_slice(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    stmt = LOOP_BODIES[mistake][way] if mistake else choose("body", LOOP_BODIES[None])
    init = choose("init", LOOP_INITS)
    return f"""{IMPORTS}
def average_loop(x):
    B, T, C = x.shape
    {init}
    for b in range(B):
        for t in range(T):
            {stmt}
    return out
"""


def loop_running(choose: Choose, mistake: str | None = None) -> str:
    init = choose("init", LOOP_INITS)
    return f"""{IMPORTS}
def average_loop(x):
    B, T, C = x.shape
    {init}
    for b in range(B):
        total = torch.zeros(C, dtype=x.dtype)
        for t in range(T):
{body(RUNNING[mistake], 12)}
    return out
"""


def loop_backwards(choose: Choose) -> str:
    """triu-mask: a running total from the end, the future averaged."""
    init = choose("init", LOOP_INITS)
    return f"""{IMPORTS}
def average_loop(x):
    B, T, C = x.shape
    {init}
    for b in range(B):
        total = torch.zeros(C, dtype=x.dtype)
        for t in reversed(range(T)):
            total = total + x[b, t]
            out[b, t] = total / (T - t)
    return out
"""


def loop_stacked(choose: Choose) -> str:
    return f"""{IMPORTS}
def average_loop(x):
    B, T, C = x.shape
    rows = [torch.stack([x[b, : t + 1].mean(0) for t in range(T)]) for b in range(B)]
    return torch.stack(rows)
"""


# average-matmul: the (T,T) matrix and how it is applied
MATRICES = {
    None: [
        "wei = torch.tril(torch.ones(T, T))\nwei = wei / wei.sum(1, keepdim=True)",
        "wei = torch.ones(T, T).tril()\nwei /= wei.sum(-1, keepdim=True)",
        "wei = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1).view(T, 1)",
        "counts = torch.arange(1, T + 1, dtype=x.dtype)\n"
        "wei = torch.tril(torch.ones(T, T)) / counts[:, None]",
    ],
    "tril-unnormalised": [
        "wei = torch.tril(torch.ones(T, T))",
        "wei = (torch.arange(T)[:, None] >= torch.arange(T)[None, :]).to(x.dtype)",
    ],
    "loop-exclusive": [
        "wei = torch.tril(torch.ones(T, T), diagonal=-1)\nwei = wei / wei.sum(1, keepdim=True)",
        "wei = torch.tril(torch.ones(T, T), -1)\nwei = wei / wei.sum(1, keepdim=True).clamp(min=1)",
    ],
    "triu-mask": [
        "wei = torch.triu(torch.ones(T, T))\nwei = wei / wei.sum(1, keepdim=True)",
        "wei = torch.tril(torch.ones(T, T)).T\nwei = wei / wei.sum(-1, keepdim=True)",
    ],
    "softmax-dim": [
        "wei = torch.tril(torch.ones(T, T))\nwei = wei / wei.sum(0, keepdim=True)",
    ],
}
APPLY = [
    "wei @ x",
    "torch.einsum('ts,bsc->btc', wei, x)",
    "torch.matmul(wei, x)",
    "torch.bmm(wei.expand(x.shape[0], T, T), x)",
]


def matmul(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    matrix = MATRICES[mistake][way] if mistake else choose("matrix", MATRICES[None])
    return f"""{IMPORTS}
def average_matmul(x):
    T = x.shape[1]
{body(matrix)}
    return {choose("apply", APPLY)}
"""


def cumsum(choose: Choose, mistake: str | None = None) -> str:
    divide = " / torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)"
    tail = "" if mistake == "tril-unnormalised" else divide
    return f"""{IMPORTS}
def average_matmul(x):
    return x.cumsum(dim=1){tail}
"""


TRILS = ["tril", "torch.tril(torch.ones(T, T))"]


def softmax(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    lines = weights_lines(choose, mistake, way, tril="tril", query_axis="0")
    return f"""{IMPORTS}
def average_softmax(x):
    T = x.shape[1]
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros((T, T))
{body(lines)}
    return {choose("apply", APPLY)}
"""


def unmasked_softmax(choose: Choose) -> str:
    """fill-zero, as forgetting the mask: every position weighs all T alike."""
    return f"""{IMPORTS}
def average_softmax(x):
    T = x.shape[1]
    wei = F.softmax(torch.zeros(T, T), dim=-1)
    return {choose("apply", APPLY)}
"""


def _writers() -> list[Writer]:
    ws = [
        *variants("average-loop", "slice", loop_slice, "body", len(LOOP_BODIES[None])),
        Writer("average-loop", None, "running-total", loop_running),
        Writer("average-loop", None, "stacked-rows", loop_stacked),
        Writer("average-loop", "triu-mask", "running-backwards", loop_backwards),
        *variants("average-matmul", "matrix", matmul, "matrix", len(MATRICES[None])),
        Writer("average-matmul", None, "cumsum", cumsum),
        *variants("average-softmax", "mask", softmax, "mask", 5),
        Writer("average-softmax", "fill-zero", "no-mask", unmasked_softmax),
        Writer(
            "average-matmul",
            "tril-unnormalised",
            "cumsum",
            partial(cumsum, mistake="tril-unnormalised"),
        ),
    ]
    for mistake in ("loop-exclusive", "tril-unnormalised"):
        ws.append(
            Writer("average-loop", mistake, "running-total", partial(loop_running, mistake=mistake))
        )
    for mistake, bodies in LOOP_BODIES.items():
        for way in range(len(bodies) if mistake else 0):
            fn = partial(loop_slice, mistake=mistake, way=way)
            ws.append(Writer("average-loop", mistake, f"slice-{way}", fn))
    for mistake, matrices in MATRICES.items():
        for way in range(len(matrices) if mistake else 0):
            fn = partial(matmul, mistake=mistake, way=way)
            ws.append(Writer("average-matmul", mistake, f"matrix-{way}", fn))
    from tests.corpus.fragments import MASK_THEN_SOFTMAX, MASKS, SOFTMAXES

    for table in (MASKS, SOFTMAXES, MASK_THEN_SOFTMAX):
        for mistake, pieces in table.items():
            for way in range(len(pieces) if mistake else 0):
                fn = partial(softmax, mistake=mistake, way=way)
                ws.append(Writer("average-softmax", mistake, f"weights-{way}", fn))
    return ws


WRITERS = _writers()


MUTATIONS, ALTERNATIVES = exported(NB, WRITERS)
