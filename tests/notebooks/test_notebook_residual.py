"""Notebook 07's trained models show what its text says: four heads in the residual stream beat
one, every value matrix followed by a linear map folds into it, and only a head added to x with
no projection keeps a measurable gap without its value matrix, on every seed."""

from __future__ import annotations

import pytest

from autograder.model.notebook_io import exec_cell, read, setup_sources, solution_answers, source
from autograder.model.paths import SOLUTIONS

NB = "07_head_on_gpu.ipynb"


def _run(ns: dict, cell_ids: list[str]) -> None:
    nb = read(SOLUTIONS / NB)
    cells = {c.get("id"): source(c) for c in nb.cells if c.cell_type == "code"}
    for cid in cell_ids:
        exec_cell(cells[cid], ns, f"<{cid}>")


def _setup(monkeypatch: pytest.MonkeyPatch, short: bool) -> dict:
    if short:
        monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    else:
        monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ns: dict = {}
    for i, src in enumerate(setup_sources(read(SOLUTIONS / NB))):
        exec_cell(src, ns, f"<setup {i}>")
    return ns


@pytest.mark.slow
def test_without_values_a_residual_model_stays_behind_on_every_seed(monkeypatch) -> None:
    ns = _setup(monkeypatch, short=False)
    _run(ns, ["cell-models-setup", "cell-34", "cell-35"])
    gaps = ns["residual_gaps"]
    assert sorted(gaps) == [0, 1, 2]
    for seed, (steps, gap) in gaps.items():
        assert steps[-1] == ns["residual_steps"]
        assert gap[-1] > 0.03, f"seed {seed}: the gap at the end is {gap[-1]:+.3f}"
        assert gap[-1] > gap[steps.index(500)] - 0.01, f"seed {seed}: the gap shrank"


@pytest.mark.slow
def test_trained_heads_fold_and_four_heads_beat_one(monkeypatch) -> None:
    """The section 9-10 cells in grading mode (short runs), with the model answers."""
    ns = _setup(monkeypatch, short=True)
    answers = solution_answers(read(SOLUTIONS / NB))
    for gid in ("pick-device", "multi-head"):
        exec_cell(answers[gid], ns, f"<{gid}>")
    _run(ns, ["cell-08", "cell-models-setup", "cell-models", "cell-models-multi"])
    final = {name: h["val"][-1] for name, h in ns["runs"].items()}
    assert final["x + four heads"] < final["x + one head"] < final["one head"], final
    _run(ns, ["cell-head-maps", "cell-fold-one"])
    assert len(ns["maps"]) == 4 and tuple(ns["maps"][0].shape) == (32, 8, 8)
    assert ns["difference"] < 1e-4  # one head's W_v folds into lm_head
    _run(ns, ["cell-fold-block"])
    assert ns["difference"] < 1e-4  # each head's W_v folds into its block of proj
    assert ns["ranks"] == [ns["hs"]] * 4  # rank head_size, not n_embd
    _run(ns, ["cell-stand-in"])
    assert ns["stand_in_error"] > 0.05  # with no projection nothing can stand in for W_v
