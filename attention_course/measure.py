"""Time and memory of two ways of computing causal attention, against the context length T.

Notebook 07 measures how the explicit head (scores, mask, softmax, weights @ v) and PyTorch's
fused `scaled_dot_product_attention` scale with T. The two paths are the notebook's own
functions of (q, k, v), passed in: this module only times and weighs them.

Memory: on CUDA the allocator's own peak (`torch.cuda.max_memory_allocated`); elsewhere the
peak of the bytes held by the tensors that PyTorch operations create during the call, counted
with a dispatch mode (a fused kernel's small internal scratch space is not visible there).
Measure inference (no autograd): tensors saved for backward are not counted.
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that a timer measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_call(
    fn: Callable[[], Any], device: torch.device, repeat: int = 5, warmup: int = 1
) -> float:
    """The best (smallest) wall time of `repeat` calls of fn(), in seconds, after `warmup`
    untimed calls: the least disturbed run, on a machine that other programs share."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


class _TensorBytes(TorchDispatchMode):
    """Counts the bytes of storages that operations create, live and at their peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, list[int]] = {}  # storage address -> [bytes, live tensors]
        self.current = 0
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        inputs = {
            t.untyped_storage().data_ptr()
            for t in tree_leaves((args, kwargs or {}))
            if isinstance(t, torch.Tensor) and t.device.type != "meta"
        }
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                self._track(t, inputs)
        return out

    def _track(self, t: torch.Tensor, inputs: set[int]) -> None:
        storage = t.untyped_storage()
        address = storage.data_ptr()
        if address == 0:
            return
        entry = self.live.get(address)
        if entry is None:
            if address in inputs:  # a view of a tensor made outside the measured call
                return
            entry = self.live[address] = [storage.nbytes(), 0]
            self.current += entry[0]
            self.peak = max(self.peak, self.current)
        entry[1] += 1
        weakref.finalize(t, self._release, address)

    def _release(self, address: int) -> None:
        entry = self.live.get(address)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.live[address]


def peak_bytes(fn: Callable[[], Any], device: torch.device) -> int:
    """Peak memory that fn() allocates on top of what already exists, in bytes."""
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        with torch.no_grad():
            out = fn()
        synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - base
        del out
        return int(peak)
    with torch.no_grad(), _TensorBytes() as counter:
        out = fn()
        del out
    return int(counter.peak)


Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _measure(
    paths: dict[str, Attention], qkv: list[torch.Tensor], device: torch.device, repeat: int
) -> dict[str, float]:
    """One context length: agreement, times and peak memories of both paths."""
    explicit = functools.partial(paths["explicit"], *qkv)
    fused = functools.partial(paths["fused"], *qkv)
    with torch.no_grad():
        diff = (explicit().float() - fused().float()).abs().max().item()
        return {
            "T": qkv[0].shape[-2],
            "explicit_s": time_call(explicit, device, repeat),
            "fused_s": time_call(fused, device, repeat),
            "explicit_bytes": peak_bytes(explicit, device),
            "fused_bytes": peak_bytes(fused, device),
            "max_abs_diff": diff,
        }


def compare_attention(
    contexts: Sequence[int],
    batch: int,
    n_head: int,
    head_size: int,
    device: torch.device,
    explicit: Attention,
    fused: Attention,
    dtype: torch.dtype = torch.float32,
    repeat: int = 5,
    seed: int = 0,
    progress: bool = True,
    threads: int | None = 1,
) -> list[dict[str, float]]:
    """`explicit` against `fused` for each context length T, on (batch, n_head, T, hs) inputs.

    Each row: T, both times (s, best of `repeat`), both peak memories (bytes) and the largest
    absolute difference between the two outputs. On the CPU the timings use `threads` threads
    (None: leave the setting), restored afterwards: one thread gives stable numbers on a
    machine that other work shares.
    """
    from tqdm.auto import tqdm

    previous_threads = torch.get_num_threads()
    if threads is not None and device.type == "cpu":
        torch.set_num_threads(threads)
    try:
        rows = []
        g = torch.Generator().manual_seed(seed)
        paths = {"explicit": explicit, "fused": fused}
        for T in tqdm(list(contexts), desc="context lengths", disable=not progress):
            shape = (batch, n_head, T, head_size)
            qkv = [torch.randn(shape, generator=g).to(device=device, dtype=dtype) for _ in range(3)]
            rows.append(_measure(paths, qkv, device, repeat))
            del qkv
        return rows
    finally:
        torch.set_num_threads(previous_threads)


def plot_comparison(
    rows: Sequence[dict[str, float]], title: str = "", guide: Sequence[float] | None = None
) -> plt.Figure:
    """Time and peak memory against T, log-log; `guide`: bytes of one weights tensor per row."""
    T = [r["T"] for r in rows]
    mib = 2.0**20
    explicit, fused = plt.get_cmap("cividis")([0.0, 0.8])  # colour-blind safe, and two markers
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax_t.plot(T, [r["explicit_s"] * 1e3 for r in rows], "o-", color=explicit, label="explicit head")
    ax_t.plot(
        T,
        [r["fused_s"] * 1e3 for r in rows],
        "s-",
        color=fused,
        label="scaled_dot_product_attention",
    )
    ax_t.set_ylabel("time per call (ms)")
    ax_t.set_title("time", fontsize=10)
    ax_m.plot(
        T, [r["explicit_bytes"] / mib for r in rows], "o-", color=explicit, label="explicit head"
    )
    ax_m.plot(
        T,
        [r["fused_bytes"] / mib for r in rows],
        "s-",
        color=fused,
        label="scaled_dot_product_attention",
    )
    ax_m.set_title("peak memory", fontsize=10)
    if guide is not None:
        ax_m.plot(T, [b / mib for b in guide], ":", color="grey", label="one (B,H,T,T) tensor")
    ax_m.set_ylabel("peak memory of the call (MiB)")
    for ax in (ax_t, ax_m):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context length T")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
