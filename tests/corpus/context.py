"""Correct answers that read the names the notebook's own cells define above them.

In the student's kernel an answer cell runs after every cell above it, so `N_PARAMS = 3 * C *
head_size` is right in notebook 02. For every code answer cell of the course, the solution
rewritten to read such names (sizes, modules, tensors): a check written before the answer
(`PREFIX`), defaults taken from the notebook (`SIGNATURE`), or the answer written with the
notebook's names (`WHOLE`). Each must keep full marks, in-process (`corpus.namespace` runs the
same master cells a probe runs, `autograder.worker.context`) and through the command line
(test_grader_corpus.py). A prediction cell without its own line looks at the first name the
cells above it define (`first_name_above`). Notebook 07's first answer cell has only the setup
above it, so its variant reads a name of the setup.

`LECTURE_HEAD` is the lecture's Head as its gpt script writes it, the sizes read from the
notebook's globals (`n_embd`, `block_size`, `dropout`, the head size) instead of parameters it
passes itself. With `ADDED_CELL` above it, it reads its dropout rate from `attn_dropout`, which
only that added cell defines: then it scores 0, and the grader says which name and why.
"""

from __future__ import annotations

from functools import cache

from autograder.model.contract import CONTRACT
from autograder.model.course import load_masters
from autograder.model.notebook_io import solution_answers
from tests.corpus import Alternative

LABEL = "in-context"

PREFIX: dict[str, str] = {
    "average-loop": "assert x.shape == (B, T, C)  # the batch above, (B,T,C)",
    "average-matmul": "assert torch.equal(ones_below @ b_toy, b_toy.cumsum(0))  # running sums",
    "average-softmax": "assert torch.softmax(row, dim=0)[2:].sum() == 0  # exp(-inf) is zero",
    "predict-transpose": "assert k.shape == q.shape == (B, T, head_size)  # from the cells above",
    "predict-tied": "assert scores.shape == (B, T, T)  # the raw scores above",
    "mask-then-softmax": "assert future.shape == scores.shape[-2:]  # the (T,T) future above",
    "predict-mask-after": "assert torch.allclose(weights.sum(-1), torch.ones(B, T))  # rows: one",
    "predict-sharpen": "assert q.shape[-1] == head_size  # the unit-variance q and k above",
    "capture-attention": 'print(f"a head of {n_embd} channels over {block_size} positions")',
    "predict-no-mask": 'print("inputs", tuple(xb_demo.shape), "and targets", tuple(yb_demo.shape))',
    "unmasked-head": 'print(f"no mask: {block_size} positions see each other")',
    "pick-device": "assert SHORT_RUNS in (True, False)  # only the setup is above this cell",
    "predict-memory": 'print("the toy head moved to", target, "above")',
    "weights-bytes": 'print("the mask of the head above:", tuple(head.tril.shape))',
    "sdpa-forward": 'print("fused attention on", device)',
    "multi-head": 'print("the paths compared above:", explicit_path.__name__, fused_path.__name__)',
}
# (old, new) on the contract's signature line: defaults read from the notebook
SIGNATURE: dict[str, tuple[str, str]] = {
    "affinities": ("def affinities(x, key, query):", "def affinities(x, key=key, query=query):"),
    "attend": (
        "def attend(x, key, query, value):",
        "def attend(x, key=key, query=query, value=value):",
    ),
    "value-ablation": (
        "def __init__(self, n_embd, head_size, block_size, dropout=0.0):",
        "def __init__(self, n_embd=n_embd, head_size=head_size, block_size=block_size, "
        "dropout=0.0):",
    ),
}

LECTURE_HEAD = '''class Head(nn.Module):
    """one head of self-attention"""

    def __init__(self, n_embd=n_embd, head_size=head_size, block_size=block_size, dropout=DROP):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)  # (B,T,hs)
        q = self.query(x)  # (B,T,hs)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B,T,T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B,T,T)
        wei = F.softmax(wei, dim=-1)  # (B,T,T)
        wei = self.dropout(wei)
        v = self.value(x)  # (B,T,hs)
        return wei @ v  # (B,T,T) @ (B,T,hs) -> (B,T,hs)
'''
ADDED_CELL = "attn_dropout = 0.0  # a rate of my own, in a cell of my own\n"

WHOLE: dict[str, str] = {
    "shape-table": (
        "hs = head_size  # the sizes above: B, T, C and the head size\n"
        'SHAPES = {"k": (B, T, hs), "q": (B, T, hs), "k_T": (B, hs, T), "v": (B, T, hs)}\n'
        'SHAPES |= {"scores": (B, T, T), "masked": (B, T, T), "weights": (B, T, T)}\n'
        'SHAPES["out"] = (B, T, hs)\n'
    ),
    "param-count": "N_PARAMS = 3 * C * head_size  # key, query, value: (hs, C) each\n",
    "nonzero-count": (
        "NONZERO = int(torch.count_nonzero(weights[0]))  # one (T,T) matrix of the batch above\n"
        "\n\ndef n_visible(T):\n    return T * (T + 1) // 2  # row t sees t + 1 keys\n"
    ),
    # the lecture's own Head: n_embd, block_size and dropout are the notebook's globals, the
    # head size its last one (section 7)
    "head": LECTURE_HEAD.replace("head_size=head_size", "head_size=head_size_final").replace(
        "dropout=DROP", "dropout=dropout"
    ),
}


@cache
def _solutions(notebook: str) -> dict[str, str]:
    return solution_answers(load_masters(notebooks=(notebook,))[notebook].nb)


def _prediction(grade_id: str) -> bool:
    from autograder.checks import understanding

    return any(spec.grade_id == grade_id for spec in understanding.SPECS)


def first_name_above(notebook: str, grade_id: str) -> str:
    """A name the first demonstration cell above the answer defines (not a function)."""
    context = load_masters(notebooks=(notebook,))[notebook].context
    before = context.position[grade_id]
    for cell in context.cells:
        names = sorted(cell.names.defines - cell.names.defs)
        if cell.kind == "demo" and cell.position < before and names and not cell.hidden:
            return names[0]
    raise LookupError(f"no cell above {grade_id} defines a name")


def variant(notebook: str, grade_id: str) -> str:
    """The solution of `grade_id` rewritten to read names the notebook defines above it (a
    prediction cell without its own line: a look at the first name defined above it)."""
    if grade_id in WHOLE:
        return WHOLE[grade_id]
    src = _solutions(notebook)[grade_id]
    if grade_id in SIGNATURE:
        old, new = SIGNATURE[grade_id]
        assert old in src, f"{grade_id}: the signature {old!r} is not in the solution"
        return src.replace(old, new, 1)
    if grade_id not in PREFIX:
        name = first_name_above(notebook, grade_id)
        return f'print("before predicting, {name} is a", type({name}).__name__)\n{src}'
    return f"{PREFIX[grade_id]}\n{src}"


def code_answer_cells() -> list[tuple[str, str]]:
    """(notebook, grade_id) of every autograded code answer cell of the course."""
    masters = load_masters()
    return [(nb, gid) for nb in CONTRACT if nb in masters for gid in masters[nb].graded]


def lecture_head_with_added_dropout() -> tuple[str, str]:
    """(the added cell, the answer): the lecture's Head whose dropout rate is a global that only
    a cell the student added defines."""
    answer = LECTURE_HEAD.replace("head_size=head_size", "head_size=head_size_final")
    return ADDED_CELL, answer.replace("dropout=DROP", "dropout=attn_dropout")


def covered(grade_id: str) -> bool:
    return grade_id in WHOLE or grade_id in SIGNATURE or grade_id in PREFIX or _prediction(grade_id)


ALTERNATIVES = [
    Alternative(nb, gid, LABEL, variant(nb, gid)) for nb, gid in code_answer_cells() if covered(gid)
]
