"""Benchmark the grader (figures, not asserts).

    .venv/bin/python benchmarks/bench_grade.py [--notebooks 01,05] [--class-size 8] [--skip-class]

(a) seconds to autograde one full submission (the solutions, every notebook in solutions/ or
    the --notebooks subset) with `python -m autograder grade`, against executing the same
    solution notebooks bare with nbclient in one process; the ratio (goal <= 1.3).
(b) a class of --class-size submissions (copies of the solutions) graded with --jobs 1 and
    --jobs 2; the ratio.
Both sides are timed as whole subprocesses, interpreter start included, with
NBGRADER_EXECUTION=autograde (the notebooks' shorter training runs) on both sides. Set
$TINYSHAKESPEARE when the notebooks need the data set.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BARE = """
import os, sys, nbformat
os.environ["NBGRADER_EXECUTION"] = "autograde"  # the same (shorter) runs the grader asks for
from nbclient import NotebookClient
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": "."}}).execute()
"""


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def make_class(folder: Path, notebooks: list[str], size: int) -> None:
    from tests.corpus import hostile

    files = {nb: hostile.dump(hostile.correct(nb)) for nb in notebooks}
    for i in range(size):
        student = folder / f"student_{i + 1:02d}"
        student.mkdir(parents=True)
        for nb, content in files.items():
            (student / nb).write_bytes(content)


def grade(submissions: Path, out: Path, jobs: int, work: Path) -> float:
    if out.exists():
        shutil.rmtree(out)
    cmd = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(submissions),
        "--out",
        str(out),
        "--jobs",
        str(jobs),
        "--quiet",
    ]
    return timed(cmd, ROOT)


def main() -> int:
    from tests.corpus import hostile

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--notebooks", default="", help="comma-separated numbers, e.g. 01,05 (default all)"
    )
    p.add_argument("--class-size", type=int, default=8)
    p.add_argument("--skip-class", action="store_true", help="only (a)")
    p.add_argument("--skip-single", action="store_true", help="only (b)")
    args = p.parse_args()
    notebooks = hostile.course_notebooks()
    if args.notebooks:
        wanted = {n.strip().zfill(2) for n in args.notebooks.split(",")}
        notebooks = [nb for nb in notebooks if nb[:2] in wanted]
    print(f"notebooks: {', '.join(notebooks)}")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        if not args.skip_single:
            single = work / "single"
            make_class(single, notebooks, 1)
            solutions = [str(ROOT / "solutions" / nb) for nb in notebooks]
            (work / "run").mkdir()
            bare = timed([sys.executable, "-c", BARE, *solutions], work / "run")
            graded = grade(single, work / "out-single", 1, work)
            print(
                f"(a) bare nbclient: {bare:.1f} s   autograde one submission: {graded:.1f} s   "
                f"ratio {graded / bare:.2f} (goal <= 1.3)"
            )
        if not args.skip_class:
            klass = work / "class"
            make_class(klass, notebooks, args.class_size)
            one = grade(klass, work / "out-j1", 1, work)
            two = grade(klass, work / "out-j2", 2, work)
            print(
                f"(b) class of {args.class_size}: --jobs 1 {one:.1f} s   --jobs 2 {two:.1f} s   "
                f"ratio {two / one:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
