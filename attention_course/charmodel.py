"""A small character-level language model on tiny Shakespeare, shared by notebooks 06 and 07.

`CharData` holds the text, the character vocabulary and the 90/10 train/validation split;
`CharModel` is token + position embedding, one attention block given from outside, and a
linear `lm_head`; `train` and `estimate_loss` are the lecture's loop and evaluation, with
seeded batches so that two models can be compared on exactly the same data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn as nn
from torch.nn import functional as F

from attention_course.data import load_text

Device = str | torch.device


class CharData:
    """Tiny Shakespeare encoded character by character, split 90/10 into train and val."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.chars: list[str] = sorted(set(text))
        self.vocab_size = len(self.chars)
        self._stoi = {ch: i for i, ch in enumerate(self.chars)}
        self._itos = dict(enumerate(self.chars))
        data = torch.tensor(self.encode(text), dtype=torch.long)
        n = int(0.9 * len(data))
        self.train = data[:n]
        self.val = data[n:]

    @classmethod
    def load(cls, download: bool = True) -> CharData:
        """The lecture's data set (see `attention_course.data.load_text`)."""
        return cls(load_text(download=download))

    def encode(self, s: str) -> list[int]:
        """String -> list of token ids."""
        return [self._stoi[c] for c in s]

    def decode(self, ids: list[int] | torch.Tensor) -> str:
        """Token ids (list or 1-D tensor) -> string."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return "".join(self._itos[int(i)] for i in ids)

    def get_batch(
        self,
        split: str,
        batch_size: int,
        block_size: int,
        generator: torch.Generator | None = None,
        device: Device = "cpu",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Random chunks: x (B,T) and the targets y (B,T), y shifted one step to the right."""
        if split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        data = self.train if split == "train" else self.val
        ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
        rows = ix[:, None] + torch.arange(block_size)  # (B,1) + (T,) -> (B,T) positions
        x, y = data[rows], data[rows + 1]  # (B,T) each: y is x shifted by one
        return x.to(device), y.to(device)


class CharModel(nn.Module):
    """Token + position embedding, one attention block `head`, then a linear lm_head.

    With `residual=True` the block is added to its input, x = x + head(x), so `head_out`
    must equal `n_embd`; otherwise the head's output goes straight into lm_head.
    """

    def __init__(
        self,
        vocab_size: int,
        n_embd: int,
        block_size: int,
        head: nn.Module,
        head_out: int,
        residual: bool = False,
    ) -> None:
        super().__init__()
        if residual and head_out != n_embd:
            raise ValueError(
                f"a residual stream needs head_out == n_embd, got head_out={head_out}, "
                f"n_embd={n_embd}"
            )
        self.block_size = block_size
        self.residual = residual
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.head = head
        self.lm_head = nn.Linear(head_out, vocab_size)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """idx (B,T) -> logits (B,T,vocab) and the mean cross-entropy (None without targets)."""
        B, T = idx.shape
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.block_size}")
        tok = self.token_embedding_table(idx)  # (B,T,C)
        pos = self.position_embedding_table(torch.arange(T, device=idx.device))  # (T,C)
        x = tok + pos  # (B,T,C)
        x = x + self.head(x) if self.residual else self.head(x)  # (B,T,C) or (B,T,head_out)
        logits = self.lm_head(x)  # (B,T,vocab)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
        return logits, loss

    @torch.no_grad()
    def generate(
        self, idx: torch.Tensor, max_new_tokens: int, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Extend idx (B,T) by max_new_tokens sampled tokens, seeing at most block_size."""
        with _eval_mode(self):
            for _ in range(max_new_tokens):
                idx_cond = idx[:, -self.block_size :]  # (B,<=block_size)
                logits, _ = self(idx_cond)  # (B,T,vocab)
                probs = F.softmax(logits[:, -1, :], dim=-1)  # (B,vocab)
                nxt = torch.multinomial(probs, 1, generator=generator)  # (B,1)
                idx = torch.cat([idx, nxt], dim=1)  # (B,T+1)
        return idx


@contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@torch.no_grad()
def estimate_loss(
    model: nn.Module,
    data: CharData,
    batch_size: int,
    block_size: int,
    eval_iters: int,
    seed: int = 0,
    device: Device = "cpu",
) -> dict[str, float]:
    """Mean loss over eval_iters fixed batches per split (the same batches for the same seed)."""
    out: dict[str, float] = {}
    with _eval_mode(model):
        for split in ("train", "val"):
            g = torch.Generator().manual_seed(seed)
            total = 0.0
            for _ in range(eval_iters):
                x, y = data.get_batch(split, batch_size, block_size, generator=g, device=device)
                _, loss = model(x, y)
                total += loss.item()
            out[split] = total / eval_iters
    return out


@torch.no_grad()
def causal_loss(
    model: nn.Module,
    data: CharData,
    batch_size: int,
    block_size: int,
    eval_iters: int,
    split: str = "val",
    seed: int = 0,
    device: Device = "cpu",
) -> float:
    """Loss with no access to the future, as at generation time.

    Position t is predicted from a forward pass over tokens 0..t only, and only its last
    logits are scored. For a causal model this equals the usual (teacher-forced) loss on the
    same batches; for a model that peeks ahead it is the loss it really has when generating.
    """
    g = torch.Generator().manual_seed(seed)
    total = 0.0
    with _eval_mode(model):
        for _ in range(eval_iters):
            x, y = data.get_batch(split, batch_size, block_size, generator=g, device=device)
            logits = torch.stack(
                [model(x[:, : t + 1])[0][:, -1, :] for t in range(block_size)], dim=1
            )  # block_size x (B,vocab) -> (B,T,vocab)
            total += F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()
    return total / eval_iters


def _adamw(model: nn.Module, lr: float, device: Device) -> torch.optim.Optimizer:
    """AdamW; the fused kernel where torch has one (about 1.6x faster for these tiny models)."""
    if torch.device(device).type in ("cpu", "cuda"):
        try:
            return torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
        except (RuntimeError, TypeError, ValueError):  # an older torch or an unsupported dtype
            pass
    return torch.optim.AdamW(model.parameters(), lr=lr)


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> float:
    """One step of gradient descent on one batch; returns the batch's loss."""
    _, loss = model(x, y)  # forward: logits (B,T,vocab) and the mean cross-entropy
    optimizer.zero_grad(set_to_none=True)  # forget the previous step's gradients
    loss.backward()  # d loss / d parameter, for every parameter
    optimizer.step()  # move each parameter a little against its gradient
    return loss.item()


def train(
    model: nn.Module,
    data: CharData,
    *,
    steps: int,
    batch_size: int,
    block_size: int,
    lr: float,
    eval_every: int,
    eval_iters: int,
    seed: int,
    device: Device = "cpu",
    desc: str = "",
    eval_seed: int = 0,
    threads: int | None = 1,
    progress: bool = True,
) -> dict[str, list[float] | list[int] | float]:
    """AdamW on seeded random batches; evaluated at step 0, every eval_every steps and at the end.

    Returns the history: "steps" (optimizer steps done at each evaluation), "train" and "val"
    (losses from `estimate_loss` on fixed batches from eval_seed) and "seconds" (wall time).
    The torch thread count is set to `threads` (None leaves it) and restored afterwards.
    """
    from tqdm.auto import tqdm

    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        torch.manual_seed(seed)  # dropout and anything else random inside the model
        g = torch.Generator().manual_seed(seed)
        optimizer = _adamw(model, lr, device)
        history: dict = {"steps": [], "train": [], "val": []}

        def evaluate(step: int) -> None:
            losses = estimate_loss(
                model, data, batch_size, block_size, eval_iters, eval_seed, device
            )
            history["steps"].append(step)
            history["train"].append(losses["train"])
            history["val"].append(losses["val"])

        start = time.perf_counter()
        model.train()
        bar = tqdm(range(steps), desc=desc or "training", disable=not progress, mininterval=0.5)
        evaluate(0)
        loss_value = math.nan
        for step in bar:
            x, y = data.get_batch("train", batch_size, block_size, generator=g, device=device)
            loss_value = train_step(model, optimizer, x, y)
            done = step + 1
            if done % eval_every == 0 or done == steps:
                evaluate(done)
                bar.set_postfix(loss=f"{loss_value:.3f}", val=f"{history['val'][-1]:.3f}")
            elif done % 50 == 0:
                bar.set_postfix(loss=f"{loss_value:.3f}")
        bar.close()
        history["seconds"] = time.perf_counter() - start
        return history
    finally:
        torch.set_num_threads(previous_threads)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
