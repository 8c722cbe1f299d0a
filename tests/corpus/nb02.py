"""Notebook 02: mistakes and alternatives of the shape table, the parameter count, the scores."""

from tests.corpus import Alternative, Mutation

NB = "02_queries_and_keys.ipynb"
KT = "k.transpose(-2, -1)"

MUTATIONS = [
    Mutation(NB, "affinities", "transpose-batch", ((KT, "k.transpose(0, 1)"),), "transpose01"),
    Mutation(NB, "affinities", "transpose-batch", ((KT, "k.T"),), "dot-T"),
    Mutation(
        NB, "affinities", "transpose-batch", ((KT, "k.transpose(0, 1).transpose(-2, -1)"),), "mixed"
    ),
    Mutation(NB, "affinities", "swapped-qk", (("q @ k.transpose", "k @ q.transpose"),)),
    Mutation(NB, "affinities", "tied-qk", (("k = key(x)", "k = query(x)"),), "query-twice"),
    Mutation(NB, "affinities", "tied-qk", (("q = query(x)", "q = key(x)"),), "key-twice"),
    Mutation(
        NB,
        "affinities",
        "bias",
        (("q = query(x)", "q = F.linear(x, query.weight, torch.ones(query.out_features))"),),
        "query-bias",
    ),
    Mutation(NB, "shape-table", "transpose-batch", (('"k_T": (4, 16, 8)', '"k_T": (8, 4, 16)'),)),
    Mutation(NB, "shape-table", "aggregate-x", (('"out": (4, 8, 16)', '"out": (4, 8, 32)'),)),
    Mutation(NB, "param-count", "bias", (("3 * 32 * 16", "3 * (32 * 16 + 16)"),)),
]

ALTERNATIVES = [
    Alternative(
        NB,
        "affinities",
        "einsum",
        """
def affinities(x, key, query):
    return torch.einsum("bth,bsh->bts", query(x), key(x))
""",
    ),
    Alternative(
        NB,
        "affinities",
        "bmm-mT",
        """
def affinities(x, key, query):
    return torch.bmm(query(x), key(x).mT)
""",
    ),
    Alternative(
        NB,
        "affinities",
        "weights-and-permute",
        """
def affinities(x, key, query):
    q = x @ query.weight.T
    k = x @ key.weight.T
    return q @ k.permute(0, 2, 1)
""",
    ),
    Alternative(
        NB,
        "affinities",
        "loops",
        """
def affinities(x, key, query):
    B, T, _ = x.shape
    q, k = query(x), key(x)
    out = torch.zeros(B, T, T)
    for b in range(B):
        for i in range(T):
            for j in range(T):
                out[b, i, j] = torch.dot(q[b, i], k[b, j])
    return out
""",
    ),
    Alternative(
        NB,
        "shape-table",
        "from-sizes",
        """
B, T, C, hs = 4, 8, 32, 16
SHAPES = dict(k=(B, T, hs), q=(B, T, hs), k_T=(B, hs, T), scores=(B, T, T))
SHAPES.update(masked=(B, T, T), weights=(B, T, T), v=[B, T, hs], out=torch.Size([B, T, hs]))
""",
    ),
    Alternative(NB, "param-count", "bare-number", "N_PARAMS = 1536\n"),
    Alternative(
        NB,
        "param-count",
        "counted",
        """
N_PARAMS = sum(
    p.numel() for _ in range(3) for p in nn.Linear(32, 16, bias=False).parameters()
)
""",
    ),
]
