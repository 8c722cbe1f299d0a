"""The GPU, or one line saying how to get one (never a traceback in a student's face)."""

from __future__ import annotations

import torch

from attention_course.errors import CourseError


class NoGPU(CourseError):
    """No CUDA or Apple-silicon GPU is visible to this kernel."""


def require_gpu() -> torch.device:
    """cuda if available, else mps, else a NoGPU error that says what to do."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    raise NoGPU(
        "This cell needs a GPU and none is visible. In Colab choose Runtime > Change runtime "
        "type > a GPU, then run the notebook again; elsewhere skip this cell, the rest runs "
        "on the CPU."
    )
