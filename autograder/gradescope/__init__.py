"""`python -m autograder gradescope --notebooks 02 --out autograder.zip`: a Gradescope autograder.

build.py writes the zip (setup.sh, run_autograder, the grader, the chosen notebooks' masters,
a locked environment); run.py is what run_autograder runs for each submission: the same
`grade` as the command line, then results.py turns the grades into Gradescope's
results.json, whose shape schema.py states. The command prints what to set in Gradescope.

May import: every package of the grader, and `autograder.cli` (it runs `grade`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.gradescope.schema import VISIBILITIES

# A kernel and a probe side by side, each within this, and the grader: 3 GB on Gradescope.
# Every course notebook's solution grades within 768 MB.
MEMORY_MB = 1024
DESCRIPTION = """\
Build a Gradescope autograder (a zip to upload as a Programming Assignment's configuration).
Gradescope builds an image from it (setup.sh: Ubuntu 22.04, Python 3.11, the grader's locked
packages with PyTorch's CPU build) and grades each submission in its own container with the
same grader, checks and limits as `python -m autograder grade`."""


def parser() -> argparse.ArgumentParser:
    from autograder.model.settings import Limits

    d = Limits()
    p = argparse.ArgumentParser(
        prog="python -m autograder gradescope",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--notebooks", metavar="LIST", help="the notebooks graded, e.g. 02 or 01,02")
    which.add_argument("--assignment", metavar="FILE", type=Path, help="a file naming them")
    p.add_argument("--out", metavar="ZIP", type=Path, required=True, help="the zip to write")
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=d.timeout,
        help=f"wall budget per notebook (default {d.timeout:g}, as grade)",
    )
    p.add_argument(
        "--cell-timeout",
        metavar="SECONDS",
        type=float,
        default=d.cell_timeout,
        help=f"time limit per cell (default {d.cell_timeout:g})",
    )
    p.add_argument(
        "--memory-mb",
        metavar="MB",
        type=int,
        default=MEMORY_MB,
        help=f"memory bound of a kernel and of each probe (default {MEMORY_MB}, less than "
        f"grade's {d.memory_mb}: the container holds both and the grader)",
    )
    p.add_argument("--visibility", choices=VISIBILITIES, default="visible",
                   help="when students see each cell's result (default visible)")  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    from autograder.gradescope.build import LOCK, build
    from autograder.model.contract import CONTRACT
    from autograder.model.course import InputError, select_notebooks
    from autograder.model.settings import Limits

    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        if min(args.timeout, args.cell_timeout, args.memory_mb) <= 0:
            raise InputError("--timeout, --cell-timeout and --memory-mb must be positive")
        spec = args.notebooks or (args.assignment.read_text() if args.assignment else "")
        notebooks = list(select_notebooks(spec) if spec else CONTRACT)
        limits = Limits(timeout=args.timeout, cell_timeout=min(args.cell_timeout, args.timeout),
                        memory_mb=args.memory_mb)  # fmt: skip
        settings, locked = build(notebooks, args.out.resolve(), limits, args.visibility)
    except (InputError, OSError) as err:
        print(f"python -m autograder gradescope: error: {err}", file=sys.stderr)
        return 2
    for warning in locked.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    advice = settings["gradescope_settings"]
    count = "1 notebook" if len(notebooks) == 1 else f"{len(notebooks)} notebooks"
    print(f"gradescope: {args.out} ({count}: {', '.join(notebooks)}; "
          f"{len(locked.lines)} packages in {LOCK})")  # fmt: skip
    print("Upload it in Gradescope (Programming Assignment > Configure Autograder > Zip file) and")
    print(
        f"set in its Autograder Settings: base image {settings['image']}; memory at least "
        f"{advice['memory_mb'] / 1024:.1f} GB; timeout at least {advice['timeout_seconds']} s."
    )
    if advice["timeout_seconds"] > 2400:
        print("warning: Gradescope allows at most 40 minutes (2400 s): grade fewer notebooks "
              "per assignment or lower --timeout", file=sys.stderr)  # fmt: skip
    return 0
