"""Notebook 06: mistakes and alternatives of capture-attention, unmasked-head, value-ablation."""

from tests.corpus import Alternative, Mutation

NB = "06_experiments.ipynb"
SCALE = "k.shape[-1] ** -0.5"
MASK_THEN_SOFTMAX = (
    'wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B,T,T)\n'
    "        wei = F.softmax(wei, dim=-1)  # (B,T,T)"
)

MUTATIONS = [
    # unmasked-head: the usual head mistakes, made while rewriting forward without the mask
    Mutation(NB, "unmasked-head", "no-scale", ((f" * {SCALE}", ""),)),
    Mutation(NB, "unmasked-head", "scale-by-C", ((SCALE, "C ** -0.5"),)),
    Mutation(NB, "unmasked-head", "scale-no-sqrt", ((SCALE, "k.shape[-1] ** -1"),)),
    Mutation(NB, "unmasked-head", "softmax-dim", (("dim=-1", "dim=-2"),)),
    Mutation(NB, "unmasked-head", "aggregate-x", (("return wei @ v", "return wei @ x"),)),
    # value-ablation: aggregate-x is the intended change here; the rest are mistakes
    Mutation(NB, "value-ablation", "v-at-wei", (("return wei @ x", "return x @ wei"),)),
    Mutation(NB, "value-ablation", "softmax-dim", (("dim=-1", "dim=-2"),)),
    Mutation(NB, "value-ablation", "no-scale", ((f" * {SCALE}", ""),)),
    Mutation(NB, "value-ablation", "scale-by-C", ((SCALE, "C ** -0.5"),)),
    Mutation(NB, "value-ablation", "scale-no-sqrt", ((SCALE, "k.shape[-1] ** -1"),)),
    Mutation(NB, "value-ablation", "fill-zero", (('float("-inf")', "0.0"),)),
    Mutation(NB, "value-ablation", "mask-polarity", (("tril[:T, :T] == 0", "tril[:T, :T] == 1"),)),
    Mutation(
        NB,
        "value-ablation",
        "triu-mask",
        (("torch.tril(torch.ones(", "torch.triu(torch.ones("),),
    ),
    Mutation(
        NB,
        "value-ablation",
        "mask-after-softmax",
        (
            (
                MASK_THEN_SOFTMAX,
                "wei = F.softmax(wei, dim=-1)\n"
                "        wei = wei.masked_fill(self.tril[:T, :T] == 0, 0.0)",
            ),
        ),
    ),
    Mutation(NB, "value-ablation", "tril-not-cropped", (("self.tril[:T, :T]", "self.tril"),)),
]

ALTERNATIVES = [
    Alternative(
        NB,
        "capture-attention",
        "pre-hook",
        """
def capture_attention(head, x):
    store = {}
    handle = head.dropout.register_forward_pre_hook(
        lambda module, args: store.update(wei=args[0].detach().clone())
    )
    try:
        head(x)
    finally:
        handle.remove()
    return store["wei"]
""",
    ),
    Alternative(
        NB,
        "capture-attention",
        "output-in-eval-mode",
        """
def capture_attention(head, x):
    weights = []
    handle = head.dropout.register_forward_hook(lambda m, inp, out: weights.append(out))
    was_training = head.training
    head.eval()
    with torch.no_grad():
        head(x)
    handle.remove()
    head.train(was_training)
    return weights[0]
""",
    ),
    Alternative(
        NB,
        "unmasked-head",
        "mask-of-ones",
        """
class UnmaskedHead(Head):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__(n_embd, head_size, block_size, dropout)
        self.tril.fill_(1.0)  # nothing is masked: Head.forward runs unchanged
""",
    ),
    Alternative(
        NB,
        "unmasked-head",
        "einsum-scaled-q",
        """
class UnmaskedHead(Head):
    def forward(self, x):
        q = self.query(x) * self.query.out_features ** -0.5
        k = self.key(x)
        wei = torch.einsum("btd,bsd->bts", q, k).softmax(-1)
        wei = self.dropout(wei)
        return torch.einsum("bts,bsd->btd", wei, self.value(x))
""",
    ),
    Alternative(
        NB,
        "value-ablation",
        "sdpa",
        """
class NoValueHead(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.dropout_p = dropout

    def forward(self, x):
        q, k = self.query(x), self.key(x)
        p = self.dropout_p if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, x, dropout_p=p, is_causal=True)
""",
    ),
    Alternative(
        NB,
        "value-ablation",
        "subclass-where-large-negative",
        """
class NoValueHead(Head):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__(n_embd, head_size, block_size, dropout)
        del self.value

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1) / math.sqrt(self.key.out_features)
        wei = torch.where(self.tril[:T, :T].bool(), wei, torch.full_like(wei, -1e9))
        return self.dropout(torch.softmax(wei, dim=-1)) @ x
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

HOOKS = [
    (
        "handle = head.dropout.register_forward_hook(lambda m, inputs, output: "
        "store.append(inputs[0].detach()))"
    ),
    (
        "handle = head.dropout.register_forward_pre_hook(lambda m, inputs: "
        "store.append(inputs[0].detach().clone()))"
    ),
    (
        "handle = head.dropout.register_forward_hook(lambda m, inputs, output: "
        "store.append(output.detach()))"
    ),
]


def capture(choose: Choose) -> str:
    return f"""{IMPORTS}
def capture_attention(head, x):
    store = []
    {choose("hook", HOOKS)}
    try:
        with torch.no_grad():
            head(x)
    finally:
        handle.remove()
    return store[-1]
"""


def recompute(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    """Recomputes the weights instead of capturing them, with a mistake on the way."""
    lines = weights_lines(choose, mistake, way, tril="head.tril[:T, :T]", query_axis="1")
    return f"""{IMPORTS}
def capture_attention(head, x):
    B, T, C = x.shape
    k, q = head.key(x), head.query(x)
    hs = k.shape[-1]
{body(scaled_scores(choose, mistake, way, SCALES))}
{body(lines)}
    return wei.detach()
"""


def unmasked(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    softmax = SOFTMAXES[mistake][way] if mistake in SOFTMAXES and mistake else None
    softmax = (softmax or choose("softmax", SOFTMAXES[None])).replace("{query_axis}", "1")
    return f"""{IMPORTS}
class UnmaskedHead(Head):
    def forward(self, x):
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        hs = k.shape[-1]
{body(scaled_scores(choose, mistake, way, SCALES), 8)}
{body(softmax, 8)}
        wei = self.dropout(wei)
{body(aggregate_line(choose, mistake, way), 8)}
        return out
"""


NO_VALUE_TRILS = {
    None: ["self.tril[:T, :T]"],
    "tril-not-cropped": ["self.tril", "self.tril[:T]", "self.tril[:, :T]"],
}
X_AT_WEI = {
    "v-at-wei": [
        "out = x @ wei",
        "out = (x.transpose(-2, -1) @ wei).transpose(-2, -1)",
        "out = torch.einsum('bts,btc->bsc', wei, x)",
        "out = wei.mT @ x",
    ]
}
USES_TRIL = [m for m in MASKS[None] if "{tril}" in m]


def no_value(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    cropped = mistake == "tril-not-cropped"
    tril = NO_VALUE_TRILS[mistake][way] if cropped else NO_VALUE_TRILS[None][0]

    def pick_mask(name: str, options: list) -> str:
        return choose(name, USES_TRIL if name == "mask" and cropped else options)

    weights = weights_lines(pick_mask, mistake, way, tril=tril, query_axis="1")
    if mistake == "v-at-wei":
        out = X_AT_WEI[mistake][way]
    else:
        out = aggregate_line(choose, None, None, v="x")
    return f"""{IMPORTS}
class NoValueHead(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k, q = self.key(x), self.query(x)
        hs = k.shape[-1]
{body(scaled_scores(choose, mistake, way, SCALES), 8)}
{body(weights, 8)}
        wei = self.dropout(wei)
{body(out, 8)}
        return out
"""


def _writers() -> list[Writer]:
    ws = variants("capture-attention", "hook", capture, "hook", len(HOOKS))
    scales = {k: v for k, v in SCALES.items() if k}
    ws += each_way("capture-attention", recompute, [scales, SOFTMAXES], "recomputed")
    swapped = {"swapped-qk": SCORES["swapped-qk"]}
    ws += each_way("capture-attention", recompute, [swapped], "recomputed")
    ws += variants("unmasked-head", "scores", unmasked, "scores", 3)
    aggregate_x = {"aggregate-x": AGGREGATES["aggregate-x"]}
    ws += each_way("unmasked-head", unmasked, [scales, SOFTMAXES, aggregate_x], "piece")
    ws += variants("value-ablation", "scores", no_value, "scores", 4)
    after = {"mask-after-softmax": MASK_THEN_SOFTMAX["mask-after-softmax"]}
    tables = [MASKS, SOFTMAXES, after, scales, X_AT_WEI, NO_VALUE_TRILS]
    ws += each_way("value-ablation", no_value, tables, "piece")
    return ws


WRITERS = _writers()
