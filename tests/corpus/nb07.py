"""Notebook 07: answers written from scratch for the device, memory, multi-head and sdpa cells.

Wrong answers that match no catalog id (a Python list of heads, the wrong device order, ...) are
in tests/unit/checks/test_checks_nb07.py.
"""

from functools import partial

from tests.corpus import Choose, Writer, exported
from tests.corpus.fragments import IMPORTS, ids

NB = "07_head_on_gpu.ipynb"

PICK_DEVICE = [
    """
def pick_device():
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
""",
    """
def pick_device():
    mps = getattr(torch.backends, "mps", None)
    has_mps = mps is not None and mps.is_available()
    return torch.device("cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu")
""",
    """
def pick_device():
    available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    for name in ("cuda", "mps"):
        if available[name]:
            return torch.device(name)
    return torch.device("cpu")
""",
]
WEIGHTS_BYTES = [
    """
def weights_bytes(B, T, n_head=1, dtype=torch.float32):
    return B * n_head * T * T * torch.empty((), dtype=dtype).element_size()
""",
    """
def weights_bytes(B, T, n_head=1, dtype=torch.float32):
    return B * n_head * T**2 * torch.finfo(dtype).bits // 8
""",
    """
def weights_bytes(B, T, n_head=1, dtype=torch.float32):
    return torch.zeros((), dtype=dtype).element_size() * (B * n_head * T * T)
""",
]
MULTI_HEAD = {
    None: [
        ("nn.ModuleList([{head} for _ in range(n_head)])", "self.dropout(self.proj(out))"),
        ("nn.ModuleList({head} for _ in range(n_head))", "self.proj(out)"),
        (
            "nn.ModuleList(list(map(lambda _: {head}, range(n_head))))",
            "self.dropout(self.proj(out))",
        ),
    ],
    "dropout-misplaced": [
        ("nn.ModuleList([{head} for _ in range(n_head)])", "F.dropout(self.proj(out), self.p)"),
        (
            "nn.ModuleList([{head} for _ in range(n_head)])",
            "F.dropout(self.proj(out), self.p, training=True)",
        ),
        ("nn.ModuleList([{head} for _ in range(n_head)])", "nn.Dropout(self.p)(self.proj(out))"),
    ],
}
CONCAT = [
    "out = torch.cat([h(x) for h in self.heads], dim=-1)",
    "out = torch.cat(tuple(head(x) for head in self.heads), dim=2)",
]


def multi_head(choose: Choose, mistake: str | None, way: int) -> str:
    heads, tail = MULTI_HEAD[mistake][way]
    heads = heads.replace("{head}", "Head(n_embd, head_size, block_size, dropout)")
    return f"""{IMPORTS}
class MultiHead(nn.Module):
    def __init__(self, n_embd, n_head, head_size, block_size, dropout=0.0):
        super().__init__()
        self.heads = {heads}
        self.proj = nn.Linear(n_head * head_size, n_embd)
        self.dropout = nn.Dropout(dropout)
        self.p = dropout

    def forward(self, x):
        {choose("concat", CONCAT)}
        return {tail}
"""


QKV = ["q, k, v = head.query(x), head.key(x), head.value(x)"]
SDPA = {
    None: [
        "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
        "F.scaled_dot_product_attention(q, k, v, attn_mask=head.tril[:T, :T].bool())",
        "F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True, "
        "scale=k.shape[-1] ** -0.5)",
    ],
    "no-scale": [
        "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)",
        "F.scaled_dot_product_attention(q * k.shape[-1] ** 0.5, k, v, is_causal=True)",
        "F.scaled_dot_product_attention(q, k, v, attn_mask=head.tril[:T, :T].bool(), scale=1)",
    ],
    "scale-by-C": [
        "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=C ** -0.5)",
        "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(x.shape[-1]))",
        "F.scaled_dot_product_attention(q * (k.shape[-1] / C) ** 0.5, k, v, is_causal=True)",
    ],
    "scale-no-sqrt": [
        "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / k.shape[-1])",
        "F.scaled_dot_product_attention(q * k.shape[-1] ** -0.5, k, v, is_causal=True)",
        "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=k.size(-1) ** -1)",
    ],
    "dropout-misplaced": [
        "F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=head.dropout.p)",
        "F.scaled_dot_product_attention(q, k, v, is_causal=True, "
        "dropout_p=head.dropout.p if head.training else 0.0)",
    ],
    "swapped-qk": [
        "F.scaled_dot_product_attention(k, q, v, is_causal=True)",
        "F.scaled_dot_product_attention(head.key(x), head.query(x), head.value(x), is_causal=True)",
    ],
}


def sdpa(choose: Choose, mistake: str | None, way: int) -> str:
    return f"""{IMPORTS}
def head_forward_sdpa(head, x):
    B, T, C = x.shape
    {choose("qkv", QKV)}
    return {SDPA[mistake][way]}
"""


# the parts of one call, for answers with two mistakes (`sdpa_pair`)
SDPA_PARTS = {
    "swapped-qk": ("order", "k, q, v"),
    "no-scale": ("scale", ", scale=1.0"),
    "scale-by-C": ("scale", ", scale=C ** -0.5"),
    "scale-no-sqrt": ("scale", ", scale=1 / k.shape[-1]"),
    "dropout-misplaced": ("dropout", ", dropout_p=head.dropout.p"),
}


def sdpa_pair(choose: Choose, mistake: str | tuple[str, ...], way: int = 0) -> str:
    """One call to scaled_dot_product_attention with each mistake of `mistake` in its part."""
    parts = {"order": "q, k, v", "scale": "", "dropout": ""}
    for m in ids(mistake):
        part, text = SDPA_PARTS[m]
        parts[part] = text
    call = f"F.scaled_dot_product_attention({parts['order']}, is_causal=True"
    return f"""{IMPORTS}
def head_forward_sdpa(head, x):
    B, T, C = x.shape
    {choose("qkv", QKV)}
    return {call}{parts["scale"]}{parts["dropout"]})
"""


def multi_head_pair(choose: Choose, mistake: str | tuple[str, ...], way: int = 0) -> str:
    """Several heads of an own Head class with the head's mistakes of `mistake`, and the
    dropout after the projection active in eval mode when `mistake` holds dropout-misplaced."""
    from tests.corpus.nb05 import head

    in_head = tuple(m for m in ids(mistake) if m != "dropout-misplaced")
    tail = "dropout-misplaced" if "dropout-misplaced" in ids(mistake) else None
    heads = head(choose, in_head or None, way)
    return heads + multi_head(choose, tail, way % len(MULTI_HEAD[tail])).replace(IMPORTS, "")


def fixed(source: str) -> object:
    return lambda choose: IMPORTS + source


def _writers() -> list[Writer]:
    ws = [Writer("pick-device", None, f"form-{i}", fixed(s)) for i, s in enumerate(PICK_DEVICE)]
    ws += [
        Writer("weights-bytes", None, f"form-{i}", fixed(s)) for i, s in enumerate(WEIGHTS_BYTES)
    ]
    for mistake, forms in MULTI_HEAD.items():
        for way in range(len(forms)):
            fn = partial(multi_head, mistake=mistake, way=way)
            ws.append(Writer("multi-head", mistake, f"form-{way}", fn))
    for mistake, forms in SDPA.items():
        for way in range(len(forms)):
            fn = partial(sdpa, mistake=mistake, way=way)
            ws.append(Writer("sdpa-forward", mistake, f"call-{way}", fn))
    return ws


WRITERS = _writers()


def multi_head_own_head(choose: Choose, mistake: str, way: int) -> str:
    """Several heads of a Head class written in the same cell, with a mistake in the head."""
    from tests.corpus.nb05 import head

    return head(choose, mistake, way) + multi_head(choose, None, 0).replace(IMPORTS, "")


OWN_HEAD_MISTAKES = ("no-scale", "triu-mask", "swapped-qk")
WRITERS += [
    Writer("multi-head", m, "own-head", partial(multi_head_own_head, mistake=m, way=0))
    for m in OWN_HEAD_MISTAKES
]


MUTATIONS, ALTERNATIVES = exported(NB, WRITERS)
