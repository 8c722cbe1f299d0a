"""attention_course.measure: the numbers notebook 07 plots are right on the CPU."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from attention_course import measure

CPU = torch.device("cpu")


def _qkv(T: int, B: int = 2, H: int = 3, hs: int = 16) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, T, hs, generator=g) for _ in range(3)]


def explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """A materialising path, written here as a test would (the notebook writes its own)."""
    T = q.shape[-2]
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / k.shape[-1] ** 0.5
    scores = torch.where(torch.ones(T, T).tril().bool(), scores, -torch.inf)
    return scores.softmax(-1) @ v


def fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_peak_bytes_sees_the_weights_tensor_only_on_the_explicit_path() -> None:
    T = 256
    q, k, v = _qkv(T)
    weights = q.shape[0] * q.shape[1] * T * T * 4
    explicit_peak = measure.peak_bytes(lambda: explicit(q, k, v), CPU)
    fused_peak = measure.peak_bytes(lambda: fused(q, k, v), CPU)
    assert 2 * weights <= explicit_peak <= 4 * weights
    assert fused_peak < weights / 4
    # views of the inputs are not new memory
    assert measure.peak_bytes(lambda: q.transpose(-2, -1), CPU) == 0


def test_compare_attention_rows_and_threads_restored() -> None:
    threads = torch.get_num_threads()
    rows = measure.compare_attention(
        [16, 32], 1, 2, 8, CPU, explicit=explicit, fused=fused, repeat=1, progress=False
    )
    assert torch.get_num_threads() == threads
    assert [r["T"] for r in rows] == [16, 32]
    for r in rows:
        assert r["max_abs_diff"] < 1e-5
        assert r["explicit_s"] > 0 and r["fused_s"] > 0
    # four times the context squared: the explicit peak grows fourfold per doubling
    assert rows[1]["explicit_bytes"] / rows[0]["explicit_bytes"] > 3


def test_compare_attention_reports_a_disagreement() -> None:
    def off(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return fused(q, k, v) + 0.5

    (row,) = measure.compare_attention(
        [16], 1, 1, 8, CPU, explicit=explicit, fused=off, repeat=1, progress=False
    )
    assert abs(row["max_abs_diff"] - 0.5) < 1e-5


def test_plot_draws_the_guide_only_when_given() -> None:
    import matplotlib

    matplotlib.use("Agg")
    rows = [
        {"T": T, "explicit_s": 1e-3, "fused_s": 1e-4, "explicit_bytes": T * T, "fused_bytes": T}
        for T in (16, 32)
    ]
    without = measure.plot_comparison(rows)
    with_guide = measure.plot_comparison(rows, guide=[100.0, 400.0])
    assert len(with_guide.axes[1].lines) == len(without.axes[1].lines) + 1
