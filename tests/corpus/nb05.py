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
