"""Notebook 04: answers written from scratch for the version-4 head, `attend`."""

from functools import partial

from tests.corpus import Choose, Writer, exported, variants
from tests.corpus.fragments import (
    AGGREGATES,
    IMPORTS,
    MASKS,
    SCORES,
    SOFTMAXES,
    UNSCALED,
    aggregate_line,
    body,
    scaled_scores,
    weights_lines,
)

NB = "04_value_aggregation.ipynb"


PROJECT = [
    "k = key(x)\nq = query(x)\nv = value(x)",
    "k, q, v = key(x), query(x), value(x)",
    "q = query(x)\nk = key(x)\nv = value(x)",
]
ATTEND_TRILS = [
    "torch.tril(torch.ones(T, T, device=x.device))",
    "torch.ones(T, T, device=x.device).tril()",
]


def attend(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    scores = scaled_scores(choose, mistake, way, UNSCALED)
    weights = weights_lines(choose, mistake, way, tril="tril", query_axis="1")
    return f"""{IMPORTS}
def attend(x, key, query, value):
    B, T, C = x.shape
{body(choose("project", PROJECT))}
    hs = k.shape[-1]
{body(scores)}
    tril = {choose("tril", ATTEND_TRILS)}
{body(weights)}
{body(aggregate_line(choose, mistake, way))}
    return out
"""


def each_way(grade_id: str, write, tables: list[dict], label: str) -> list[Writer]:
    """One Writer per wrong piece of the tables (the rest of the answer drawn)."""
    ws = []
    for table in tables:
        for mistake, pieces in table.items():
            for way in range(len(pieces) if mistake else 0):
                fn = partial(write, mistake=mistake, way=way)
                ws.append(Writer(grade_id, mistake, f"{label}-{way}", fn))
    return ws


def _writers() -> list[Writer]:
    from tests.corpus.fragments import MASK_THEN_SOFTMAX

    ws = variants("attend", "scores", attend, "scores", len(SCORES[None]))
    after = {"mask-after-softmax": MASK_THEN_SOFTMAX["mask-after-softmax"]}
    ws += each_way("attend", attend, [SCORES, MASKS, SOFTMAXES, after, AGGREGATES], "piece")
    return ws


WRITERS = _writers()


MUTATIONS, ALTERNATIVES = exported(NB, WRITERS)
