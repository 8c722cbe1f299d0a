"""Notebook 07's residual-stream measurement shows what its text says, on every seed."""

from __future__ import annotations

import pytest

from autograder.notebook_io import exec_cell, read, setup_sources, source
from autograder.paths import SOLUTIONS

NB = "07_head_on_gpu.ipynb"


@pytest.mark.slow
def test_without_values_a_residual_model_stays_behind_on_every_seed(monkeypatch) -> None:
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = read(SOLUTIONS / NB)
    ns: dict = {}
    for i, src in enumerate(setup_sources(nb)):
        exec_cell(src, ns, f"<setup {i}>")
    cells = [source(c) for c in nb.cells if c.cell_type == "code"]
    start = next(i for i, src in enumerate(cells) if "def residual_run" in src)
    for i in (start, start + 1):  # the runs, then the table and the figure
        exec_cell(cells[i], ns, f"<cell {i}>")
    gaps = ns["residual_gaps"]
    assert sorted(gaps) == [0, 1, 2]
    for seed, (steps, gap) in gaps.items():
        assert steps[-1] == ns["residual_steps"]
        assert gap[-1] > 0.03, f"seed {seed}: the gap at the end is {gap[-1]:+.3f}"
        assert gap[-1] > gap[steps.index(500)] - 0.01, f"seed {seed}: the gap shrank"
