"""Notebook 03's explorer: the update function's weights, its figure, and the widget wiring."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attention_course import explorer as ex  # noqa: E402
from attention_course.errors import CourseError  # noqa: E402

T = 8
FUTURE = torch.ones(T, T, dtype=torch.bool).triu(1)


@pytest.fixture
def scores() -> torch.Tensor:
    g = torch.Generator().manual_seed(5)
    return 1.5 * torch.randn(T, T, generator=g)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def reference(scores: torch.Tensor) -> torch.Tensor:
    """A correct mask_then_softmax for (T,T) scores, as a student might write it."""
    T = scores.shape[-1]
    return torch.where(torch.ones(T, T).tril().bool(), scores, -torch.inf).softmax(-1)


def stub(scores: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError()


def weights(scores: torch.Tensor, **settings) -> torch.Tensor:
    w, fig = ex.explore(scores, correct=reference, **settings)
    plt.close(fig)
    return w


def test_the_right_recipe_is_the_students_function(scores: torch.Tensor) -> None:
    calls = []

    def recording(s: torch.Tensor) -> torch.Tensor:
        calls.append(s)
        return reference(s)

    w, fig = ex.explore(scores, correct=recording, scale=2.0)
    plt.close(fig)
    assert len(calls) == 1 and torch.allclose(calls[0], 2.0 * scores)
    assert torch.allclose(w, reference(2.0 * scores))


@pytest.mark.parametrize("correct", [None, stub], ids=["missing", "stub"])
def test_unanswered_right_recipe_shows_a_note(scores: torch.Tensor, correct) -> None:
    for settings in ({"fill": "-1e9"}, {"dim": -2}):  # the right recipe, and the one built on it
        w, fig = ex.explore(scores, correct=correct, **settings)
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert w is None
        assert any("not answered yet" in t for t in texts), texts
    for settings in ({"fill": "0"}, {"mask_first": False}):  # wrong recipes still draw
        wrong, _ = ex.explore(scores, correct=correct, **settings)
        assert wrong is not None and wrong.shape == (T, T)
    plt.close("all")


def test_the_explorer_holds_no_right_recipe_of_its_own(scores: torch.Tensor) -> None:
    """Every setting it computes by itself is one of the mistakes: none is causal and normal.
    The others run the student's function (None while there is none)."""
    for mask_first in (True, False):
        for dim in (-1, -2):
            for fill in ex.FILLS:
                recipe = ex.Recipe(mask_first, dim, fill)
                w = ex.attention_weights(scores, recipe, correct=None)
                if recipe.uses_yours:
                    assert w is None, recipe
                    continue
                rows_normal = torch.allclose(w.sum(-1), torch.ones(T), atol=1e-5)
                causal = bool((w[FUTURE] == 0).all())
                assert not (rows_normal and causal), recipe


def test_softmax_over_queries_runs_the_students_function_on_turned_scores(
    scores: torch.Tensor,
) -> None:
    calls = []

    def recording(s: torch.Tensor) -> torch.Tensor:
        calls.append(s)
        return reference(s)

    w = ex.attention_weights(scores, ex.Recipe(dim=-2), correct=recording)
    tril = torch.tril(torch.ones(T, T))
    expected = torch.softmax(scores.masked_fill(tril == 0, float("-inf")), dim=-2)
    assert len(calls) == 1 and torch.allclose(w, expected, atol=1e-6)


def test_panels_that_run_the_students_function_say_so(scores: torch.Tensor) -> None:
    titles = {}
    for name, settings in {"right": {}, "axis": {"dim": -2}, "zero": {"fill": "0"}}.items():
        _, fig = ex.explore(scores, correct=reference, **settings)
        titles[name] = fig.axes[0].get_title()
    assert titles["right"].endswith("(yours)")
    assert titles["axis"].endswith("(from yours)")
    assert "yours" not in titles["zero"]


def test_mask_then_softmax_over_keys_is_causal_and_normalised(scores: torch.Tensor) -> None:
    w = weights(scores)
    assert torch.allclose(w.sum(-1), torch.ones(T), atol=1e-6)
    assert bool((w[FUTURE] == 0).all())
    tril = torch.tril(torch.ones(T, T))
    reference = torch.softmax(scores.masked_fill(tril == 0, float("-inf")), dim=-1)
    assert torch.allclose(w, reference)


def test_masking_after_the_softmax_leaves_rows_below_one(scores: torch.Tensor) -> None:
    w = weights(scores, mask_first=False, fill="0")
    sums = w.sum(-1)
    assert bool((sums[:-1] < 1 - 1e-3).all()), sums
    assert torch.isclose(sums[-1], torch.tensor(1.0)), "the last row has no future to lose"
    assert bool((w[FUTURE] == 0).all())


def test_masking_after_the_softmax_with_inf_poisons_the_rows(scores: torch.Tensor) -> None:
    w = weights(scores, mask_first=False, fill="-inf")
    assert bool(torch.isneginf(w[FUTURE]).all())
    for row in range(T - 1):
        text = ex.summary(w, row)
        assert "-inf" in text and "sums to" not in text and "future: 0.000" not in text, text
    assert ex.summary(w, T - 1).startswith(f"row {T - 1} sums to 1.000")


def test_fill_zero_leaks_future_weight(scores: torch.Tensor) -> None:
    w = weights(scores, fill="0")
    assert torch.allclose(w.sum(-1), torch.ones(T), atol=1e-6)
    assert bool((w[FUTURE] > 0).all()), "exp(0) = 1: every future key keeps some weight"
    assert "weight on the future: 0.000" not in ex.summary(w, 0)


def test_large_negative_fill_equals_minus_infinity(scores: torch.Tensor) -> None:
    assert torch.allclose(weights(scores, fill="-1e9"), weights(scores, fill="-inf"))


def test_softmax_over_queries_normalises_columns_not_rows(scores: torch.Tensor) -> None:
    w = weights(scores, dim=-2)
    assert torch.allclose(w.sum(-2), torch.ones(T), atol=1e-6)
    assert not torch.allclose(w.sum(-1), torch.ones(T), atol=1e-2)


def test_scale_multiplies_the_scores_and_sharpens_rows(scores: torch.Tensor) -> None:
    assert torch.allclose(weights(scores, scale=3.0), weights(3.0 * scores))
    soft, sharp = weights(scores, scale=0.5), weights(scores, scale=4.0)
    assert bool((sharp.max(-1).values[1:] > soft.max(-1).values[1:]).all())


def test_figure_shows_the_selected_row_as_bars(scores: torch.Tensor) -> None:
    w, fig = ex.explore(scores, row=5, fill="0")
    _, bars = fig.axes[:2]  # the heatmap, the bar chart (then the colorbar)
    heights = torch.tensor([p.get_height() for p in bars.patches], dtype=w.dtype)
    assert torch.allclose(heights, w[5], atol=1e-6)
    colours = [p.get_facecolor() for p in bars.patches]
    assert colours[6] == colours[7] != colours[0], "future keys are drawn in their own colour"
    assert "row 5 sums to 1.000" in bars.get_title()


@pytest.mark.parametrize(
    "args, settings",
    [
        ((torch.zeros(2, T, T),), {}),
        ((torch.zeros(T, T + 1),), {}),
        ((torch.zeros(T, T),), {"fill": "-100"}),
        ((torch.zeros(T, T),), {"dim": 0}),
        ((torch.zeros(T, T),), {"row": T}),
    ],
)
def test_bad_input_is_a_one_line_course_error(args: tuple, settings: dict) -> None:
    with pytest.raises(CourseError):
        ex.explore(*args, **settings)


def test_widget_calls_explore_with_the_controls_values(
    scores: torch.Tensor, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ipywidgets as widgets

    calls: list[dict] = []

    def recording(s: torch.Tensor, **settings) -> tuple[torch.Tensor, plt.Figure]:
        calls.append(settings)
        return torch.zeros(T, T), plt.figure()

    monkeypatch.setattr(ex, "explore", recording)
    panel = ex.explorer(scores, correct=reference, row=3)
    controls = panel.controls
    assert isinstance(controls["row"], widgets.IntSlider)
    assert (controls["row"].min, controls["row"].max) == (0, T - 1)
    assert isinstance(controls["scale"], widgets.FloatSlider)
    assert calls[-1].pop("correct") is reference
    assert calls[-1] == {"mask_first": True, "dim": -1, "fill": "-inf", "scale": 1.0, "row": 3}
    controls["row"].value = 6
    controls["scale"].value = 2.5
    controls["mask_first"].value = False
    controls["dim"].value = -2
    controls["fill"].value = "0"
    assert calls[-1].pop("correct") is reference
    assert calls[-1] == {"mask_first": False, "dim": -2, "fill": "0", "scale": 2.5, "row": 6}
    assert len(calls) == 6


def test_widget_controls_are_named_and_show_their_choice_without_colour(
    scores: torch.Tensor,
) -> None:
    import ipywidgets as widgets

    panel = ex.explorer(scores, correct=None, row=3)
    for name, control in panel.controls.items():
        assert len(control.description) >= 5, f"{name}: no accessible name"
        if name in ("mask_first", "dim", "fill"):
            assert isinstance(control, widgets.RadioButtons), "a dot marks the chosen option"
    assert panel.status.value.startswith("Showing: mask, then softmax")
    assert "(yours)" in panel.status.value and "not answered yet" in panel.status.value
    panel.controls["fill"].value = "0"
    assert "fill 0" in panel.status.value and "weight on the future" in panel.status.value
    plt.close("all")


def test_static_figure_compares_the_recipes(scores: torch.Tensor) -> None:
    fig = ex.comparison_figure(scores, correct=reference, row=3)
    titles = [ax.get_title() for ax in fig.axes]
    for name in ex.COMPARISONS:
        assert name in titles
    bar_titles = [t for t in titles if t.startswith("row 3 sums to")]
    assert len(bar_titles) == len(ex.COMPARISONS)
    assert "row 3 sums to 1.000" in bar_titles[0]
    assert not bar_titles[1].startswith("row 3 sums to 1.000"), "softmax, then mask: below one"


def test_static_figure_is_readable_on_a_screen_1024_pixels_wide(scores: torch.Tensor) -> None:
    import io

    from matplotlib.image import imread

    fig = ex.comparison_figure(scores, correct=reference, row=3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    width = imread(io.BytesIO(buffer.getvalue())).shape[1]
    assert width <= 1024, f"{width} pixels wide at 100 dpi: it would be shrunk on screen"
    sizes = [t.get_fontsize() for ax in fig.axes for t in ax.texts + [ax.title, ax.xaxis.label]]
    assert min(sizes) >= 7, f"text as small as {min(sizes)} pt"


def test_a_students_function_that_fails_is_one_line(scores: torch.Tensor) -> None:
    def broken(s: torch.Tensor) -> torch.Tensor:
        return s @ torch.ones(3, 3)

    with pytest.raises(CourseError, match="your mask_then_softmax raised RuntimeError"):
        ex.explore(scores, correct=broken)
    with pytest.raises(CourseError, match="same shape"):
        ex.explore(scores, correct=lambda s: s[0])
