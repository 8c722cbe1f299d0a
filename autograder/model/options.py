"""The command line's shared words, defined once: an option that several commands take has
one name, one metavar and one meaning in all of them (`cli.py` builds the commands).

Limits are options too, generated from their fields (`settings.add_limit_options`). Old
spellings stay accepted but hidden from `--help` (`RENAMED`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from autograder.model.settings import positive

# old spelling -> the name now used everywhere (accepted, not shown in --help)
RENAMED = {"--assignments": "--notebooks"}


def notebooks(p: argparse.ArgumentParser | argparse._ActionsContainer, *, required: bool = False,
              what: str = "only these notebooks count") -> None:  # fmt: skip
    """--notebooks LIST: notebooks by number or file name, comma-separated."""
    default = "" if required else " (default: all)"
    p.add_argument(
        "--notebooks", metavar="LIST", required=required, help=f"{what}, e.g. 01,02{default}"
    )


def assignment(p: argparse.ArgumentParser | argparse._ActionsContainer) -> None:
    """--assignment FILE: the notebooks, one a line, in a file (instead of --notebooks)."""
    p.add_argument(
        "--assignment",
        metavar="FILE",
        type=Path,
        help="a file naming the notebooks (numbers or file names), instead of --notebooks",
    )


def jobs(p: argparse.ArgumentParser | argparse._ActionsContainer) -> None:
    p.add_argument(
        "--jobs",
        metavar="N",
        type=positive(int),
        default=1,
        help="grading worker processes on this machine (default 1)",
    )


def no_jail(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-jail",
        action="store_true",
        help="run student code WITHOUT the jail, as your own user (unsafe; said so in the report)",
    )


def out_folder(p: argparse.ArgumentParser) -> None:
    """OUT: a graded class, the folder `grade --out` wrote."""
    p.add_argument("out", metavar="OUT", type=Path, help="the graded class: grade's --out folder")


def allow_placeholder(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--allow-placeholder",
        action="store_true",
        help=f"{what} although [tool.course] repository is the placeholder (a trial)",
    )


def renamed(argv: list[str]) -> list[str]:
    """`argv` with the old spellings of options in their current names."""
    out = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        out.append(RENAMED[name] + eq + value if name in RENAMED else arg)
    return out
