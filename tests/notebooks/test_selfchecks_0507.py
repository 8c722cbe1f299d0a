"""The visible self-checks of notebooks 05-07 teach: an untouched stub is "not answered yet",
a prediction left at `...` likewise, the catalog's mistakes get messages that tell them apart,
and a right answer passes. Each self-check runs as in the student's kernel: after the setup
cells, with the answer cell as written."""

from __future__ import annotations

import pytest

from attention_course import selfcheck
from autograder.model import contract
from autograder.model.notebook_io import exec_cell, read, setup_sources, solution_answers, source
from autograder.model.paths import SOLUTIONS
from autograder.worker.rebuild import release_stubs, strip_hidden_tests


def _check(notebook: str, grade_id: str, answer: str) -> dict:
    """Run the setup, `answer` and the visible part of the cell's self-check; the namespace."""
    nb = read(SOLUTIONS / notebook)
    ns: dict = {}
    for i, src in enumerate(setup_sources(nb)):
        exec_cell(src, ns, f"<setup {i}>")
    try:
        exec_cell(answer, ns, f"<{grade_id}>")
    except NotImplementedError:  # a stub: the kernel shows the error, the student runs on
        pass
    test = next(c for c in nb.cells if c.get("id") == contract.test_cell_id(grade_id))
    exec_cell(strip_hidden_tests(source(test)), ns, f"<{contract.test_cell_id(grade_id)}>")
    return ns


CELLS = [
    ("05_the_head.ipynb", "head"),
    ("06_experiments.ipynb", "capture-attention"),
    ("06_experiments.ipynb", "unmasked-head"),
    ("06_experiments.ipynb", "value-ablation"),
    ("07_head_on_gpu.ipynb", "pick-device"),
    ("07_head_on_gpu.ipynb", "weights-bytes"),
    ("07_head_on_gpu.ipynb", "sdpa-forward"),
    ("07_head_on_gpu.ipynb", "multi-head"),
]
PREDICTIONS = [
    ("05_the_head.ipynb", "predict-sharpen"),
    ("05_the_head.ipynb", "predict-init-variance"),
    ("06_experiments.ipynb", "predict-no-mask"),
    ("07_head_on_gpu.ipynb", "predict-memory"),
]


@pytest.mark.parametrize(("notebook", "grade_id"), CELLS + PREDICTIONS)
def test_untouched_stub_is_not_answered_yet(notebook: str, grade_id: str) -> None:
    stub = release_stubs(read(SOLUTIONS / notebook))[grade_id]
    with pytest.raises(selfcheck.NotAnswered, match="not answered yet"):
        _check(notebook, grade_id, stub)


@pytest.mark.parametrize(("notebook", "grade_id"), CELLS + PREDICTIONS)
def test_the_model_answer_passes(notebook: str, grade_id: str, capsys) -> None:
    _check(notebook, grade_id, solution_answers(read(SOLUTIONS / notebook))[grade_id])
    assert "passed" in capsys.readouterr().out or grade_id.startswith("predict-")


def _head(line: str, replace: str) -> str:
    """Notebook 05's model Head with one line of forward changed."""
    answer = solution_answers(read(SOLUTIONS / "05_the_head.ipynb"))["head"]
    assert line in answer
    return answer.replace(line, replace)


SCORES = "wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5"
SOFTMAX = "wei = F.softmax(wei, dim=-1)"
HEAD_MISTAKES = {
    "no-scale": (_head(SCORES, "wei = q @ k.transpose(-2, -1)"), "times no scale"),
    "scale-by-C": (_head(SCORES, "wei = q @ k.transpose(-2, -1) * C ** -0.5"), "C ** -0.5"),
    "scale-no-sqrt": (_head(SCORES, "wei = q @ k.transpose(-2, -1) / k.shape[-1]"), "1 / head"),
    "softmax-dim": (_head(SOFTMAX, "wei = F.softmax(wei, dim=-2)"), "dim=-2"),
    "triu-mask": (_head("self.tril[:T, :T] == 0", "self.tril[:T, :T] == 1"), "nan"),
}


@pytest.mark.parametrize("mistake", list(HEAD_MISTAKES))
def test_head_mistakes_are_told_apart(mistake: str) -> None:
    answer, words = HEAD_MISTAKES[mistake]
    with pytest.raises(AssertionError) as caught:
        _check("05_the_head.ipynb", "head", answer)
    assert words in str(caught.value), str(caught.value)


def test_capture_returning_the_head_output_says_so() -> None:
    answer = "def capture_attention(head, x):\n    return head(x)\n"
    with pytest.raises(AssertionError, match="the head's output"):
        _check("06_experiments.ipynb", "capture-attention", answer)


def test_unmasked_head_that_keeps_the_mask_says_so() -> None:
    with pytest.raises(AssertionError, match="the mask is still there"):
        _check("06_experiments.ipynb", "unmasked-head", "class UnmaskedHead(Head):\n    pass\n")


def test_sdpa_without_is_causal_names_the_leak() -> None:
    answer = (
        "def head_forward_sdpa(head, x):\n"
        "    q, k, v = (m(x).unsqueeze(1) for m in (head.query, head.key, head.value))\n"
        "    return F.scaled_dot_product_attention(q, k, v).squeeze(1)\n"
    )
    with pytest.raises(AssertionError, match="is_causal=True"):
        _check("07_head_on_gpu.ipynb", "sdpa-forward", answer)


def test_a_prediction_half_answered_names_the_other() -> None:
    answer = 'NO_MASK_VAL_LOSS = "c"\nNO_MASK_HONEST_LOSS = ...\n'
    with pytest.raises(selfcheck.NotAnswered, match="NO_MASK_HONEST_LOSS"):
        _check("06_experiments.ipynb", "predict-no-mask", answer)
