"""Notebook 03's explorer: what mask order, softmax axis, fill value and scale do to the weights.

`explore` is the whole update logic as a plain function (scores in, weights and a figure out);
`explorer` wires it to ipywidgets; `comparison_figure` draws the same comparisons statically
for front ends that cannot render widgets.

The explorer holds no right recipe of its own: mask first, softmax over the keys is the
student's own `mask_then_softmax`, passed in as `correct`, and the panel says "(yours)". The
wrong recipes are built from their mistakes: a softmax taken before the mask, scores whose
future is set to 0 (so nothing is hidden), and the softmax over the queries, which is the
student's function run on the scores turned round (see `over_queries`). Until the answer is
written, the panels that need it say so instead of showing weights.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Patch, Rectangle

from attention_course import plots
from attention_course.errors import CourseError

FILLS: dict[str, float] = {"-inf": float("-inf"), "-1e9": -1e9, "0": 0.0}
Correct = Callable[[torch.Tensor], torch.Tensor] | None
UNANSWERED = (
    "mask_then_softmax is not answered yet:\n"
    "write it in its answer cell above,\nrun that cell, then this one again"
)
SEEN, FUTURE = plt.get_cmap("viridis")(0.25), plt.get_cmap("viridis")(0.85)  # colour-blind safe


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
    def hides(self) -> bool:
        """A fill whose exponential is zero: the future really is hidden before the softmax."""
        return self.fill in ("-inf", "-1e9")

    @property
    def is_correct(self) -> bool:
        """Mask first, softmax over the keys, a fill whose exponential is zero."""
        return self.mask_first and self.dim == -1 and self.hides

    @property
    def uses_yours(self) -> bool:
        """Computed with the student's mask_then_softmax (directly, or on turned scores)."""
        return self.mask_first and self.hides


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
        weights = correct(s)
    except NotImplementedError:
        return None
    except Exception as err:  # the student's function may raise anything: say so in one line
        raise CourseError(
            f"your mask_then_softmax raised {type(err).__name__} on a {tuple(s.shape)} matrix: "
            f"{err}. Run its self-check for what to fix."
        ) from None
    if not isinstance(weights, torch.Tensor) or weights.shape != s.shape:
        raise CourseError(
            f"your mask_then_softmax returned {getattr(weights, 'shape', type(weights).__name__)} "
            f"for a {tuple(s.shape)} matrix; the explorer needs weights of the same shape."
        )
    return weights.detach().float()


def over_queries(correct: Correct, s: torch.Tensor) -> torch.Tensor | None:
    """The future hidden, then a softmax over the queries (dim=-2), from the student's function.

    Normalising the columns of s is normalising the rows of s transposed; transposing moves
    the hidden part below the diagonal, and reversing the order of the rows and columns moves
    it back above, where the student's function hides it. So: turn the scores round, apply the
    student's function, turn the result back.
    """
    turned = _students(correct, s.mT.flip(-2, -1))  # (T,T): columns as rows, order reversed
    return None if turned is None else turned.flip(-2, -1).mT


def attention_weights(
    scores: torch.Tensor, recipe: Recipe = Recipe(), correct: Correct = None
) -> torch.Tensor | None:
    """(T,T) raw scores -> (T,T) weights made the way `recipe` says (None: not answered yet)."""
    _check(scores, recipe)
    s = scores.detach().float() * recipe.scale  # (T,T)
    if recipe.uses_yours:
        return _students(correct, s) if recipe.dim == -1 else over_queries(correct, s)
    T = s.shape[-1]
    later = torch.ones(T, T, dtype=torch.bool).triu(1)  # keys after the query: the future
    if recipe.mask_first:  # a fill of 0: the future's scores become 0, and nothing is hidden
        return torch.softmax(s * ~later, dim=recipe.dim)
    return torch.softmax(s, dim=recipe.dim).masked_fill(later, FILLS[recipe.fill])


def summary(weights: torch.Tensor, row: int) -> str:
    """One line on a query row: what it sums to and how much weight it gives the future."""
    w = weights[row]
    future = w[row + 1 :]
    if bool(torch.isnan(w).any()):
        return f"row {row} is nan (a softmax over scores that were all -inf)"
    if bool(torch.isinf(w).any()):
        n = int(torch.isinf(future).sum())
        return (
            f"row {row} holds -inf on {n} future keys; it has no sum, "
            "and wei @ v would turn -inf or nan"
        )
    return (
        f"row {row} sums to {w.sum().item():.3f}; weight on the future: {future.sum().item():.3f}"
    )


def _bars(ax: plt.Axes, weights: torch.Tensor, row: int) -> None:
    w = weights[row]
    T = w.shape[0]
    finite = torch.where(torch.isfinite(w), w, torch.zeros_like(w))
    later = [j > row for j in range(T)]
    bars = ax.bar(
        range(T),
        finite.numpy(),
        color=[FUTURE if f else SEEN for f in later],
        hatch=None,
        edgecolor="black",
        linewidth=0.6,
    )
    for bar, f in zip(bars, later, strict=True):
        bar.set_hatch("//" if f else "")  # the future is hatched as well as coloured
    for j in range(T):
        if not torch.isfinite(w[j]):
            ax.text(j, 0.03, str(w[j].item()), ha="center", va="bottom", rotation=90, fontsize=9)
        elif finite[j] > 0.005:
            ax.text(j, finite[j].item() + 0.02, f"{finite[j].item():.2f}", ha="center", fontsize=8)
    ax.set_xticks(range(T))
    ax.set_ylim(0, 1.12)
    ax.axvline(row + 0.5, color="black", lw=0.8, ls="--")
    ax.set_xlabel("key position")
    ax.set_ylabel(f"weight, row {row}")
    ax.legend(
        handles=[
            Patch(facecolor=SEEN, edgecolor="black", label=f"keys 0..{row}: may be seen"),
            Patch(facecolor=FUTURE, edgecolor="black", hatch="//", label="the future"),
        ],
        fontsize=8,
        loc="upper right",
    )
    ax.set_title(summary(weights, row).replace("; ", "\n"), fontsize=9)


def _note(ax_map: plt.Axes, ax_bar: plt.Axes, title: str) -> None:
    """Both panels of an unanswered recipe: the title and a note where the weights would be."""
    for ax in (ax_map, ax_bar):
        ax.set_xticks([])
        ax.set_yticks([])
        ax.text(0.5, 0.5, UNANSWERED, ha="center", va="center", fontsize=9, wrap=True)
    ax_map.set_title(title, fontsize=10)


def draw(weights: torch.Tensor | None, row: int, title: str = "", axes: Any = None) -> plt.Figure:
    """Heatmap of the weights with `row` outlined, and that row as bars (a note for None)."""
    new = axes is None
    if new:
        _, axes = plt.subplots(1, 2, figsize=(9.6, 3.6), width_ratios=[1, 1.25])
    ax_map, ax_bar = axes
    if weights is None:
        _note(ax_map, ax_bar, title)
        return ax_map.figure
    plots.heatmap(weights, title=title, ax=ax_map)
    ax_map.title.set_fontsize(10)
    T = weights.shape[-1]
    ax_map.add_patch(Rectangle((-0.5, row - 0.5), T, 1, fill=False, ec="black", lw=2.5))
    ax_map.add_patch(Rectangle((-0.5, row - 0.5), T, 1, fill=False, ec="white", lw=1, ls="--"))
    _bars(ax_bar, weights, row)
    if new:
        ax_map.figure.tight_layout()
    return ax_map.figure


def title_of(recipe: Recipe) -> str:
    """The recipe's settings, and "(yours)" where the panel runs the student's function."""
    if recipe.is_correct:
        return recipe.label() + "  (yours)"
    if recipe.uses_yours:
        return recipe.label() + "  (from yours)"
    return recipe.label()


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
    return weights, draw(weights, row, title_of(recipe))


def _choice(options: list[tuple[str, Any]], description: str) -> Any:
    """Radio buttons: a named group whose selected option shows by its dot, not by colour."""
    import ipywidgets as widgets

    return widgets.RadioButtons(
        options=options,
        description=description,
        style={"description_width": "110px"},
        layout=widgets.Layout(width="auto", margin="0 2.5em 0 0"),  # room between the groups
    )


def _state(settings: dict[str, Any], weights: torch.Tensor | None) -> str:
    """The settings in words, and what the chosen row does: the panel's text alternative."""
    recipe = Recipe(settings["mask_first"], settings["dim"], settings["fill"], settings["scale"])
    found = UNANSWERED.split(":")[0] if weights is None else summary(weights, settings["row"])
    return f"Showing: {title_of(recipe)}, query row {settings['row']}. {found}."


def explorer(scores: torch.Tensor, correct: Correct = None, row: int = 3) -> Any:
    """An ipywidgets panel over `explore`: three choices, a scale slider and a query-row slider,
    with a line of text that says what is shown."""
    import ipywidgets as widgets
    from IPython.display import display

    _check(scores, Recipe())
    T = scores.shape[0]
    style = {"description_width": "110px"}
    controls = {
        "mask_first": _choice(
            [("mask, then softmax", True), ("softmax, then mask", False)], "Order of steps"
        ),
        "dim": _choice([("dim=-1 (over keys)", -1), ("dim=-2 (over queries)", -2)], "Softmax axis"),
        "fill": _choice([(f, f) for f in FILLS], "Fill value"),
        "scale": widgets.FloatSlider(
            value=1.0, min=0.1, max=4.0, step=0.1, description="Score scale", style=style
        ),
        "row": widgets.IntSlider(
            value=min(row, T - 1), min=0, max=T - 1, description="Query row", style=style
        ),
    }
    status = widgets.Label(value="")
    output = widgets.Output()

    def update(_: Any = None) -> None:
        settings = {name: control.value for name, control in controls.items()}
        with output:
            output.clear_output(wait=True)
            weights, fig = explore(scores, correct=correct, **settings)
            status.value = _state(settings, weights)
            display(fig)
            plt.close(fig)

    for control in controls.values():
        control.observe(update, names="value")
    update()
    choices = widgets.HBox([controls["mask_first"], controls["dim"], controls["fill"]])
    panel = widgets.VBox([choices, controls["scale"], controls["row"], status, output])
    panel.controls = controls  # for tests and for students who want to set values in code
    panel.status = status
    return panel


COMPARISONS: dict[str, Recipe] = {
    "mask, then softmax (yours)": Recipe(),
    "softmax, then mask with 0": Recipe(mask_first=False, fill="0"),
    "softmax over dim=-2 (from yours)": Recipe(dim=-2),
    "fill 0 instead of -inf": Recipe(fill="0"),
    "scores x 4, sharper (yours)": Recipe(scale=4.0),
}


def comparison_figure(scores: torch.Tensor, correct: Correct = None, row: int = 3) -> plt.Figure:
    """The explorer's main settings, one recipe per line: the heatmap, and row `row` as bars.

    Ten inches wide, so that its text stays readable on a screen about 1000 pixels wide.
    """
    n = len(COMPARISONS)
    fig, axes = plt.subplots(n, 2, figsize=(10, 3.1 * n), width_ratios=[1, 1.35])
    for i, (title, recipe) in enumerate(COMPARISONS.items()):
        weights = attention_weights(scores, recipe, correct)
        draw(weights, row, title, axes=(axes[i, 0], axes[i, 1]))
    fig.suptitle(f"one sequence, five recipes; bars: the weights of query row {row}", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    return fig
