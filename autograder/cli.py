"""`python -m autograder COMMAND`: grade, release, student-release, export, gradescope and more.

Also installed as the console script `autograder`. Each subcommand parses its own options
with argparse; bad input is one line on stderr and exit code 2; a grader bug is one line that
points at OUT/grader.log and exit code 1.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from autograder.intake.discover import class_root, extract_zip
from autograder.intake.intake import PatternError, parse_pattern
from autograder.jail.jail import Jail, JailUnavailable
from autograder.model.course import InputError, select_notebooks
from autograder.model.paths import ROOT
from autograder.model.settings import Limits, Settings, explain
from autograder.run import cluster

GRADE_HELP = """\
Autograde a class. SUBMISSIONS is a folder with one subfolder per student (the folder name
is the student id) holding any of the course's notebooks, or a .zip of such a folder; or a
platform's download read by --pattern (canvas, moodle, moodle-id, nbgrader, or a regular
expression with the named groups `student` and `file`; a preset is recognised by itself).
Writes OUT/grades.csv, cells.csv, diagnoses.csv, gradebook.db, report.html,
OUT/feedback/<student>/<notebook>.html and OUT/autograded/ (for the formgrader).
Run it again with the same OUT to resume. Student code runs in a jail (bubblewrap).
`--limits` prints every limit with its default and why."""


def _positive(kind: type) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _grade_options(p: argparse.ArgumentParser) -> None:
    d = Limits()
    p.add_argument(
        "submissions", metavar="SUBMISSIONS", type=Path, nargs="?", help="class folder or .zip"
    )
    p.add_argument("--out", metavar="OUT", type=Path, help="output folder (required)")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--jobs",
        metavar="N",
        type=_positive(int),
        default=1,
        help="grading worker processes on this machine (default 1)",
    )
    _cluster_options(p, where)
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_positive(float),
        default=d.timeout,
        help=f"wall budget per notebook: kernel, probes and page (default {d.timeout:g})",
    )
    p.add_argument(
        "--cell-timeout",
        metavar="SECONDS",
        type=_positive(float),
        default=d.cell_timeout,
        help=f"time limit per cell (default {d.cell_timeout:g})",
    )
    p.add_argument(
        "--memory-mb",
        metavar="MB",
        type=_positive(int),
        default=d.memory_mb,
        help=f"memory bound of each jail, all it holds (default {d.memory_mb})",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--notebooks", metavar="LIST", help="only these notebooks count, e.g. 01,02 (default: all)"
    )
    which.add_argument(
        "--assignment",
        metavar="FILE",
        type=Path,
        help="a file naming the notebooks that count (numbers or file names)",
    )
    p.add_argument(
        "--no-jail",
        action="store_true",
        help="run student code WITHOUT the jail, as your own user (unsafe; said so in the report)",
    )
    p.add_argument(
        "--pattern",
        metavar="PATTERN",
        help="how paths name students: canvas, moodle, moodle-id, nbgrader, or a regular "
        "expression with (?P<student>...) and (?P<file>...) matched against each .ipynb "
        "file's path below SUBMISSIONS (default: one folder per student)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument("--limits", action="store_true", help="print every limit and why; exit")


def _cluster_options(p: argparse.ArgumentParser, where: argparse._MutuallyExclusiveGroup) -> None:
    """--scheduler (in `where`, beside --jobs), its certificates (mutual TLS), and the flag
    that does without them."""
    where.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="grade on an existing Dask cluster, e.g. tls://10.0.0.5:8786 (mutual TLS: "
        "--tls-ca, --tls-cert, --tls-key or Dask's distributed.comm.tls configuration)",
    )
    for name, what in (("ca", "the cluster's CA certificate"),
                       ("cert", "this grader's certificate, signed by that CA"),
                       ("key", "its private key")):  # fmt: skip
        p.add_argument(f"--tls-{name}", metavar="FILE", type=Path, help=f"{what} (PEM)")
    p.add_argument(
        "--insecure-plain-tcp",
        action="store_true",
        help="accept a plain tcp:// scheduler that is not on this machine: anyone who can "
        "reach it can run code on its workers, outside the jail",
    )


def grade_settings(args: argparse.Namespace) -> tuple[Settings, list[str], dict]:
    """Settings from the options; the class .zip extracted (bounded) into OUT/.submissions."""
    sub, out = args.submissions, args.out
    if sub is None or out is None:
        raise InputError("SUBMISSIONS and --out OUT are required")
    if not sub.exists():
        raise InputError(f"{sub} does not exist")
    if sub.is_file() and sub.suffix.lower() != ".zip":
        raise InputError(f"{sub} is a file but not a .zip")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a folder")
    if sub.is_dir() and out.resolve() == sub.resolve():
        raise InputError("--out must not be the submissions folder itself")
    notebooks: tuple[str, ...] = ()
    if args.notebooks:
        notebooks = select_notebooks(args.notebooks)
    elif args.assignment:
        try:
            notebooks = select_notebooks(args.assignment.read_text())
        except OSError as err:
            raise InputError(f"--assignment {args.assignment}: {err.strerror}") from None
    limits = Limits(timeout=args.timeout, cell_timeout=min(args.cell_timeout, args.timeout),
                    memory_mb=args.memory_mb)  # fmt: skip
    out = out.resolve()
    folder, warnings, refused = sub.resolve(), [], {}
    if sub.is_file():
        extracted = out / ".submissions"
        shutil.rmtree(extracted, ignore_errors=True)
        extracted.mkdir(parents=True)
        warnings, refused = extract_zip(sub, extracted, limits)
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        folder = class_root(extracted)
    tls = None
    if args.scheduler:
        try:
            tls = cluster.check(args.scheduler, args.tls_ca, args.tls_cert, args.tls_key,
                                args.insecure_plain_tcp)  # fmt: skip
        except cluster.ClusterRefused as err:
            raise InputError(str(err)) from None
    elif args.tls_ca or args.tls_cert or args.tls_key:
        raise InputError("--tls-ca, --tls-cert and --tls-key go with --scheduler tls://...")
    settings = Settings(folder, out, args.jobs, args.scheduler, notebooks, not args.no_jail,
                        not args.quiet, limits, tls)  # fmt: skip
    return settings, warnings, refused


def check_jail(settings: Settings) -> None:
    """Refuse early, in one line, when the jail is asked for and cannot be had: bwrap
    missing, or unable to start a jail on this machine (`Jail.selftest`)."""
    if settings.jail and settings.scheduler is None:
        try:
            Jail.from_settings()
        except JailUnavailable as err:
            raise InputError(str(err)) from None


def grade_main(args: argparse.Namespace) -> int:
    if args.limits:
        print(explain())
        return 0
    out = args.out
    try:
        pattern = parse_pattern(args.pattern) if args.pattern else None
        settings, warnings, refused = grade_settings(args)
        check_jail(settings)
        from autograder.run.grade import run  # dask, nbconvert, torch: only for grade

        return run(settings, warnings, refused, pattern, str(args.submissions))
    except (InputError, PatternError) as err:
        print(f"python -m autograder grade: error: {err}", file=sys.stderr)
        return 2
    except Exception:  # a bug of the grader: the details go to the log, not the terminal
        log = out.resolve() / "grader.log" if out else None
        try:
            with open(log, "a", encoding="utf-8") as f:
                f.write(traceback.format_exc())
        except (OSError, TypeError):
            log = None
        where = f"; details in {log}" if log else ""
        print(f"python -m autograder grade: internal error{where}", file=sys.stderr)
        return 1
    finally:
        if args.submissions and args.submissions.is_file() and out:
            shutil.rmtree(out.resolve() / ".submissions", ignore_errors=True)


def _delegate(module: str, what: str) -> Callable[[list[str]], int]:
    """A subcommand served by `module.main(argv)`; a clean line when it is not installed."""

    def main(argv: list[str]) -> int:
        try:
            target = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
            print(f"python -m autograder {what}: not available in this version", file=sys.stderr)
            return 2
        return int(target.main(argv) or 0)

    return main


def examples_main(argv: list[str]) -> int:
    """The example class is a fixture beside the package (examples/build.py), not part of it."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from examples.build import main  # beside the package; nbgrader: only for examples

    return main(argv)


DELEGATED: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "release": (_delegate("autograder.course.release", "release"), "notebooks/ from solutions/"),
    "student-release": (_delegate("autograder.course.student_release", "student-release"),
                        "write the students' tree of the released notebooks"),
    "formgrade": (_delegate("autograder.course.formgrade", "formgrade"),
                  "point the formgrader at a graded class (OUT)"),
    "export": (_delegate("autograder.publish.export", "export"),
               "final grades with hand-graded points, for Canvas or Moodle"),
    "examples": (examples_main, "regenerate the example class in examples/submissions/"),
    "refresh": (_delegate("autograder.publish.refresh", "refresh"),
                "bring hand grading from formgrader into OUT's CSVs, report and feedback pages"),
    "badges": (_delegate("autograder.course.colab", "badges"),
               "rewrite the Colab badges and setup cells from pyproject.toml"),
    "prove": (_delegate("autograder.run.proof", "prove"),
              "grade the master solutions now, as `grade` does before its first student"),
    "gradescope": (_delegate("autograder.gradescope", "gradescope"),
                   "build a Gradescope autograder (autograder.zip) for the chosen notebooks"),
}  # fmt: skip


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.splitlines()[0])
    subs = p.add_subparsers(dest="command", metavar="COMMAND")
    grade = subs.add_parser("grade", help="autograde a class", description=GRADE_HELP,
                            formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    _grade_options(grade)
    for name, (_, text) in DELEGATED.items():
        sub = subs.add_parser(name, help=text, add_help=False)
        sub.add_argument("rest", nargs=argparse.REMAINDER)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:  # their own parsers see their own arguments
        return DELEGATED[argv[0]][0](argv[1:])
    p = parser()
    try:
        args = p.parse_args(argv)
    except SystemExit as exit_:  # argparse printed the usage and the reason
        return int(exit_.code or 0)
    if args.command is None:
        p.print_help()
        return 2
    return grade_main(args)
