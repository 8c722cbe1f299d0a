"""A cell that needs a GPU says so in one line, never with a traceback in a student's face."""

from __future__ import annotations

import torch

from attention_course.errors import CourseError


class NoGPU(CourseError):
    """The device a notebook chose is not a GPU."""


def require_gpu(device: torch.device | str) -> torch.device:
    """`device` when it is a GPU (cuda or mps); else a NoGPU error that says what to do.

    It finds nothing itself: pass the device the notebook chose, e.g. `require_gpu(device)`.
    """
    chosen = torch.device(device)
    if chosen.type in ("cuda", "mps"):
        return chosen
    raise NoGPU(
        f"This cell needs a GPU and the notebook's device is {chosen}. In Colab choose Runtime > "
        "Change runtime type > a GPU, then run the notebook again; elsewhere skip this cell, "
        "the rest runs on the CPU."
    )
