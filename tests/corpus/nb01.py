"""Notebook 01: mistakes and alternatives of the three averaging cells."""

from tests.corpus import Alternative, Mutation

NB = "01_uniform_averaging.ipynb"

MUTATIONS = [
    Mutation(NB, "average-loop", "loop-exclusive", (("x[b, : t + 1]", "x[b, :t]"),)),
    Mutation(
        NB,
        "average-matmul",
        "tril-unnormalised",
        (("wei = wei / wei.sum(1, keepdim=True)", "pass"),),
    ),
    Mutation(NB, "average-softmax", "fill-zero", (('float("-inf")', "0.0"),)),
    Mutation(NB, "average-softmax", "softmax-dim", (("dim=-1", "dim=0"),)),
    Mutation(NB, "average-softmax", "mask-polarity", (("tril == 0", "tril == 1"),)),
    Mutation(NB, "average-softmax", "triu-mask", (("torch.tril(", "torch.triu("),)),
]

ALTERNATIVES = [
    Alternative(
        NB,
        "average-loop",
        "loop-running-sum",
        """
def average_loop(x):
    B, T, C = x.shape
    out = torch.empty_like(x)
    for b in range(B):
        total = torch.zeros(C)
        for t in range(T):
            total = total + x[b, t]
            out[b, t] = total / (t + 1)
    return out
""",
    ),
    Alternative(
        NB,
        "average-matmul",
        "cumsum",
        """
def average_matmul(x):
    counts = torch.arange(1, x.shape[1] + 1).view(1, -1, 1)
    return x.cumsum(dim=1) / counts
""",
    ),
    Alternative(
        NB,
        "average-softmax",
        "where-and-method-softmax",
        """
def average_softmax(x):
    T = x.shape[1]
    keep = torch.ones(T, T).tril().bool()
    wei = torch.where(keep, torch.zeros(T, T), torch.full((T, T), -1e9))
    return torch.einsum("ts,bsc->btc", wei.softmax(-1), x)
""",
    ),
]
