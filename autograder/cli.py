"""`python -m autograder COMMAND`: grade, limits, release, student-release, export and more.

One argparse parser with a subcommand per command (also installed as the console script
`autograder`). Each command's module exposes `add_arguments(parser)` (its options, a short
description and an epilog of examples) and `run(args) -> int`; `grade` and `limits` are here.
Options several commands share are defined once (`options.py`), limits are generated from
their fields (`settings.add_limit_options`). Bad input is one line on stderr and exit code 2;
a grader bug is one line that points at OUT/grader.log and exit code 1.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from autograder.intake.discover import class_root, extract_zip
from autograder.intake.intake import PatternError, parse_pattern
from autograder.jail.jail import Jail, JailUnavailable
from autograder.model import options
from autograder.model.course import InputError, select_notebooks
from autograder.model.paths import ROOT
from autograder.model.settings import Settings, add_limit_options, explain, limits_from_args
from autograder.run import cluster

PROG = "python -m autograder"
GRADE_HELP = """\
Autograde a class. SUBMISSIONS is a folder with one subfolder per student (the folder name
is the student id) holding any of the course's notebooks, or a .zip of such a folder; or a
platform's download read by --pattern (canvas, moodle, moodle-id, nbgrader, or a regular
expression with the named groups `student` and `file`; a preset is recognised by itself).
Writes OUT/grades.csv, cells.csv, diagnoses.csv, gradebook.db, report.html,
OUT/feedback/<student>/<notebook>.html and OUT/autograded/ (for the formgrader).
Run it again with the same OUT to resume. Student code runs in a jail (bubblewrap).
Every limit is an option below; `python -m autograder limits` explains them all."""
GRADE_EXAMPLES = """\
examples:
  python -m autograder grade examples/submissions --out out/
  python -m autograder grade class.zip --out out/ --jobs 4 --notebooks 01,02
  python -m autograder grade canvas-download/ --out out/ --pattern canvas
  python -m autograder grade class/ --out out/ --scheduler tls://10.0.0.5:8786 \\
      --tls-ca ca.pem --tls-cert grader.pem --tls-key grader-key.pem
  python -m autograder grade --limits     # every limit, its value and why"""


class Formatter(argparse.HelpFormatter):
    """Help text as written where it has line breaks (examples), wrapped where it has none."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class Parser(argparse.ArgumentParser):
    """Bad input is one line (what is wrong, and where the help is) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Limits(argparse.Action):
    """--limits: print every limit and exit, before the required arguments are checked."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        print(explain())
        parser.exit(0)


def grade_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder grade`: its options, description and examples."""
    p.description, p.epilog = GRADE_HELP, GRADE_EXAMPLES
    p.add_argument("submissions", metavar="SUBMISSIONS", type=Path, help="class folder or .zip")
    p.add_argument("--out", metavar="OUT", type=Path, required=True, help="output folder")
    where = p.add_mutually_exclusive_group()
    options.jobs(where)
    _cluster_options(p, where)
    which = p.add_mutually_exclusive_group()
    options.notebooks(which)
    options.assignment(which)
    options.no_jail(p)
    p.add_argument(
        "--pattern",
        metavar="PATTERN",
        help="how paths name students: canvas, moodle, moodle-id, nbgrader, or a regular "
        "expression with (?P<student>...) and (?P<file>...) matched against each .ipynb "
        "file's path below SUBMISSIONS (default: one folder per student)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument("--limits", nargs=0, action=_Limits, help="print every limit and why; exit")
    add_limit_options(p.add_argument_group("limits (python -m autograder limits explains them)"))


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
    limits = limits_from_args(args)
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


def grade_run(args: argparse.Namespace) -> int:
    out = args.out
    try:
        pattern = parse_pattern(args.pattern) if args.pattern else None
        settings, warnings, refused = grade_settings(args)
        check_jail(settings)
        from autograder.run.grade import run  # dask, nbconvert, torch: only for grade

        return run(settings, warnings, refused, pattern, str(args.submissions))
    except (InputError, PatternError) as err:
        print(f"{PROG} grade: error: {err}", file=sys.stderr)
        return 2
    except Exception:  # a bug of the grader: the details go to the log, not the terminal
        log = out.resolve() / "grader.log" if out else None
        try:
            with open(log, "a", encoding="utf-8") as f:
                f.write(traceback.format_exc())
        except (OSError, TypeError):
            log = None
        where = f"; details in {log}" if log else ""
        print(f"{PROG} grade: internal error{where}", file=sys.stderr)
        return 1
    finally:
        if args.submissions.is_file():
            shutil.rmtree(out.resolve() / ".submissions", ignore_errors=True)


def limits_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder limits`: no options."""
    p.description = (
        "Print every limit of the grader: its name, value and unit, and why it is what it is. "
        "The top-level ones are options of `grade` (--timeout, --zip-bytes, ...); the grouped "
        "ones (jail., reads., pages., proof., gradescope.) are fixed bounds."
    )
    p.epilog = """examples:
  python -m autograder limits
  python -m autograder limits | grep -A1 '^jail\\.'"""


def limits_run(args: argparse.Namespace) -> int:
    print(explain())
    return 0


class Command:
    """One subcommand: its one-line help and the module whose add_arguments/run serve it."""

    def __init__(self, help: str, module: str | None = None,
                 arguments: Callable[[argparse.ArgumentParser], None] | None = None,
                 run: Callable[[argparse.Namespace], int] | None = None) -> None:  # fmt: skip
        self.help, self.module, self._arguments, self._run = help, module, arguments, run

    def load(self) -> tuple[Callable[[argparse.ArgumentParser], None], Callable[..., int]]:
        if self.module is None:
            assert self._arguments is not None and self._run is not None
            return self._arguments, self._run
        if self.module.startswith("examples.") and str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))  # the example class lives beside the package
        target = importlib.import_module(self.module)  # only the command asked for is imported
        return target.add_arguments, target.run


COMMANDS: dict[str, Command] = {
    "grade": Command("autograde a class", arguments=grade_arguments, run=grade_run),
    "limits": Command("print every limit, its value and why", arguments=limits_arguments,
                      run=limits_run),
    "release": Command("notebooks/ from solutions/", "autograder.course.release"),
    "student-release": Command("write the students' tree of the released notebooks",
                               "autograder.course.student_release"),
    "formgrade": Command("point the formgrader at a graded class (OUT)",
                         "autograder.course.formgrade"),
    "export": Command("final grades with hand-graded points, for Canvas or Moodle",
                      "autograder.publish.export"),
    "examples": Command("regenerate the example class in examples/submissions/",
                        "examples.build"),
    "refresh": Command("bring hand grading from formgrader into OUT's CSVs, report and "
                       "feedback pages", "autograder.publish.refresh"),
    "badges": Command("rewrite the Colab badges and setup cells from pyproject.toml",
                      "autograder.course.colab"),
    "prove": Command("grade the master solutions now, as `grade` does before its first student",
                     "autograder.run.proof"),
    "gradescope": Command("build a Gradescope autograder (autograder.zip) for the chosen "
                          "notebooks", "autograder.gradescope.command"),
}  # fmt: skip
EXAMPLES = """\
examples:
  python -m autograder grade examples/submissions --out out/
  python -m autograder limits
  python -m autograder export out/ --format canvas
  python -m autograder COMMAND --help     # a command's options and examples"""


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line: every command's options (`only`: that command's alone, the others
    listed without loading their modules)."""
    p = Parser(
        prog=PROG,
        description="The course's grader and its tools: grade a class, hand grading, export, "
        "releases.",
        epilog=EXAMPLES,
        formatter_class=Formatter,
    )
    subs = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = subs.add_parser(name, help=command.help,
                              formatter_class=Formatter)  # fmt: skip
        if only is None or only == name:
            arguments, run = command.load()
            arguments(sub)
            sub.set_defaults(run=run)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = options.renamed(list(sys.argv[1:] if argv is None else argv))
    named = next((a for a in argv if not a.startswith("-")), None)
    p = parser(named if named in COMMANDS else "")  # "": no command's module loaded
    try:
        args = p.parse_args(argv)
    except SystemExit as exit_:  # argparse printed the usage and the reason (or the help)
        return int(exit_.code or 0)
    if args.command is None:
        p.print_help()
        return 2
    return int(args.run(args) or 0)
