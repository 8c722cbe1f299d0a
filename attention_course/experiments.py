"""Small helpers for notebooks 06 and 07: readable character labels, loss and gap plots and
tables, a mid-word row."""

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
    train: bool = True,
) -> plt.Axes:
    """Validation (solid) and training (dashed, unless `train` is False) loss of several runs,
    in colour-blind-safe colours (cividis) told apart by marker too; optional reference lines
    (dotted, grey shades)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.6))
    colours = _colours(len(runs))
    markers = "os^Dvx"
    for i, (name, h) in enumerate(runs.items()):
        color, marker = colours[i], markers[i % len(markers)]
        ax.plot(h["steps"], h["val"], color=color, marker=marker, ms=3, label=f"{name}: val")
        if train:
            ax.plot(h["steps"], h["train"], color=color, ls="--", alpha=0.6, label=f"{name}: train")
    for j, (name, value) in enumerate((lines or {}).items()):
        ax.axhline(value, color=str(0.2 + 0.3 * j), ls=":", lw=1.5, label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy loss")
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax


def _colours(n: int) -> list:
    """n colours from cividis, readable with any colour vision, light enough to see on white."""
    cmap = plt.get_cmap("cividis")
    return [cmap(0.85 * i / max(n - 1, 1)) for i in range(n)]


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
        colours = _colours(len(by_seed))
        for i, (seed, (steps, values)) in enumerate(by_seed.items()):
            marker = "os^Dvx"[i % 6]
            ax.plot(
                steps[1:], values[1:], marker=marker, ms=3, color=colours[i], label=f"seed {seed}"
            )
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("val loss without value - with value")
    fig.tight_layout()
    return fig


def gap_table(
    runs: Mapping[int, Mapping[str, History]], shown: Sequence[int] = (250, 500, 1000, 1500, 2000)
) -> str:
    """A seed-by-step table of val(no value) - val(value) for paired runs {seed: {"value": h,
    "no value": h}}, with the with-value loss of each seed and the spread of the final gaps."""
    table = {seed: gaps(r["value"], r["no value"]) for seed, r in runs.items()}
    steps = next(iter(table.values()))[0]
    columns = [s for s in steps if s in shown]
    lines = ["step   " + "".join(f"{s:>8}" for s in columns)]
    for seed, (st, gp) in table.items():
        values = dict(zip(st, gp, strict=True))
        lines.append(f"seed {seed}" + "".join(f"{values[s]:>+8.3f}" for s in columns))
    final = [gp[-1] for _, gp in table.values()]
    base = [r["value"]["val"][-1] for r in runs.values()]
    lines.append(
        f"at {steps[-1]:,} steps: val loss with value from {min(base):.3f} to {max(base):.3f} "
        f"across the seeds; gap {sum(final) / len(final):+.3f} on average, from "
        f"{min(final):+.3f} to {max(final):+.3f}"
    )
    return "\n".join(lines)


def draw_row(ax: plt.Axes, weights: Sequence[float], text: str, position: int) -> None:
    """One query's weights over its keys as bars, the keys labelled with their characters."""
    ax.bar(range(len(text)), list(weights), color=_colours(1)[0])
    ax.set_xticks(range(len(text)), [char_label(ch) for ch in text])
    ax.set_ylim(0, 1)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("weight")
    ax.set_title(f"query {position} ({char_label(text[position])}) in {text!r}", fontsize=9)


def row_explorer(wei, rows: Sequence[str]) -> None:  # noqa: ANN001 - a (B,T,T) tensor
    """Sliders over the sequence and the query position of (B,T,T) weights, one row drawn as
    bars; does nothing where ipywidgets is missing (the printed row is the static version)."""
    try:
        import ipywidgets as widgets
    except ImportError:
        return
    B, T = len(rows), len(rows[0])

    def show(sequence: int = 0, position: int = T - 1) -> None:
        _, ax = plt.subplots(figsize=(5, 2.4))
        draw_row(ax, wei[sequence, position].detach().tolist(), rows[sequence], position)
        plt.show()

    style = {"description_width": "initial"}
    widgets.interact(
        show,
        sequence=widgets.IntSlider(0, 0, B - 1, description="sequence in the batch", style=style),
        position=widgets.IntSlider(T - 1, 0, T - 1, description="query position", style=style),
    )
