"""The public contract: notebook files, answer-cell grade_ids and the names each defines."""

from __future__ import annotations

ASSIGNMENT = "self-attention"
COURSE_ID = "self-attention"  # nbgrader's course id: the gradebook's and the course directory's

CONTRACT: dict[str, dict[str, tuple[str, ...]]] = {
    "01_uniform_averaging.ipynb": {
        "average-loop": ("average_loop",),
        "average-matmul": ("average_matmul",),
        "average-softmax": ("average_softmax",),
    },
    "02_queries_and_keys.ipynb": {
        "shape-table": ("SHAPES",),
        "param-count": ("N_PARAMS",),
        "affinities": ("affinities",),
    },
    "03_mask_then_softmax.ipynb": {
        "mask-then-softmax": ("mask_then_softmax",),
        "nonzero-count": ("NONZERO", "n_visible"),
    },
    "04_value_aggregation.ipynb": {
        "attend": ("attend",),
    },
    "05_the_head.ipynb": {
        "head": ("Head",),
    },
    "06_experiments.ipynb": {
        "capture-attention": ("capture_attention",),
        "unmasked-head": ("UnmaskedHead",),
        "value-ablation": ("NoValueHead",),
    },
    "07_head_on_gpu.ipynb": {
        "pick-device": ("pick_device",),
        "weights-bytes": ("weights_bytes",),
        "multi-head": ("MultiHead",),
        "sdpa-forward": ("head_forward_sdpa",),
    },
}

NOTEBOOKS: tuple[str, ...] = tuple(CONTRACT)


def test_cell_id(grade_id: str) -> str:
    """grade_id of the autograded test cell that scores the answer cell `grade_id`."""
    return f"test-{grade_id}"


def notebook_named(key: object) -> str | None:
    """The course notebook `key` names, else None: its file name, its stem or its number, also
    as a path ('05_the_head.ipynb', 'notebooks/05_the_head.ipynb', '05_the_head', '05', '5')."""
    text = str(key).strip().replace("\\", "/").rsplit("/", 1)[-1]
    stem = text.removesuffix(".ipynb")
    for notebook in NOTEBOOKS:
        if stem == notebook.removesuffix(".ipynb") or (
            stem.isdigit() and int(stem) == int(notebook[:2])
        ):
            return notebook
    return None
