"""Benchmark the grader, side by side in one run (figures, not asserts).

    .venv/bin/python benchmarks/bench_grade.py [--notebooks 01,05] [--class-size 8] [--no-jail]

(a) one full submission (the solutions of every notebook, or of --notebooks) graded with
    `python -m autograder grade`, against executing the same solution notebooks bare with
    nbclient in one process; the ratio (goal <= 1.0, jail on).
(b) a class of --class-size submissions graded with --jobs 1 and --jobs 2; the ratio
    (goal <= 0.6 on 2 cores), the core-seconds the machine was busy with each, and the best
    ratio this machine allows: how much faster two CPU-bound processes go than one here (its
    parallel capacity, measured first), against how much of that a lone worker already uses.
(c) the same class through a `dask scheduler` and two `dask worker` processes on loopback
    (`--scheduler`); the cluster is started before the clock and stopped after it. A new
    cluster proves the grader again (its proof is keyed by the scheduler): printed apart.
Before the clock, `python -m autograder prove` makes the proof on the master solutions that
every `grade` run finds cached (its cost, paid once per grader and environment, is printed).
Then what a class of 1,000 students costs, in worker hours and core-hours, from (b). Every
side is timed as a whole subprocess, interpreter start included, with
NBGRADER_EXECUTION=autograde (the notebooks' shorter training runs) on both sides. Set
$TINYSHAKESPEARE when the notebooks need the data.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autograder.model.paths import ROOT, SOLUTIONS
from examples.build import correct, course_notebooks, dump

BARE = """
import os, sys, nbformat
os.environ["NBGRADER_EXECUTION"] = "autograde"  # the same (shorter) runs the grader asks for
from nbclient import NotebookClient
class WidgetlessClient(NotebookClient):  # as autograder.worker.execute's: no widget stall
    def on_comm_open_jupyter_widget(self, msg):
        return None
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    WidgetlessClient(nb, timeout=600, kernel_name="python3",
                     resources={"metadata": {"path": "."}}).execute()
"""
DASK = Path(sys.executable).parent / "dask"
SPIN = "n = 0\nfor i in range(12_000_000):\n    n += i * i"  # about a second of one core
STUDENTS = 1000


def busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat; 0 elsewhere."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


LAST_BUSY = [0.0]  # core-seconds the machine was busy during the last `timed` command


def timed(cmd: list[str], cwd: Path) -> float:
    start, busy = time.perf_counter(), busy_seconds()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    LAST_BUSY[0] = busy_seconds() - busy
    return time.perf_counter() - start


def parallel_capacity(work: Path, tries: int = 3) -> float:
    """How many times the work of one CPU-bound process two of them do side by side (2.0 on two
    idle, independent cores; less where the cores are hyperthreads or the host is shared)."""
    gains = []
    for _ in range(tries):
        alone = timed([sys.executable, "-c", SPIN], work)
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", SPIN], cwd=work) for _ in range(2)]
        for proc in procs:
            proc.wait()
        gains.append(2 * alone / (time.perf_counter() - start))
    return sorted(gains)[len(gains) // 2]


def best_ratio(busy_cores: float, capacity: float) -> float:
    """The lowest --jobs 2 / --jobs 1 ratio two workers can reach on two cores, when one worker
    keeps busy_cores busy on average: it runs two processes at once for busy_cores - 1 of its
    time (at `capacity` times the speed of one), one process for the rest; two workers keep
    both cores busy all the time, at `capacity`."""
    both = min(max(busy_cores - 1.0, 0.0), 1.0)
    return ((1.0 - both) + both * capacity) / capacity


def make_class(folder: Path, notebooks: list[str], size: int) -> None:
    files = {nb: dump(correct(nb)) for nb in notebooks}
    for i in range(size):
        student = folder / f"student_{i + 1:02d}"
        student.mkdir(parents=True)
        for nb, content in files.items():
            (student / nb).write_bytes(content)


def proof_seconds(out: Path) -> float:
    """How long the run's proof on the master solutions took (0 when it was cached)."""
    log = (out / "grader.log").read_text(encoding="utf-8", errors="replace")
    return sum(float(m) for m in re.findall(r"proof: ([0-9.]+) s$", log, re.M))


def prove(notebooks: list[str], jail: list[str]) -> None:
    """The proof every `grade` run below then finds cached, timed on its own."""
    cmd = [sys.executable, "-m", "autograder", "prove", "--notebooks",
           ",".join(nb[:2] for nb in notebooks), *jail]  # fmt: skip
    print(f"proof on the master solutions (once per grader and environment): "
          f"{timed(cmd, ROOT):.1f} s")  # fmt: skip


def grade(submissions: Path, out: Path, options: list[str]) -> float:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out)]
    return timed([*cmd, "--quiet", *options], ROOT)


@contextmanager
def loopback_cluster(work: Path, workers: int) -> Iterator[str]:
    """`dask scheduler` and `dask worker` processes on 127.0.0.1; yields the address."""
    address_file = work / "scheduler.json"
    common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True}
    procs = [
        subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                          "--no-dashboard", "--scheduler-file", str(address_file)], **common)
    ]  # fmt: skip
    try:
        while not address_file.exists():
            time.sleep(0.2)
        for _ in range(workers):
            procs.append(subprocess.Popen(
                [str(DASK), "worker", "--scheduler-file", str(address_file), "--nthreads", "1",
                 "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"], **common))  # fmt: skip
        yield json.loads(address_file.read_text())["address"]
    finally:
        for proc in procs[::-1]:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)


def single(work: Path, notebooks: list[str], jail: list[str]) -> None:
    make_class(work / "single", notebooks, 1)
    (work / "run").mkdir()
    bare = timed(
        [sys.executable, "-c", BARE, *[str(SOLUTIONS / nb) for nb in notebooks]], work / "run"
    )
    graded = grade(work / "single", work / "out-single", ["--jobs", "1", *jail])
    print(f"(a) one submission: bare nbclient {bare:.1f} s, graded {graded:.1f} s, "
          f"ratio {graded / bare:.2f} (goal <= 1.0{'' if jail else ', jail on'})")  # fmt: skip


def klass(work: Path, notebooks: list[str], size: int, jail: list[str]) -> None:
    make_class(work / "class", notebooks, size)
    capacity = parallel_capacity(work)
    one = grade(work / "class", work / "out-j1", ["--jobs", "1", *jail])
    cpu_one = LAST_BUSY[0]
    two = grade(work / "class", work / "out-j2", ["--jobs", "2", *jail])
    cpu_two = LAST_BUSY[0]
    print(f"(b) class of {size}: --jobs 1 {one:.1f} s, --jobs 2 {two:.1f} s, "
          f"ratio {two / one:.2f} (goal <= 0.6 on 2 cores)")  # fmt: skip
    print(f"    --jobs 1 kept the machine busy {cpu_one:.0f} core-seconds: "
          f"{cpu_one / size:.0f} a student, {cpu_one / one:.2f} cores on average; "
          f"--jobs 2 {cpu_two:.0f} core-seconds, {cpu_two / two:.2f} cores")  # fmt: skip
    if os.cpu_count() == 2 and cpu_one:
        best = best_ratio(cpu_one / one, capacity)
        print(f"    two CPU-bound processes run {capacity:.2f} times as fast as one here, so "
              f"two workers can reach at best {best:.2f}")  # fmt: skip
    with loopback_cluster(work, 2) as address:
        time.sleep(5)  # the workers connect and load their runtimes
        dask = grade(work / "class", work / "out-dask", ["--scheduler", address, *jail])
    proved = proof_seconds(work / "out-dask")
    print(f"(c) class of {size} on `dask scheduler` + 2 `dask worker` (loopback): {dask:.1f} s, "
          f"of which the cluster's proof {proved:.1f} s; ratio to --jobs 1 without it "
          f"{(dask - proved) / one:.2f}")  # fmt: skip
    per_student = one / size  # seconds of one worker per student, start-up shared by the class
    core_seconds = cpu_one / size if cpu_one else per_student  # of the whole machine
    print(
        f"1,000 students x {len(notebooks)} notebooks: {per_student:.1f} s of one worker and "
        f"{core_seconds:.0f} core-seconds each = {STUDENTS * per_student / 3600:.1f} h on one "
        f"worker, {STUDENTS * core_seconds / 3600:.1f} core-hours in all "
        f"({STUDENTS * core_seconds / 3600 / 32:.2f} h on 32 cores, if they are kept as busy)"
    )


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--notebooks", default="", help="comma-separated numbers, e.g. 01,05 (default all)"
    )
    p.add_argument("--class-size", type=int, default=8)
    p.add_argument("--skip-class", action="store_true", help="only (a)")
    p.add_argument("--skip-single", action="store_true", help="only (b) and (c)")
    p.add_argument("--no-jail", action="store_true", help="grade without the jail (unsafe)")
    args = p.parse_args()
    notebooks = course_notebooks()
    if args.notebooks:
        wanted = {n.strip().zfill(2) for n in args.notebooks.split(",")}
        notebooks = [nb for nb in notebooks if nb[:2] in wanted]
    jail = ["--no-jail"] if args.no_jail else []
    print(f"notebooks: {', '.join(notebooks)}; jail {'off' if jail else 'on'}; "
          f"{os.cpu_count()} cores")  # fmt: skip
    prove(notebooks, jail)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        if not args.skip_single:
            single(Path(tmp), notebooks, jail)
        if not args.skip_class:
            klass(Path(tmp), notebooks, args.class_size, jail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
