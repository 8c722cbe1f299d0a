"""Every limit of the grader in one place: its default, its unit and why it is what it is.

`Limits` holds the bounds that keep one submission from costing the class more than its
share. Its own fields are the run's options (`grade --timeout`, `--zip-bytes`, ...: the
command line is generated from them, `add_limit_options`); its nested groups (`jail`, `reads`,
`pages`, `proof`, `gradescope`) are fixed bounds of the trust boundary and of the pages, read
from the module's `LIMITS` where no run's settings reach (the jail's launch, the probe
server, which the grader hands them). `Settings` is one run of `python -m autograder grade`
(paths, parallelism, which notebooks count, the jail). `explain()` prints every limit with
its value, unit and reason (`python -m autograder limits`, or `grade --limits`).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MiB = 2**20

METAVARS = {"s": "SECONDS", "MiB": "MB", "bytes": "BYTES", "chars": "CHARS", "count": "N",
            "ratio": "RATIO", "share": "SHARE", "pixels": "PIXELS", "levels": "N"}  # fmt: skip


def _limit(default: Any, unit: str, why: str, *, zero: bool = False) -> Any:
    """A limit's field: `zero`, when 0 is a meaningful value (the option accepts it)."""
    assert unit in METAVARS, unit
    return field(default=default, metadata={"why": why, "unit": unit, "zero": zero})


def _group(kind: type) -> Any:
    return field(default_factory=kind, metadata={"group": True})


@dataclass(frozen=True)
class JailLimits:
    """Bounds of each jail (bubblewrap, `jail.py`) and of the probe server inside it."""

    scratch_bytes: int = _limit(
        64 * MiB,
        "bytes",
        "size of a jail's /tmp (its scratch tmpfs): a probe's or kernel's "
        "working files are a few KiB; the tmpfs is memory, counted by the jail's cgroup",
    )
    file_bytes: int = _limit(
        64 * MiB,
        "bytes",
        "RLIMIT_FSIZE of a jail: no file larger, in the scratch or the "
        "shared folder; observed arrays of the course's models are a few MiB",
    )
    shared_bytes: int = _limit(
        96 * MiB,
        "bytes",
        "a probe jail is stopped when its shared folder (where the probe "
        "writes what it observed) grows past this: a result is read within reads.result_bytes",
    )
    processes: int = _limit(
        1024,
        "count",
        "RLIMIT_NPROC and the cgroup's pids.max of a jail, threads included: "
        "torch starts a thread per core; a fork bomb stops here",
    )
    probe_processes_unbounded: int = _limit(
        128,
        "count",
        "RLIMIT_NPROC of a probe's jail without a cgroup (nothing else bounds "
        "its processes then): a probe needs the server and one child",
    )
    files: int = _limit(
        1024,
        "count",
        "RLIMIT_NOFILE of a jail with a cgroup: torch and the kernel's sockets need a few dozen",
    )
    files_unbounded: int = _limit(
        256,
        "count",
        "RLIMIT_NOFILE of a jail without a cgroup: memory held in open files is "
        "then counted nowhere",
    )
    shm_bytes: int = _limit(
        16 * MiB,
        "bytes",
        "size of a jail's /dev/shm: POSIX semaphores and the like, not a second scratch",
    )
    kernel_folder_bytes: int = _limit(
        4 * MiB,
        "bytes",
        "a jailed kernel's shared folder holds its connection file and "
        "sockets, nothing more: a kernel writing past this is stopped",
    )
    probe_start_timeout: float = _limit(
        120.0,
        "s",
        "seconds a jailed probe server may take to start (it imports torch "
        "first: a few seconds on a loaded machine), or less when the notebook's budget ends "
        "sooner",
    )
    probe_reply_margin: float = _limit(
        5.0,
        "s",
        "seconds past the cell timeout before the grader kills a probe server that "
        "has not replied: the server kills its own child at the cell timeout and answers",
    )
    probe_memory_margin: int = _limit(
        32 * MiB,
        "bytes",
        "of a probe jail's memory bound, what a probe child leaves for the "
        "server's own use (passed to the server with each job)",
    )
    probe_memory_floor: int = _limit(
        64 * MiB,
        "bytes",
        "the least a probe child may allocate, however much the server "
        "holds (passed to the server with each job)",
    )
    selftest_timeout: float = _limit(
        30.0,
        "s",
        "the first jail of a run, started empty to test the jail, must start within this: "
        "bwrap and a Python import take well under a second",
    )
    userns_timeout: float = _limit(
        10.0,
        "s",
        "the helper that makes a jail's user namespace must answer within this (it answers "
        "in milliseconds)",
    )
    folder_entries: int = _limit(
        10_000,
        "count",
        "entries of a kernel's folder counted when its size is measured; past this the "
        "folder counts as too large (a notebook writes a handful)",
    )


@dataclass(frozen=True)
class ProbeLimits:
    """Bounds of the probe package (`autograder/probe`), which runs inside the jail and imports
    nothing of the grader: its module constants mirror these (MAX_DEPTH, TEXT_BYTES,
    JSON_BYTES, NPY_HEADER_BYTES), and tests/unit/model/test_settings_limits.py holds them equal."""

    plain_depth: int = _limit(
        6, "levels", "levels of nesting a probe keeps of a value it observes (probe/plain.py)"
    )
    encode_depth: int = _limit(
        8, "levels", "levels of nesting written to a probe's observed.json (probe/observed.py)"
    )
    text_bytes: int = _limit(
        4096, "bytes", "bytes kept of a probe's short text files (its progress mark)"
    )
    json_bytes: int = _limit(
        MiB, "bytes", "largest small JSON file of a probe read back (its reply, its job)"
    )
    npy_header_bytes: int = _limit(
        4096, "bytes", "largest header of one observed array (a real one is under 200 bytes)"
    )


@dataclass(frozen=True)
class ReadLimits:
    """Bounds on what the grader reads back from files that student code could write."""

    result_bytes: int = _limit(
        256 * MiB,
        "bytes",
        "bytes the grader holds to read one probe's observed files and "
        "arrays: the course's probes observe a few MiB",
    )
    result_json_bytes: int = _limit(
        8 * MiB, "bytes", "of which observed.json (structure and scalars; arrays go to the .npz)"
    )
    npz_members: int = _limit(
        4096, "count", "arrays in one probe's observed.npz: a probe observes a few dozen"
    )
    npz_directory_bytes: int = _limit(
        MiB,
        "bytes",
        "bytes of observed.npz's central directory, checked before the zip "
        "reader builds it in memory",
    )
    state_bytes: int = _limit(
        16 * MiB,
        "bytes",
        "largest state file read back when a run resumes: a state is a few "
        "KB; a larger file is not the grader's",
    )
    analyse_cell_chars: int = _limit(
        64_000,
        "chars",
        "a student cell longer than this is not analysed for the names it "
        "reads from above: a real answer is a few hundred characters",
    )


@dataclass(frozen=True)
class PageLimits:
    """Bounds on what a graded notebook and its feedback page keep."""

    output_chars: int = _limit(
        256 * 1024,
        "chars",
        "characters of output kept per cell of the graded notebook (the "
        "rest is dropped with a note): a cell that prints 100 MB costs no memory",
    )
    image_chars: int = _limit(
        2 * MiB,
        "chars",
        "characters of one base64 image kept on a feedback page: a course plot is under 100 KB",
    )
    image_pixels: int = _limit(
        100_000,
        "pixels",
        "largest width or height kept on an image's tag: a larger one is not a real image's",
    )
    output_lines: int = _limit(
        200,
        "count",
        "lines of one output kept on a feedback page (nbgrader's LimitOutput): "
        "the course's cells print a few dozen",
    )
    traceback_lines: int = _limit(
        40,
        "count",
        "lines of one traceback kept on a feedback page (nbgrader's LimitOutput): "
        "the student's own frames come last",
    )
    alt_text_chars: int = _limit(
        400,
        "chars",
        "characters of an image's generated alternative text: a title and two axis labels",
    )


@dataclass(frozen=True)
class ProofLimits:
    """Bounds of the proof: the master solutions graded before the first student."""

    slow_share: float = _limit(
        0.8,
        "share",
        "a master that takes this share of --timeout or more makes the run warn: "
        "a student's slower answer would then run out of time",
    )
    kept: int = _limit(200, "count", "proofs kept in the cache (the newest)")


@dataclass(frozen=True)
class GradescopeLimits:
    """Bounds of a Gradescope autograder (`python -m autograder gradescope`)."""

    memory_mb: int = _limit(
        1024,
        "MiB",
        "default --memory-mb of a Gradescope autograder: a kernel and a probe side "
        "by side, each within this, and the grader fit 3 GB; every course notebook's solution "
        "grades within 768 MB",
    )
    start_seconds: int = _limit(
        120,
        "s",
        "added to the timeout advised for Gradescope: the container's start, torch's "
        "imports and the class outputs, generously",
    )
    grader_mb: int = _limit(
        1024,
        "MiB",
        "added to the memory advised for Gradescope: the grading process and its "
        "worker besides the kernel and the probes",
    )


@dataclass(frozen=True)
class Limits:
    """Bounds on what one submission may cost; each field says why."""

    timeout: float = _limit(
        300.0,
        "s",
        "wall seconds for one notebook, kernel, probes and feedback rendering together: the "
        "slowest solution notebook (06, trained shorter under NBGRADER_EXECUTION) runs in "
        "well under a minute on one core, so five times that is generous and still bounds "
        "a class of 1,000 students",
    )
    cell_timeout: float = _limit(
        120.0,
        "s",
        "seconds one cell may run, in the kernel and in each probe: nbgrader's own default, "
        "and no solution cell needs more than a few seconds",
    )
    memory_mb: int = _limit(
        4096,
        "MiB",
        "memory of each jail, everything it holds (its processes together, shared memory, "
        "memfd files, its /tmp) where it has a cgroup: a notebook's kernel, or a probe server "
        "with the probe it runs; the course's models fit in a few hundred MiB; two workers "
        "with this bound fit a 16 GiB machine",
    )
    notebook_bytes: int = _limit(
        64 * MiB,
        "bytes",
        "largest file read as a notebook: a course notebook with its plots is under 2 MiB",
    )
    files_per_student: int = _limit(
        500,
        "count",
        "files and folders looked at in one student's folder: more is not a submission",
    )
    folder_depth: int = _limit(8, "levels", "folder levels searched below a student's folder")
    match_cell_chars: int = _limit(
        64_000,
        "chars",
        "a cell longer than this is not parsed when files are matched by content: parsing "
        "cost grows with size and a real answer is a few hundred characters",
    )
    zip_bytes: int = _limit(
        4 * 2**30,
        "bytes",
        "bytes a class .zip may expand to in all (only its .ipynb members are extracted)",
    )
    zip_members: int = _limit(100_000, "count", "members of a class .zip looked at")
    zip_ratio: float = _limit(
        200.0,
        "ratio",
        "largest expansion ratio of one .zip member: notebooks deflate about 3-10x, a zip "
        "bomb by 1,000x or more; a member over it is refused (that notebook is invalid)",
    )
    render_source_chars: int = _limit(
        10_000,
        "chars",
        "characters of one cell's source shown on the feedback page (the rest is cut with a "
        "note): syntax highlighting costs about a minute per MB",
    )
    render_output_chars: int = _limit(
        64_000,
        "chars",
        "characters of one cell's text output shown on the feedback page",
    )
    render_seconds: float = _limit(
        20.0,
        "s",
        "seconds kept back from the notebook's budget for rendering its page: when less is "
        "left, the page shows the scores without the notebook",
    )
    worker_retries: int = _limit(
        1,
        "count",
        "times a notebook is given to another worker after the worker grading it died; a "
        "second death marks it `error` (it is then the submission that kills workers)",
        zero=True,
    )

    connect_timeout: float = _limit(
        60.0,
        "s",
        "seconds to reach an existing Dask scheduler (--scheduler) before the run gives up",
    )
    jail: JailLimits = _group(JailLimits)
    reads: ReadLimits = _group(ReadLimits)
    probe: ProbeLimits = _group(ProbeLimits)
    pages: PageLimits = _group(PageLimits)
    proof: ProofLimits = _group(ProofLimits)
    gradescope: GradescopeLimits = _group(GradescopeLimits)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mb * MiB

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Limits:
        """The limits `to_json` wrote (unknown names ignored, missing ones the defaults)."""
        return _from_json(cls, data)


def _from_json(kind: type, data: dict[str, Any]) -> Any:
    values = {}
    for f in dataclasses.fields(kind):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.metadata.get("group"):
            value = _from_json(f.default_factory, value if isinstance(value, dict) else {})  # type: ignore[misc]
        values[f.name] = value
    return kind(**values)


LIMITS = Limits()  # the defaults: read where no run's settings reach (the jail's own bounds)


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


def fields(limits: Any = None, prefix: str = "") -> Iterator[tuple[str, Any, dataclasses.Field]]:
    """Every limit, nested groups flattened: (dotted name, value, its field)."""
    limits = LIMITS if limits is None else limits
    for f in dataclasses.fields(limits):
        value = getattr(limits, f.name)
        if f.metadata.get("group"):
            yield from fields(value, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", value, f


def explain(limits: Limits | None = None) -> str:
    """Every limit: its name, value and unit, and why, as text."""
    lines = []
    for name, value, f in fields(limits or LIMITS):
        lines.append(f"{name} = {value!r} {f.metadata['unit']}")
        lines.append(f"    {f.metadata['why']}")
    return "\n".join(lines)


# ---- the command line's limits, generated from the fields above ------------------------------


def options() -> tuple[str, ...]:
    """The limits a run may change: `Limits`' own fields (its groups are fixed bounds)."""
    return tuple(f.name for f in dataclasses.fields(Limits) if not f.metadata.get("group"))


def option_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def positive(kind: type, zero: bool = False) -> Callable[[str], Any]:
    """An argparse type: a positive `kind` (int or float); 0 too with `zero`."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def add_limit_options(
    parser: argparse.ArgumentParser | Any,
    names: Iterable[str] | None = None,
    defaults: dict[str, Any] | None = None,
) -> None:
    """One option per limit in `names` (default: every option), its help the limit's reason;
    `defaults` replace the fields' defaults (a command with its own)."""
    chosen = options() if names is None else tuple(names)
    by_name = {f.name: f for f in dataclasses.fields(Limits)}
    for name in chosen:
        f = by_name[name]
        default = (defaults or {}).get(name, f.default)
        kind = int if isinstance(f.default, int) else float
        why = f.metadata["why"].replace("%", "%%")
        parser.add_argument(
            option_name(name),
            dest=name,
            metavar=METAVARS[f.metadata["unit"]],
            type=positive(kind, f.metadata["zero"]),
            default=default,
            help=f"{why} (default {default:g} {f.metadata['unit']})",
        )


def limits_from_args(args: argparse.Namespace, base: Limits | None = None) -> Limits:
    """`base` (default: the defaults) with the limits the options set; a cell's timeout
    never exceeds the notebook's."""
    base = base or LIMITS
    values = {name: getattr(args, name) for name in options() if hasattr(args, name)}
    limits = dataclasses.replace(base, **values)
    if limits.cell_timeout > limits.timeout:
        limits = dataclasses.replace(limits, cell_timeout=limits.timeout)
    return limits
