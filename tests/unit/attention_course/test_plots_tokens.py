"""plots.token_graph: the lecture's directed graph of tokens, one arrow per weight that counts."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.patches import Arc, FancyArrowPatch  # noqa: E402

from attention_course import plots  # noqa: E402

T = 6


@pytest.fixture
def wei() -> torch.Tensor:
    g = torch.Generator().manual_seed(2)
    scores = 2 * torch.randn(T, T, generator=g)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


def test_one_forward_arrow_per_weight_that_counts(wei: torch.Tensor) -> None:
    ax = plots.token_graph(wei)
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    rings = [p for p in ax.patches if isinstance(p, Arc)]
    off = torch.ones(T, T, dtype=torch.bool).tril(-1)
    assert len(arrows) == int(((wei > 0.01) & off).sum())
    assert len(rings) == int((wei.diagonal() > 0.01).sum())
    for arrow in arrows:
        (x0, _), (x1, _) = arrow._posA_posB
        assert x0 < x1, "every arrow runs forward in time"
    plt.close("all")


def test_width_grows_with_the_weight(wei: torch.Tensor) -> None:
    ax = plots.token_graph(wei)
    arrows = {
        a._posA_posB[0][0] * 10 + a._posA_posB[1][0]: a
        for a in ax.patches
        if isinstance(a, FancyArrowPatch)
    }
    pairs = [(wei[int(k % 10), int(k // 10)].item(), a.get_linewidth()) for k, a in arrows.items()]
    pairs.sort()
    assert [w for _, w in pairs] == sorted(w for _, w in pairs)
    plt.close("all")


def test_a_highlighted_row_greys_the_others(wei: torch.Tensor) -> None:
    ax = plots.token_graph(wei, row=4, tokens=list("abcdef"))
    grey = [
        a
        for a in ax.patches
        if isinstance(a, FancyArrowPatch)
        and a.get_edgecolor()[:3] == matplotlib.colors.to_rgb("lightgrey")
    ]
    into_4 = int(((wei[4, :4]) > 0.01).sum())
    assert len([a for a in ax.patches if isinstance(a, FancyArrowPatch)]) - len(grey) == into_4
    assert any(t.get_text() == "a" for t in ax.texts)
    plt.close("all")


def test_not_a_square_matrix_is_refused() -> None:
    with pytest.raises(ValueError):
        plots.token_graph(torch.zeros(3, 4))


def test_it_fits_a_screen_1024_pixels_wide(wei: torch.Tensor) -> None:
    from matplotlib.image import imread

    ax = plots.token_graph(torch.ones(8, 8).tril() / torch.arange(1, 9).unsqueeze(1))
    buffer = io.BytesIO()
    ax.figure.savefig(buffer, format="png", dpi=100)
    assert imread(io.BytesIO(buffer.getvalue())).shape[1] <= 1024
    plt.close("all")
