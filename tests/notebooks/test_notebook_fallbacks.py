"""Notebook 06's figures survive a wrong `capture_attention`: the page falls back on weights
recomputed from the head's key and query, and says so; a right answer is used as it is."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from autograder.model.notebook_io import exec_cell, read, setup_sources, source
from autograder.model.paths import NOTEBOOKS

NB = "06_experiments.ipynb"


@pytest.fixture
def page() -> dict[str, Any]:
    """The release notebook's setup and its `weights_of` cell, as a student runs them."""
    threads = torch.get_num_threads()  # the setup sets torch's threads: keep this process's own
    nb = read(NOTEBOOKS / NB)
    ns: dict[str, Any] = {}
    for i, src in enumerate(setup_sources(nb)):
        exec_cell(src, ns, f"<setup {i}>")
    cell = next(source(c) for c in nb.cells if "def weights_of(" in source(c))
    exec_cell(cell, ns, "<weights_of>")
    yield ns
    torch.set_num_threads(threads)


def unanswered(head, x):
    raise NotImplementedError()


WRONG = {
    "unanswered": (unanswered, "is not answered yet"),
    "raises": (lambda head, x: head.attention_weights, "raised AttributeError"),
    "the head's output": (lambda head, x: head(x), "returned (3, 6, 5), not (B,T,T)"),
    "no tensor": (lambda head, x: None, "returned NoneType, not (B,T,T)"),
    "one sequence": (lambda head, x: torch.ones(6, 6), "returned (6, 6), not (B,T,T)"),
}


def causal_weights(head: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The weights of a causal head, computed here independently of the notebook."""
    T = x.shape[1]
    with torch.no_grad():
        scores = torch.einsum("btd,bsd->bts", head.query(x), head.key(x)) / 5**0.5  # (B,T,T)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T,T)
        return torch.where(future, float("-inf"), scores).softmax(-1)  # (B,T,T)


@pytest.mark.parametrize("kind", sorted(WRONG))
def test_a_wrong_capture_falls_back_with_a_note(page, kind: str, capsys) -> None:
    page["capture_attention"], note = WRONG[kind]
    torch.manual_seed(0)
    head = page["Head"](12, 5, 8).eval()  # head_size 5
    x = torch.randn(3, 6, 12)  # (B,T,C)
    weights = page["weights_of"](head, x)
    assert torch.allclose(weights, causal_weights(head, x), atol=1e-6)
    printed = capsys.readouterr().out
    assert f"capture_attention {note}" in printed, printed
    assert "recomputed" in printed


def test_a_right_capture_is_used_as_it_is(page, capsys) -> None:
    captured = torch.full((3, 6, 6), 0.5)  # (B,T,T): not the head's weights, yet used as given
    page["capture_attention"] = lambda head, x: captured
    torch.manual_seed(0)
    weights = page["weights_of"](page["Head"](12, 5, 8).eval(), torch.randn(3, 6, 12))
    assert weights is captured
    assert capsys.readouterr().out == ""
