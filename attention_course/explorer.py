"""Notebook 03's explorer: what mask order, softmax axis, fill value and scale do to the weights.

`explore` is the whole update logic as a plain function (scores in, weights and a figure out);
`explorer` wires it to ipywidgets; `comparison_figure` draws the same comparisons statically
for front ends that cannot render widgets. The explorer computes the wrong recipes itself;
the right one (mask first, softmax over the keys) is the student's own `mask_then_softmax`,
passed in as `correct`: until it is answered, that panel says so instead of showing weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Rectangle

from attention_course import plots
from attention_course.errors import CourseError

FILLS: dict[str, float] = {"-inf": float("-inf"), "-1e9": -1e9, "0": 0.0}
Correct = Callable[[torch.Tensor], torch.Tensor] | None
UNANSWERED = (
    "mask_then_softmax is not answered yet:\n"
    "write it in its answer cell above,\nrun that cell, then this one again"
)


@dataclass(frozen=True)
class Recipe:
    """One way of turning scores into weights."""

    mask_first: bool = True
    dim: int = -1
    fill: str = "-inf"
    scale: float = 1.0

    def label(self) -> str:
        order = "mask, then softmax" if self.mask_first else "softmax, then mask"
        return f"{order} · dim={self.dim} · fill {self.fill} · scale {self.scale:g}"

    @property
    def is_correct(self) -> bool:
        """Mask first, softmax over the keys, a fill whose exponential is zero."""
        return self.mask_first and self.dim == -1 and self.fill in ("-inf", "-1e9")


def _check(scores: torch.Tensor, recipe: Recipe) -> None:
    if not isinstance(scores, torch.Tensor) or scores.dim() != 2:
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise CourseError(f"explore takes one (T,T) score matrix, e.g. wei[0]; got {shape}.")
    if scores.shape[0] != scores.shape[1]:
        raise CourseError(f"the scores must be square (T,T); got {tuple(scores.shape)}.")
    if recipe.fill not in FILLS:
        raise CourseError(f"fill must be one of {', '.join(FILLS)}; got {recipe.fill!r}.")
    if recipe.dim not in (-1, -2):
        raise CourseError(f"dim must be -1 (keys) or -2 (queries); got {recipe.dim!r}.")


def _students(correct: Correct, s: torch.Tensor) -> torch.Tensor | None:
    """The student's weights for the scores s, or None while the answer is a stub."""
    if correct is None:
        return None
    try:
        return correct(s).detach().float()
    except NotImplementedError:
        return None


def attention_weights(
    scores: torch.Tensor, recipe: Recipe = Recipe(), correct: Correct = None
) -> torch.Tensor | None:
    """(T,T) raw scores -> (T,T) weights made the way `recipe` says (None: not answered yet)."""
    _check(scores, recipe)
    s = scores.detach().float() * recipe.scale  # (T,T)
    if recipe.is_correct:
        return _students(correct, s)
    T = s.shape[-1]
    later = torch.ones(T, T, dtype=torch.bool).triu(1)  # keys after the query: the future
    fill = FILLS[recipe.fill]
    if recipe.mask_first:  # here only with a leaking fill or the query axis
        return torch.softmax(s.masked_fill(later, fill), dim=recipe.dim)
    return torch.softmax(s, dim=recipe.dim).masked_fill(later, fill)


def summary(weights: torch.Tensor, row: int) -> str:
    """One line on a query row: what it sums to and how much weight it gives the future."""
    w = weights[row]
    total = w.sum().item()
    future = w[row + 1 :]
    leak = future[torch.isfinite(future)].sum().item()
    text = f"row {row} sums to {total:.3f}"
    if math.isinf(total) or math.isnan(total):
        text = f"row {row} sums to {total} (a -inf weight turns wei @ v into -inf/nan)"
    return text + f"; weight on the future: {leak:.3f}"


def _bars(ax: plt.Axes, weights: torch.Tensor, row: int) -> None:
    w = weights[row]
    T = w.shape[0]
    finite = torch.where(torch.isfinite(w), w, torch.zeros_like(w))
    colours = ["tab:blue" if j <= row else "tab:red" for j in range(T)]
    ax.bar(range(T), finite.numpy(), color=colours)
    for j in range(T):
        if not torch.isfinite(w[j]):
            ax.text(j, 0.02, str(w[j].item()), ha="center", rotation=90, fontsize=7)
    ax.set_xticks(range(T))
    ax.set_ylim(0, 1.05)
    ax.axvline(row + 0.5, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("key position (blue: 0..t may be seen, red: the future)")
    ax.set_ylabel(f"weight of row {row}")
    ax.set_title(summary(weights, row).replace("; ", "\n"), fontsize=8)


def _note(ax_map: plt.Axes, ax_bar: plt.Axes, title: str) -> None:
    """Both panels of an unanswered recipe: the title and a note where the weights would be."""
    for ax in (ax_map, ax_bar):
        ax.set_xticks([])
        ax.set_yticks([])
        ax.text(0.5, 0.5, UNANSWERED, ha="center", va="center", fontsize=8, wrap=True)
    ax_map.set_title(title, fontsize=9)


def draw(weights: torch.Tensor | None, row: int, title: str = "", axes: Any = None) -> plt.Figure:
    """Heatmap of the weights with `row` outlined, and that row as bars (a note for None)."""
    new = axes is None
    if new:
        _, axes = plt.subplots(1, 2, figsize=(8.4, 3.4), width_ratios=[1, 1.15])
    ax_map, ax_bar = axes
    if weights is None:
        _note(ax_map, ax_bar, title)
        return ax_map.figure
    plots.heatmap(weights, title=title, ax=ax_map)
    T = weights.shape[-1]
    ax_map.add_patch(Rectangle((-0.5, row - 0.5), T, 1, fill=False, ec="red", lw=1.5))
    _bars(ax_bar, weights, row)
    if new:
        ax_map.figure.tight_layout()
    return ax_map.figure


def explore(
    scores: torch.Tensor,
    mask_first: bool = True,
    dim: int = -1,
    fill: str = "-inf",
    scale: float = 1.0,
    row: int = 3,
    correct: Correct = None,
) -> tuple[torch.Tensor | None, plt.Figure]:
    """Weights of one (T,T) score matrix under the chosen settings, and their picture.

    `correct` is your `mask_then_softmax`: the right recipe uses it (None until answered).
    """
    recipe = Recipe(mask_first, dim, fill, scale)
    weights = attention_weights(scores, recipe, correct)
    T = scores.shape[0]
    if not 0 <= row < T:
        raise CourseError(f"row must be between 0 and {T - 1}; got {row}.")
    return weights, draw(weights, row, recipe.label())


def _toggles(options: list[tuple[str, Any]], description: str) -> Any:
    """Toggle buttons as wide as their labels, so that none is cut off."""
    import ipywidgets as widgets

    return widgets.ToggleButtons(
        options=options,
        description=description,
        style={"description_width": "70px", "button_width": "auto"},
    )


def explorer(scores: torch.Tensor, correct: Correct = None, row: int = 3) -> Any:
    """An ipywidgets panel over `explore`: toggles, a scale slider and a query-row slider."""
    import ipywidgets as widgets
    from IPython.display import display

    _check(scores, Recipe())
    T = scores.shape[0]
    style = {"description_width": "70px"}
    controls = {
        "mask_first": _toggles(
            [("mask, then softmax", True), ("softmax, then mask", False)], "order"
        ),
        "dim": _toggles([("dim=-1 (keys)", -1), ("dim=-2 (queries)", -2)], "softmax"),
        "fill": _toggles([(f, f) for f in FILLS], "fill"),
        "scale": widgets.FloatSlider(
            value=1.0, min=0.1, max=4.0, step=0.1, description="scale", style=style
        ),
        "row": widgets.IntSlider(
            value=min(row, T - 1), min=0, max=T - 1, description="query row", style=style
        ),
    }
    output = widgets.Output()

    def update(_: Any = None) -> None:
        settings = {name: control.value for name, control in controls.items()}
        with output:
            output.clear_output(wait=True)
            _, fig = explore(scores, correct=correct, **settings)
            display(fig)
            plt.close(fig)

    for control in controls.values():
        control.observe(update, names="value")
    update()
    panel = widgets.VBox([*controls.values(), output])
    panel.controls = controls  # for tests and for students who want to set values in code
    return panel


COMPARISONS: dict[str, Recipe] = {
    "mask, then softmax (yours)": Recipe(),
    "softmax, then mask with 0": Recipe(mask_first=False, fill="0"),
    "softmax over dim=-2": Recipe(dim=-2),
    "fill 0 instead of -inf": Recipe(fill="0"),
    "scores x 4 (sharper)": Recipe(scale=4.0),
}


def comparison_figure(scores: torch.Tensor, correct: Correct = None, row: int = 3) -> plt.Figure:
    """The explorer's main settings side by side: heatmaps on top, row `row` as bars below."""
    n = len(COMPARISONS)
    fig, axes = plt.subplots(2, n, figsize=(3.5 * n, 6.4), height_ratios=[1.1, 1])
    for i, (title, recipe) in enumerate(COMPARISONS.items()):
        weights = attention_weights(scores, recipe, correct)
        draw(weights, row, title, axes=(axes[0, i], axes[1, i]))
        axes[1, i].set_xlabel("key position")
    fig.suptitle(f"one batch element, five recipes; bars: query row {row} (red = future)")
    fig.tight_layout()
    return fig
