"""`run_autograder`'s side: grade the submission as `grade` does, write Gradescope's results.

    python -m autograder.gradescope.run [--root DIR]    grade ROOT/submission
    python -m autograder.gradescope.run --check         what setup.sh verifies: imports, jail

ROOT is Gradescope's /autograder unless `--root` or $AUTOGRADER_ROOT says otherwise (tests lay
the same folders out elsewhere). The submission is copied into a class of one student and
graded by `python -m autograder grade` itself, in this process (the same discovery, rebuild,
jailed kernel, probes and checks, with the limits of gradescope.json), then read back from its
trusted states and written to ROOT/results/results.json (results.py). Student code runs in the
grader's jail (bubblewrap) when this container allows user namespaces; where it does not, the
grading runs with `--no-jail`, the container itself as the only wall, and both results.json and
the log say so. Either way every process left behind by student code is killed before
results.json is written. The log (Gradescope's stdout, shown to instructors) names the
isolation, each notebook's status and score, and grader.log when something went wrong.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

from autograder.jail.jail import Jail, JailUnavailable
from autograder.model.enums import Status
from autograder.model.grades import NotebookGrade
from autograder.model.paths import ROOT as PACKAGE_ROOT
from autograder.model.settings import Limits

ROOT_ENV = "AUTOGRADER_ROOT"
DEFAULT_ROOT = Path("/autograder")
STUDENT = "student"  # the one student folder of the class graded here
PR_SET_CHILD_SUBREAPER = 36

JAILED = (
    "Student code ran in the grader's jail (bubblewrap: no network, no grader files, "
    "its own processes) inside this submission's own container."
)
CONTAINED = (
    "Student code ran in this submission's own container, without the grader's inner jail "
    "(this container does not allow it)."
)


class Layout:
    """Gradescope's folders under one root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.source = root / "source"
        self.submission = root / "submission"
        self.results = root / "results" / "results.json"


def isolation() -> tuple[bool, str]:
    """(whether the jail works here, the reason when it does not)."""
    try:
        Jail.from_settings()
    except JailUnavailable as err:
        return False, str(err)
    return True, ""


def _regular_or_folder(folder: str, names: list[str]) -> set[str]:
    """copytree's ignore: devices, pipes and sockets are not copied (links stay links)."""
    ignored = set()
    for name in names:
        mode = os.lstat(os.path.join(folder, name)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            ignored.add(name)
    return ignored


def grade_args(klass: Path, out: Path, config: dict, jail: bool) -> list[str]:
    """The `grade` command line for the class of one, with the zip's limits."""
    limits = config["limits"]
    args = [
        "grade", str(klass), "--out", str(out), "--jobs", "1", "--quiet",
        "--notebooks", ",".join(config["notebooks"]),
        "--timeout", str(limits["timeout"]), "--cell-timeout", str(limits["cell_timeout"]),
        "--memory-mb", str(limits["memory_mb"]),
    ]  # fmt: skip
    return args if jail else [*args, "--no-jail"]


def collected(klass: Path, out: Path, config: dict) -> list[NotebookGrade]:
    """The grades `grade` wrote into OUT, read back as it reads them for its class outputs."""
    from autograder.intake.discover import discover
    from autograder.model.course import load_masters
    from autograder.publish.outputs import collect
    from autograder.publish.state import StateStore
    from autograder.run.grade import Log, plan

    limits = Limits.from_json(config["limits"])
    masters = load_masters(notebooks=tuple(config["notebooks"]))
    subs = discover(klass, masters, limits, out)
    store = StateStore(out)
    log = Log(out)
    try:
        _, keys, _ = plan(subs, masters, store, log, limits.notebook_bytes)
    finally:
        log.close()
    return collect(subs, masters, store, keys)


def _become_subreaper() -> None:
    """Orphans of student code are re-parented to this process, so that `reap` finds them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        print("note: could not become a child subreaper; orphaned processes may survive")


def reap() -> list[str]:
    """Kill every process still running below this one (zombies are only collected); the
    command lines of those that were more than the grader's own resource tracker."""
    import psutil

    left = psutil.Process().children(recursive=True)
    names = []
    for proc in left:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                line = " ".join(proc.cmdline())[:160] or proc.name()
                if "multiprocessing.resource_tracker" not in line:
                    names.append(line)
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=5)
    return names


def write_results(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(results, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(partial, path)


def _log_tail(out: Path, lines: int = 200) -> str:
    try:
        text = (out / "grader.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no grader.log)"
    return "\n".join(text.splitlines()[-lines:])


def grade(layout: Layout, config: dict, started: float) -> tuple[dict, int]:
    """Grade the submission; (results.json, exit code)."""
    from autograder import cli
    from autograder.gradescope.results import failure, results

    if not layout.submission.is_dir():
        return failure(f"no submission folder at {layout.submission}", 0.0), 1
    jail, why = isolation()
    print("isolation:", "the grader's jail (bwrap)" if jail else f"the container only: {why}")
    work = Path(tempfile.mkdtemp(prefix="gradescope-"))
    try:
        klass, out = work / "class", work / "out"
        shutil.copytree(layout.submission, klass / STUDENT, symlinks=True,
                        ignore=_regular_or_folder)  # fmt: skip
        code = cli.main(grade_args(klass, out, config, jail))
        left = reap()
        if left:
            print(f"killed {len(left)} processes left running after grading:", *left, sep="\n  ")
        seconds = time.monotonic() - started
        if code != 0:
            print(f"grade exited with {code}; grader.log:\n{_log_tail(out)}")
            return failure(f"the grader stopped with exit code {code}", seconds), 1
        grades = collected(klass, out, config)
        for g in grades:
            print(f"{g.notebook}: {g.status} {g.score:g}/{g.max_score:g} {g.detail}".rstrip())
        if any(g.status == Status.ERROR for g in grades):
            print(f"grader.log:\n{_log_tail(out)}")
        words = JAILED if jail else CONTAINED
        return results(grades, seconds, words, config.get("visibility", "visible")), 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check(layout: Layout) -> int:
    """What setup.sh verifies once the environment is installed."""
    import torch

    from autograder import cli
    from autograder.worker.pipeline import Runtime  # noqa: F401  (the workers' imports load)

    print(f"python {sys.version.split()[0]}, torch {torch.__version__}")
    jail, why = isolation()
    print("jail: bwrap works here" if jail else f"jail: not available here ({why})")
    print("(Gradescope decides again for each submission's container.)")
    # The proof on the master solutions, made once into the image: submissions find it cached.
    config = json.loads((layout.source / "gradescope.json").read_text(encoding="utf-8"))
    args = [
        "prove",
        "--notebooks",
        ",".join(config["notebooks"]),
        "--memory-mb",
        str(config["limits"]["memory_mb"]),
    ]  # as grade_args will grade
    return cli.main(args if jail else [*args, "--no-jail"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autograder.gradescope.run")
    p.add_argument("--root", type=Path, help=f"instead of ${ROOT_ENV} or {DEFAULT_ROOT}")
    p.add_argument("--check", action="store_true", help="verify the environment; grade nothing")
    args = p.parse_args(argv)
    started = time.monotonic()
    layout = Layout((args.root or Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)).resolve())
    if PACKAGE_ROOT != layout.source.resolve():
        print(f"the grader was imported from {PACKAGE_ROOT}, not from {layout.source}")
        if not args.check:
            write_results(layout.results, _failure("the grader is not the autograder's own"))
        return 1
    data = layout.source / "data" / "tinyshakespeare.txt"
    if data.is_file():
        os.environ["TINYSHAKESPEARE"] = str(data)
    if args.check:
        return check(layout)
    _become_subreaper()
    try:
        config = json.loads((layout.source / "gradescope.json").read_text(encoding="utf-8"))
        results, code = grade(layout, config, started)
    except Exception as err:  # a grader bug: a results.json that says so, the details here
        import traceback

        traceback.print_exc(file=sys.stdout)
        results, code = _failure(f"an internal error, {type(err).__name__}"), 1
    reap()
    write_results(layout.results, results)
    return code


def _failure(why: str) -> dict:
    from autograder.gradescope.results import failure

    return failure(why, 0.0)


if __name__ == "__main__":
    sys.exit(main())
