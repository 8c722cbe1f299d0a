"""Notebook 07: mistakes and alternatives of the device, memory, multi-head and sdpa cells.

Wrong answers that match no catalog id (a Python list of heads, the wrong device order, ...) are
in tests/test_checks_nb07.py.
"""

from tests.corpus import Alternative, Mutation

NB = "07_head_on_gpu.ipynb"
SDPA_CALL = "F.scaled_dot_product_attention(q, k, v, is_causal=True)"

MUTATIONS = [
    Mutation(
        NB,
        "sdpa-forward",
        "no-scale",
        ((SDPA_CALL, "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)"),),
    ),
    Mutation(
        NB,
        "sdpa-forward",
        "scale-by-C",
        (
            (
                SDPA_CALL,
                "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=x.shape[-1]**-0.5)",
            ),
        ),
    ),
]

ALTERNATIVES = [
    Alternative(
        NB,
        "pick-device",
        "one-expression",
        """
def pick_device():
    mps = getattr(torch.backends, "mps", None)
    name = (
        "cuda"
        if torch.cuda.is_available()
        else "mps" if mps is not None and mps.is_available() else "cpu"
    )
    return torch.device(name)
""",
    ),
    Alternative(
        NB,
        "pick-device",
        "device-count",
        """
def pick_device():
    if torch.cuda.device_count() > 0:
        return torch.device("cuda", 0)
    if torch.backends.mps.is_built() and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
""",
    ),
    Alternative(
        NB,
        "weights-bytes",
        "finfo-bits",
        """
def weights_bytes(B, T, n_head=1, dtype=torch.float32):
    return B * n_head * T**2 * (torch.finfo(dtype).bits // 8)
""",
    ),
    Alternative(
        NB,
        "weights-bytes",
        "meta-tensor",
        """
def weights_bytes(B, T, n_head=1, dtype=torch.float32):
    wei = torch.empty(B, n_head, T, T, dtype=dtype, device="meta")  # no memory used
    return wei.numel() * wei.element_size()
""",
    ),
    Alternative(
        NB,
        "multi-head",
        "stack-flatten-no-bias-no-dropout",
        """
class MultiHead(nn.Module):
    def __init__(self, n_embd, n_head, head_size, block_size, dropout=0.0):
        super().__init__()
        self.heads = nn.ModuleList()
        for _ in range(n_head):
            self.heads.append(Head(n_embd, head_size, block_size, dropout=dropout))
        self.proj = nn.Linear(head_size * n_head, n_embd, bias=False)

    def forward(self, x):
        out = torch.stack([head(x) for head in self.heads], dim=2)  # (B,T,n_head,hs)
        return self.proj(out.flatten(start_dim=2))
""",
    ),
    Alternative(
        NB,
        "sdpa-forward",
        "three-d-with-mask-and-imported-name",
        """
from torch.nn.functional import scaled_dot_product_attention as sdpa


def head_forward_sdpa(head, x):
    T = x.shape[1]
    q, k, v = head.query(x), head.key(x), head.value(x)
    allowed = head.tril[:T, :T].bool()
    return sdpa(q, k, v, attn_mask=allowed, dropout_p=0.0, scale=k.size(-1) ** -0.5)
""",
    ),
]
