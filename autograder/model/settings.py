"""Every limit of the grader in one place: its default and why it is what it is.

`Limits` holds the bounds that keep one submission from costing the class more than its
share; `Settings` is one run of `python -m autograder grade` (paths, parallelism, which
notebooks count, the jail). `explain()` prints the limits with their reasons (`grade --limits`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MiB = 2**20


def _limit(default: Any, why: str) -> Any:
    return field(default=default, metadata={"why": why})


@dataclass(frozen=True)
class Limits:
    """Bounds on what one submission may cost; each field says why."""

    timeout: float = _limit(
        300.0,
        "wall seconds for one notebook, kernel, probes and feedback rendering together: the "
        "slowest solution notebook (06, trained shorter under NBGRADER_EXECUTION) runs in "
        "well under a minute on one core, so five times that is generous and still bounds "
        "a class of 1,000 students",
    )
    cell_timeout: float = _limit(
        120.0,
        "seconds one cell may run, in the kernel and in each probe: nbgrader's own default, "
        "and no solution cell needs more than a few seconds",
    )
    memory_mb: int = _limit(
        4096,
        "memory of each jail, everything it holds (its processes together, shared memory, "
        "memfd files, its /tmp) where it has a cgroup: a notebook's kernel, or a probe server "
        "with the probe it runs; the course's models fit in a few hundred MiB; two workers "
        "with this bound fit a 16 GiB machine",
    )
    notebook_bytes: int = _limit(
        64 * MiB,
        "largest file read as a notebook: a course notebook with its plots is under 2 MiB",
    )
    files_per_student: int = _limit(
        500,
        "files and folders looked at in one student's folder: more is not a submission",
    )
    folder_depth: int = _limit(8, "folder levels searched below a student's folder")
    match_cell_chars: int = _limit(
        64_000,
        "a cell longer than this is not parsed when files are matched by content: parsing "
        "cost grows with size and a real answer is a few hundred characters",
    )
    zip_bytes: int = _limit(
        4 * 2**30,
        "bytes a class .zip may expand to in all (only its .ipynb members are extracted)",
    )
    zip_members: int = _limit(100_000, "members of a class .zip looked at")
    zip_ratio: float = _limit(
        200.0,
        "largest expansion ratio of one .zip member: notebooks deflate about 3-10x, a zip "
        "bomb by 1,000x or more; a member over it is refused (that notebook is invalid)",
    )
    render_source_chars: int = _limit(
        10_000,
        "characters of one cell's source shown on the feedback page (the rest is cut with a "
        "note): syntax highlighting costs about a minute per MB",
    )
    render_output_chars: int = _limit(
        64_000,
        "characters of one cell's text output shown on the feedback page",
    )
    render_seconds: float = _limit(
        20.0,
        "seconds kept back from the notebook's budget for rendering its page: when less is "
        "left, the page shows the scores without the notebook",
    )
    worker_retries: int = _limit(
        1,
        "times a notebook is given to another worker after the worker grading it died; a "
        "second death marks it `error` (it is then the submission that kills workers)",
    )

    @property
    def memory_bytes(self) -> int:
        return self.memory_mb * MiB

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Limits:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class Settings:
    """One grading run."""

    submissions: Path
    out: Path
    jobs: int = 1
    scheduler: str | None = None  # address of an existing Dask scheduler; None: a local cluster
    notebooks: tuple[str, ...] = ()  # the notebooks that count; () = every course notebook
    jail: bool = True  # False only with --no-jail: student code then runs as the grader's user
    progress: bool = True
    limits: Limits = field(default_factory=Limits)
    tls: Any = None  # cluster.TLSFiles for a tls:// scheduler (checked by cluster.check)


def explain(limits: Limits | None = None) -> str:
    """The limits, their values and why, as text."""
    limits = limits or Limits()
    lines = []
    for f in dataclasses.fields(limits):
        lines.append(f"{f.name} = {getattr(limits, f.name)!r}")
        lines.append(f"    {f.metadata['why']}")
    return "\n".join(lines)
