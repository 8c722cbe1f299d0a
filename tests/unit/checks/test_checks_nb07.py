"""Notebook 07's checks fail answers that are wrong in ways the bug catalog has no name for."""

from __future__ import annotations

import pytest

from autograder.checks import run_in_process, spec_for
from tests import corpus

NB = "07_head_on_gpu.ipynb"

WRONG = {
    "pick-device": {
        "mps-before-cuda": """
def pick_device():
    if torch.backends.mps.is_available():
        return torch.device("mps")
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")
""",
        "returns-a-string": """
def pick_device():
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"
""",
        "always-cpu": """
def pick_device():
    return torch.device("cpu")
""",
    },
    "weights-bytes": {
        "ignores-dtype": """
def weights_bytes(B, T, n_head=1, dtype=torch.float32):
    return B * n_head * T * T * 4
""",
        "ignores-heads": """
def weights_bytes(B, T, n_head=1, dtype=torch.float32):
    return B * T * T * torch.empty((), dtype=dtype).element_size()
""",
        "counts-numbers-not-bytes": """
def weights_bytes(B, T, n_head=1, dtype=torch.float32):
    return B * n_head * T * T
""",
    },
    "multi-head": {
        "python-list": """
class MultiHead(nn.Module):
    def __init__(self, n_embd, n_head, head_size, block_size, dropout=0.0):
        super().__init__()
        self.heads = [Head(n_embd, head_size, block_size, dropout) for _ in range(n_head)]
        self.proj = nn.Linear(n_head * head_size, n_embd)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))
""",
        "concat-over-time": """
class MultiHead(nn.Module):
    def __init__(self, n_embd, n_head, head_size, block_size, dropout=0.0):
        super().__init__()
        heads = [Head(n_embd, head_size, block_size, dropout) for _ in range(n_head)]
        self.heads = nn.ModuleList(heads)
        self.proj = nn.Linear(n_head * head_size, n_embd)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=1)  # (B, n_head*T, hs)
        return self.proj(out.reshape(x.shape[0], x.shape[1], -1))
""",
        "no-projection": """
class MultiHead(nn.Module):
    def __init__(self, n_embd, n_head, head_size, block_size, dropout=0.0):
        super().__init__()
        heads = [Head(n_embd, head_size, block_size, dropout) for _ in range(n_head)]
        self.heads = nn.ModuleList(heads)

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1)
""",
        "one-head-repeated": """
class MultiHead(nn.Module):
    def __init__(self, n_embd, n_head, head_size, block_size, dropout=0.0):
        super().__init__()
        heads = [Head(n_embd, head_size, block_size, dropout) for _ in range(n_head)]
        self.heads = nn.ModuleList(heads)
        self.proj = nn.Linear(n_head * head_size, n_embd)

    def forward(self, x):
        return self.proj(torch.cat([self.heads[0](x)] * len(self.heads), dim=-1))
""",
        "dropout-in-eval": """
class MultiHead(nn.Module):
    def __init__(self, n_embd, n_head, head_size, block_size, dropout=0.0):
        super().__init__()
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size) for _ in range(n_head)])
        self.proj = nn.Linear(n_head * head_size, n_embd)
        self.p = dropout

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return F.dropout(self.proj(out), self.p)
""",
    },
    "sdpa-forward": {
        "explicit-head-no-sdpa": """
def head_forward_sdpa(head, x):
    return head.eval()(x)
""",
        "not-causal": """
def head_forward_sdpa(head, x):
    return F.scaled_dot_product_attention(head.query(x), head.key(x), head.value(x))
""",
        "keeps-dropout": """
def head_forward_sdpa(head, x):
    q, k, v = head.query(x), head.key(x), head.value(x)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=head.dropout.p)
""",
    },
}
CASES = [(gid, label, src) for gid, wrong in WRONG.items() for label, src in wrong.items()]


@pytest.mark.parametrize(
    ("grade_id", "label", "source"), CASES, ids=[f"{g}:{lab}" for g, lab, _ in CASES]
)
def test_wrong_answer_loses_points(grade_id: str, label: str, source: str) -> None:
    ns = corpus.namespace(NB, corpus.answers_with(NB, grade_id, source))
    result = run_in_process(spec_for(grade_id), ns)
    assert result.score < result.max_score, result.render()


@pytest.mark.parametrize("grade_id", sorted(WRONG))
def test_untouched_stub_scores_zero(grade_id: str) -> None:
    names = {
        "pick-device": "pick_device()",
        "weights-bytes": "weights_bytes(B, T, n_head=1, dtype=None)",
    }
    stub = {
        "multi-head": "class MultiHead(nn.Module):\n"
        "    def __init__(self, n_embd, n_head, head_size, block_size, dropout=0.0):\n"
        "        super().__init__()\n        raise NotImplementedError()\n",
        "sdpa-forward": "def head_forward_sdpa(head, x):\n    raise NotImplementedError()\n",
    }.get(grade_id, f"def {names.get(grade_id)}:\n    raise NotImplementedError()\n")
    ns = corpus.namespace(NB, corpus.answers_with(NB, grade_id, stub))
    result = run_in_process(spec_for(grade_id), ns)
    assert result.score == 0, result.render()
