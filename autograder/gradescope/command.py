"""`python -m autograder gradescope`: its options (add_arguments) and what it does (run)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.gradescope.schema import VISIBILITIES
from autograder.model import options
from autograder.model.settings import LIMITS, add_limit_options, limits_from_args

DESCRIPTION = """\
Build a Gradescope autograder (a zip to upload as a Programming Assignment's configuration).
Gradescope builds an image from it (setup.sh: Ubuntu 22.04, Python 3.11, the grader's locked
packages with PyTorch's CPU build) and grades each submission in its own container with the
same grader, checks and limits as `python -m autograder grade`."""
EXAMPLES = """\
examples:
  python -m autograder gradescope --notebooks 02 --out build/autograder.zip
  python -m autograder gradescope --notebooks 01,02 --out a.zip --visibility hidden
  python -m autograder gradescope --assignment week1.txt --out a.zip --memory-mb 1536"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder gradescope`: its options, description and examples."""
    p.description, p.epilog = DESCRIPTION, EXAMPLES
    which = p.add_mutually_exclusive_group()
    options.notebooks(which, what="the notebooks graded")
    options.assignment(which)
    p.add_argument("--out", metavar="ZIP", type=Path, required=True, help="the zip to write")
    # a kernel and a probe side by side, and the grader, within Gradescope's 3 GB
    add_limit_options(p, ("timeout", "cell_timeout", "memory_mb"),
                      {"memory_mb": LIMITS.gradescope.memory_mb})  # fmt: skip
    p.add_argument("--visibility", choices=VISIBILITIES, default="visible",
                   help="when students see each cell's result (default visible)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from autograder.gradescope.build import LOCK, build
    from autograder.model.contract import CONTRACT  # the grader's modules: only when building
    from autograder.model.course import InputError, select_notebooks

    try:
        spec = args.notebooks or (args.assignment.read_text() if args.assignment else "")
        notebooks = list(select_notebooks(spec) if spec else CONTRACT)
        limits = limits_from_args(args)
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
