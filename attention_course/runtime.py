"""How long the notebooks train: the lecture's lengths, or short runs when nobody is watching.

A student's run always trains for the lecture's number of steps. When a notebook is executed
unattended (nbgrader sets `NBGRADER_EXECUTION`; `COURSE_SHORT_RUNS=1` asks for the same), its
training cells take fewer steps and seeds, so that the whole series stays cheap to re-run.
"""

from __future__ import annotations

import os

SHORT_RUN_VARIABLES = ("NBGRADER_EXECUTION", "COURSE_SHORT_RUNS")


def short_runs() -> bool:
    """True when the notebook runs unattended and its training runs should be short."""
    return any(os.environ.get(name, "").strip() not in ("", "0") for name in SHORT_RUN_VARIABLES)
