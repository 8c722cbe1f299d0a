"""Small helpers for notebook 06: readable character labels, loss and gap plots, a mid-word row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt

History = Mapping[str, Sequence[float]]

_VISIBLE = {"\n": "\\n", " ": "␣", "\t": "\\t"}


def char_label(ch: str) -> str:
    """A character as it can be read on an axis: newline as \\n, space as ␣."""
    return _VISIBLE.get(ch, ch)


def mid_word_position(rows: Sequence[str], min_t: int = 3) -> tuple[int, int]:
    """(row, t) of the first character with letters on both sides, at t >= min_t.

    Falls back to the last position of row 0 when no row has one.
    """
    for b, row in enumerate(rows):
        for t in range(max(min_t, 1), len(row) - 1):
            if row[t - 1].isalpha() and row[t].isalpha() and row[t + 1].isalpha():
                return b, t
    return 0, len(rows[0]) - 1


def plot_runs(
    runs: Mapping[str, History],
    title: str = "",
    lines: Mapping[str, float] | None = None,
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Validation (solid) and training (dashed) loss of several runs; optional reference lines."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.6))
    for i, (name, h) in enumerate(runs.items()):
        color = f"C{i}"
        ax.plot(h["steps"], h["val"], color=color, label=f"{name}: val")
        ax.plot(h["steps"], h["train"], color=color, ls="--", alpha=0.6, label=f"{name}: train")
    for j, (name, value) in enumerate((lines or {}).items()):
        ax.axhline(value, color=f"C{len(runs) + j}", ls=":", lw=1.5, label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy loss")
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax


def gaps(base: History, ablated: History) -> tuple[list[int], list[float]]:
    """Steps and val(ablated) - val(base) at the evaluations both runs share."""
    base_val = dict(zip(base["steps"], base["val"], strict=True))
    pairs = zip(ablated["steps"], ablated["val"], strict=True)
    shared = [(s, v) for s, v in pairs if s in base_val]
    return [s for s, _ in shared], [v - base_val[s] for s, v in shared]


def plot_gaps(panels: Mapping[str, Mapping[int, tuple[list[int], list[float]]]]) -> plt.Figure:
    """One panel per experiment: the validation-loss gap against the step, one line per seed."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.4), sharey=True)
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, (title, by_seed) in zip(axes, panels.items(), strict=True):
        for seed, (steps, values) in by_seed.items():
            ax.plot(steps[1:], values[1:], marker="o", ms=3, label=f"seed {seed}")
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("val loss without value - with value")
    fig.tight_layout()
    return fig
