"""attention_course.measure: the numbers notebook 07 plots are right on the CPU."""

from __future__ import annotations

import torch

from attention_course import measure

CPU = torch.device("cpu")


def _qkv(T: int, B: int = 2, H: int = 3, hs: int = 16) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, T, hs, generator=g) for _ in range(3)]


def test_explicit_and_fused_attention_agree_and_are_causal() -> None:
    q, k, v = _qkv(12)
    tril = torch.tril(torch.ones(12, 12))
    out = measure.explicit_attention(q, k, v, tril)
    assert torch.allclose(out, measure.fused_attention(q, k, v), atol=1e-5)
    v_future = v.clone()
    v_future[..., 6:, :] += 1.0  # change only the values of positions 6..11
    assert torch.allclose(
        measure.explicit_attention(q, k, v_future, tril)[..., :6, :], out[..., :6, :]
    )


def test_peak_bytes_sees_the_weights_tensor_only_on_the_explicit_path() -> None:
    T = 256
    q, k, v = _qkv(T)
    tril = torch.tril(torch.ones(T, T))
    weights = q.shape[0] * q.shape[1] * T * T * 4
    explicit = measure.peak_bytes(lambda: measure.explicit_attention(q, k, v, tril), CPU)
    fused = measure.peak_bytes(lambda: measure.fused_attention(q, k, v), CPU)
    assert 2 * weights <= explicit <= 3 * weights
    assert fused < weights / 4
    # views of the inputs are not new memory
    assert measure.peak_bytes(lambda: q.transpose(-2, -1), CPU) == 0


def test_compare_attention_rows_and_threads_restored() -> None:
    threads = torch.get_num_threads()
    rows = measure.compare_attention([16, 32], 1, 2, 8, CPU, repeat=1, progress=False)
    assert torch.get_num_threads() == threads
    assert [r["T"] for r in rows] == [16, 32]
    for r in rows:
        assert r["max_abs_diff"] < 1e-5
        assert r["weights_bytes"] == 1 * 2 * r["T"] ** 2 * 4
        assert r["explicit_s"] > 0 and r["fused_s"] > 0
    # four times the context squared: the explicit peak grows fourfold per doubling
    assert rows[1]["explicit_bytes"] / rows[0]["explicit_bytes"] > 3
