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
