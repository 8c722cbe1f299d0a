"""The small character model shared by notebooks 06 and 07."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
from torch.nn import functional as F

from attention_course import charmodel, data
from attention_course.charmodel import CharData, CharModel, causal_loss, estimate_loss, train
from attention_course.errors import CourseError

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 40


class RefHead(nn.Module):
    """The lecture's Head, written here so these tests depend on no notebook."""

    def __init__(self, n_embd: int, head_size: int, block_size: int, mask: bool = True) -> None:
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(0.0)
        self.mask = mask

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        k, q = self.key(x), self.query(x)  # (B,T,hs)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B,T,hs) @ (B,hs,T) -> (B,T,T)
        if self.mask:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = self.dropout(F.softmax(wei, dim=-1))
        return wei @ self.value(x)  # (B,T,T) @ (B,T,hs) -> (B,T,hs)


@pytest.fixture(scope="module")
def small() -> CharData:
    return CharData(TEXT)


def model_for(d: CharData, n_embd=16, head_size=12, block_size=8, residual=False, mask=True):
    torch.manual_seed(0)
    hs = n_embd if residual else head_size
    head = RefHead(n_embd, hs, block_size, mask=mask)
    return CharModel(d.vocab_size, n_embd, block_size, head, hs, residual=residual)


def fit(model: nn.Module, d: CharData, steps: int, **kwargs) -> dict:
    """train() with the small settings of these tests, overridable by keyword."""
    settings = dict(batch_size=16, block_size=8, lr=1e-2, eval_every=steps, eval_iters=2, seed=0)
    settings.update(kwargs)
    return train(model, d, steps=steps, progress=False, **settings)


def test_chardata_vocab_split_and_roundtrip(small: CharData) -> None:
    assert small.chars == sorted(set(TEXT))
    assert small.vocab_size == len(set(TEXT))
    n = len(TEXT)
    assert len(small.train) == int(0.9 * n) and len(small.train) + len(small.val) == n
    assert small.decode(small.encode("hear me")) == "hear me"
    assert small.decode(torch.tensor(small.encode("Citizen"))) == "Citizen"


def test_get_batch_shapes_shift_and_seed(small: CharData) -> None:
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    x, y = small.get_batch("train", 5, 7, generator=g1)
    x2, _ = small.get_batch("train", 5, 7, generator=g2)
    assert x.shape == y.shape == (5, 7) and x.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])  # the targets are the inputs shifted by one
    assert torch.equal(x, x2)
    with pytest.raises(ValueError):
        small.get_batch("test", 2, 3)


def test_real_data_set_loads() -> None:
    d = CharData.load(download=False)
    assert len(d.text) == 1_115_394 and d.vocab_size == 65
    assert len(d.train) == 1_003_854 and len(d.val) == 111_540


def test_load_without_file_or_network_is_a_course_error(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("TINYSHAKESPEARE", raising=False)
    monkeypatch.setattr(data, "data_dir", lambda: tmp_path / "data")
    monkeypatch.chdir(tmp_path)

    def offline(*args, **kwargs):
        raise data.urllib.error.URLError("no network")

    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    with pytest.raises(CourseError, match="Could not download"):
        CharData.load()
    with pytest.raises(CourseError, match="tiny Shakespeare"):
        CharData.load(download=False)


def test_forward_shapes_and_untrained_loss_near_uniform(small: CharData) -> None:
    model = model_for(small)
    x, y = small.get_batch("train", 4, 8, generator=torch.Generator().manual_seed(0))
    logits, loss = model(x, y)
    assert logits.shape == (4, 8, small.vocab_size)
    assert abs(loss.item() - math.log(small.vocab_size)) < 0.5
    logits_short, none = model(x[:, :3])
    assert logits_short.shape == (4, 3, small.vocab_size) and none is None
    with pytest.raises(ValueError):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_residual_needs_matching_width(small: CharData) -> None:
    with pytest.raises(ValueError, match="head_out == n_embd"):
        CharModel(small.vocab_size, 16, 8, RefHead(16, 12, 8), 12, residual=True)
    model = model_for(small, residual=True)
    logits, _ = model(torch.zeros(2, 8, dtype=torch.long))
    assert logits.shape == (2, 8, small.vocab_size)


def test_estimate_loss_uses_fixed_batches_and_restores_mode(small: CharData) -> None:
    model = model_for(small)
    model.train()
    a = estimate_loss(model, small, 4, 8, eval_iters=3, seed=5)
    b = estimate_loss(model, small, 4, 8, eval_iters=3, seed=5)
    c = estimate_loss(model, small, 4, 8, eval_iters=3, seed=6)
    assert set(a) == {"train", "val"} and a == b and a != c
    assert model.training
    model.eval()
    estimate_loss(model, small, 4, 8, eval_iters=1)
    assert not model.training


def test_training_lowers_the_loss(small: CharData) -> None:
    model = model_for(small)
    history = fit(model, small, 120, eval_every=60, eval_iters=4)
    assert history["steps"] == [0, 60, 120]
    assert len(history["train"]) == len(history["val"]) == 3
    assert history["val"][-1] < history["val"][0] - 1.0
    assert history["seconds"] > 0


def test_training_is_reproducible_and_restores_threads(small: CharData) -> None:
    before = torch.get_num_threads()
    runs = []
    for _ in range(2):
        model = model_for(small)
        runs.append(fit(model, small, 20, batch_size=4, lr=1e-3, eval_every=10, seed=1)["val"])
    assert runs[0] == runs[1]
    assert torch.get_num_threads() == before


def test_generate_length_crop_and_seed(small: CharData) -> None:
    model = model_for(small)
    start = torch.zeros(2, 1, dtype=torch.long)
    out = model.generate(start, 20, generator=torch.Generator().manual_seed(0))
    again = model.generate(start, 20, generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 21) and torch.equal(out, again)
    assert torch.equal(out[:, :1], start)
    assert int(out.max()) < small.vocab_size


def test_model_is_causal_and_generation_sees_no_future(small: CharData) -> None:
    model = model_for(small)
    x = torch.randint(0, small.vocab_size, (3, 8), generator=torch.Generator().manual_seed(1))
    changed = x.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % small.vocab_size
    with torch.no_grad():
        a, _ = model(x)
        b, _ = model(changed)
    assert torch.allclose(a[:, :5], b[:, :5], atol=1e-6)
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_causal_loss_equals_teacher_forced_loss_for_a_causal_model(small: CharData) -> None:
    model = model_for(small)
    honest = causal_loss(model, small, 4, 8, eval_iters=3, split="val", seed=2)
    forced = estimate_loss(model, small, 4, 8, eval_iters=3, seed=2)["val"]
    assert honest == pytest.approx(forced, abs=1e-5)


def test_causal_loss_exposes_a_head_that_sees_the_future(small: CharData) -> None:
    model = model_for(small, mask=False)
    fit(model, small, 150)
    forced = estimate_loss(model, small, 16, 8, eval_iters=3)["val"]
    honest = causal_loss(model, small, 16, 8, eval_iters=3)
    assert honest > forced + 1.0


def test_count_parameters(small: CharData) -> None:
    model = model_for(small, n_embd=16, head_size=12, block_size=8)
    V = small.vocab_size
    expected = V * 16 + 8 * 16 + 3 * 16 * 12 + 12 * V + V
    assert charmodel.count_parameters(model) == expected
