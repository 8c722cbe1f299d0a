"""`python -m autograder refresh OUT`: bring hand grading into the class's files.

After grading written answers (or replacing points, adding comments or extra credit) in
formgrader, this rewrites OUT/grades.csv, cells.csv, report.html and the feedback page of every
notebook graded by hand, from OUT alone: the scores include the hand-given points, and the
student's page shows them with the instructor's comment. The next `grade` run with the same OUT
and `export` do the same.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.model import options
from autograder.publish.outputs import Counts, NotGraded, refresh


def said(out: Path, counts: Counts) -> str:
    waiting = f"{counts.waiting} written answer{'s' if counts.waiting != 1 else ''}"
    return (
        f"{out}: grades.csv, cells.csv and report.html rewritten with the hand grading of "
        f"{counts.by_hand} notebook{'s' if counts.by_hand != 1 else ''}; {counts.pages} "
        f"feedback page{'s' if counts.pages != 1 else ''} changed; {waiting} still waiting"
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder refresh`: its options, description and examples."""
    p.description = (
        "Rewrite OUT's grades.csv, cells.csv, report and feedback pages with the hand grading "
        "saved in formgrader."
    )
    p.epilog = """examples:
  python -m autograder refresh out/    # after grading written answers in formgrader"""
    options.out_folder(p)


def run(args: argparse.Namespace) -> int:
    try:
        counts = refresh(args.out.resolve())
    except NotGraded as err:
        print(f"refresh: {err}", file=sys.stderr)
        return 2
    print(said(args.out, counts))
    return 0
