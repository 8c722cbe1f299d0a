"""Heatmaps of attention weights and loss curves, the pictures the notebooks share."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch


def heatmap(
    wei: torch.Tensor,
    title: str = "",
    ax: plt.Axes | None = None,
    labels: Sequence[str] | None = None,
    annotate: bool | None = None,
) -> plt.Axes:
    """One (T,T) weight matrix: rows are queries (who looks), columns keys (who is looked at)."""
    w = wei.detach().float().cpu()
    if w.dim() != 2:
        raise ValueError(f"heatmap expects a (T,T) matrix, got shape {tuple(w.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 3.6))
    finite = torch.where(torch.isfinite(w), w, torch.nan)
    cmap = plt.get_cmap("viridis").with_extremes(bad="lightgrey")  # -inf (masked) and nan cells
    image = ax.imshow(finite.numpy(), cmap=cmap)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    T = w.shape[0]
    if annotate is None:
        annotate = T <= 8
    if annotate:
        low, high = image.get_clim()
        for i in range(T):
            for j in range(w.shape[1]):
                value = w[i, j].item()
                text = "-inf" if value == float("-inf") else f"{value:.2f}"
                masked = not torch.isfinite(w[i, j])
                bright = high > low and (value - low) / (high - low) > 0.6
                color = "black" if bright or masked else "white"
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color=color)
    ticks = range(T)
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    if labels is not None:
        ax.set_xticklabels(list(labels), fontsize=7)
        ax.set_yticklabels(list(labels), fontsize=7)
    ax.set_xlabel("key position (attended to)")
    ax.set_ylabel("query position (attending)")
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def heatmaps(
    weights: torch.Tensor, titles: Sequence[str] | None = None, suptitle: str = ""
) -> plt.Figure:
    """A row of heatmaps, one per leading index of a (N,T,T) tensor."""
    w = weights.detach()
    n = w.shape[0]
    fig, axes = plt.subplots(1, n, figsize=(3.4 * n, 3.1), squeeze=False)
    for i in range(n):
        heatmap(w[i], titles[i] if titles else f"batch element {i}", ax=axes[0, i])
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def loss_curves(
    histories: dict[str, Sequence[float]], every: int = 1, title: str = ""
) -> plt.Figure:
    """Loss against training step for several named runs."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in histories.items():
        ax.plot([i * every for i in range(len(values))], list(values), label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy loss")
    if title:
        ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


_STAGES = [  # (label, shape, colour) from the input to the output of one head
    ("x", "(B, T, C)", "#dddddd"),
    ("q, k, v", "3 x (B, T, hs)", "#cfe2f3"),
    ("scores\n$q\\,k^\\top$", "(B, T, T)", "#d9ead3"),
    ("mask\n-inf above\nthe diagonal", "(B, T, T)", "#f4cccc"),
    ("softmax\nover the keys", "(B, T, T)", "#fff2cc"),
    ("weights @ v", "(B, T, hs)", "#d9d2e9"),
]


def attention_diagram(ax: plt.Axes | None = None, scaled: bool = False) -> plt.Axes:
    """The path of one head as boxes and arrows, each box with the shape it produces.

    `scaled` writes the scores with notebook 05's factor, q kᵀ / sqrt(hs).
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(10.5, 2.4))
    width, gap = 1.35, 0.45
    stages = list(_STAGES)
    if scaled:
        stages[2] = ("scores\n$q\\,k^\\top / \\sqrt{hs}$", *stages[2][1:])
    for i, (label, shape, colour) in enumerate(stages):
        left = i * (width + gap)
        box = plt.Rectangle((left, 0.25), width, 1.1, fc=colour, ec="black", lw=1)
        ax.add_patch(box)
        ax.text(left + width / 2, 0.86, label, ha="center", va="center", fontsize=9)
        ax.text(left + width / 2, 0.05, shape, ha="center", va="center", fontsize=8)
        if i:
            ax.annotate(
                "", xy=(left, 0.8), xytext=(left - gap, 0.8), arrowprops={"arrowstyle": "->"}
            )
    v_left = 1 * (width + gap) + width * 0.75  # v skips the scores, mask and softmax
    out_left = (len(stages) - 1) * (width + gap) + width * 0.25
    ax.annotate(
        "",
        xy=(out_left, 1.35),
        xytext=(v_left, 1.35),
        arrowprops={"arrowstyle": "->", "connectionstyle": "arc3,rad=-0.12", "ls": "--"},
    )
    ax.text(
        (v_left + out_left) / 2,
        1.84,
        "v goes straight to the weighted sum",
        ha="center",
        fontsize=8,
    )
    ax.set_xlim(-0.1, len(stages) * (width + gap))
    ax.set_ylim(-0.15, 2.05)
    ax.axis("off")
    return ax


def token_graph(
    wei: torch.Tensor,
    tokens: Sequence[str] | None = None,
    row: int | None = None,
    ax: plt.Axes | None = None,
    title: str = "",
) -> plt.Axes:
    """One (T,T) weight matrix as the lecture's directed graph: positions are nodes, and an
    arrow from s to t is as wide as wei[t, s], the share of position s in t's output.

    Arrows run left to right (a token only hears its past); a token's weight on itself is the
    ring above its node. `row`: draw the arrows into that position dark and the others faint.
    """
    from matplotlib.patches import Arc, Circle, FancyArrowPatch

    w = wei.detach().float().cpu()
    if w.dim() != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"token_graph expects a (T,T) matrix, got shape {tuple(w.shape)}")
    T = w.shape[0]
    if ax is None:
        _, ax = plt.subplots(figsize=(min(1.2 * T + 1, 10), 3.4))
    cmap = plt.get_cmap("viridis")
    for t in range(T):
        for s in range(t + 1):
            weight = float(w[t, s])
            if not weight > 0.01:  # also skips nan
                continue
            faint = row is not None and t != row
            colour = "lightgrey" if faint else cmap(0.9 * (1 - weight))
            width = 0.5 + 7 * weight
            if s == t:  # the ring above the node: the token's weight on itself
                ax.add_patch(
                    Arc((t, 0.32), 0.42, 0.5, theta1=-60, theta2=240, lw=width, color=colour)
                )
                continue
            arrow = FancyArrowPatch(
                (s, 0.12),
                (t, 0.12),
                connectionstyle=f"arc3,rad=-{0.25 + 0.03 * (t - s)}",
                arrowstyle="-|>",
                mutation_scale=10 + 6 * weight,
                lw=width,
                color=colour,
                zorder=1 if faint else 2,
            )
            ax.add_patch(arrow)
    for t in range(T):
        ax.add_patch(Circle((t, 0), 0.16, fc="white", ec="black", lw=1.2, zorder=3))
        ax.text(t, 0, str(t), ha="center", va="center", fontsize=9, zorder=4)
        if tokens is not None:
            ax.text(t, -0.32, repr(tokens[t])[1:-1], ha="center", va="top", fontsize=10)
    key = "arrow s -> t: its width and colour show wei[t, s]; ring: a token's weight on itself"
    ax.text((T - 1) / 2, -0.55 if tokens is None else -0.75, key, ha="center", va="top", fontsize=9)
    ax.set_xlim(-0.6, T - 0.4)
    ax.set_ylim(-0.75 if tokens is None else -0.95, 0.55 + 0.16 * T)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    return ax
