"""`python -m autograder grade SUBMISSIONS --out OUT [--jobs N] [--timeout SECONDS]`."""

from __future__ import annotations

import argparse
import shutil
import sys
import zipfile
from pathlib import Path, PurePosixPath

from autograder.grade import InputError, Options, run

ZIP_LIMIT = 4 * 2**30  # bytes a class zip may expand to

DESCRIPTION = """\
Autograde a class. SUBMISSIONS is a folder with one subfolder per student (the folder name
is the student id) holding any of the course's notebooks, or a .zip of such a folder.
Writes OUT/grades.csv, cells.csv, diagnoses.csv, gradebook.db, report.html and
OUT/feedback/<student>/<notebook>.html. Run it again with the same OUT to resume."""


def _positive(kind: type) -> object:
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autograder grade",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("submissions", metavar="SUBMISSIONS", type=Path, help="class folder or .zip")
    p.add_argument("--out", metavar="OUT", type=Path, required=True, help="output folder")
    p.add_argument(
        "--jobs",
        metavar="N",
        type=_positive(int),
        default=1,
        help="students graded in parallel (default 1)",
    )
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_positive(float),
        default=300.0,
        help="time limit per notebook (default 300)",
    )
    p.add_argument(
        "--cell-timeout",
        metavar="SECONDS",
        type=_positive(float),
        default=120.0,
        help="time limit per cell, in the kernel and in the sandbox (default 120)",
    )
    p.add_argument(
        "--memory-mb",
        metavar="MB",
        type=_positive(int),
        default=4096,
        help="memory bound of a notebook's kernel and of each sandbox (default 4096)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:  # argparse printed the usage and the reason
        return int(exit_.code or 0)
    try:
        sub = args.submissions
        if not sub.exists():
            raise InputError(f"{sub} does not exist")
        if sub.is_file() and sub.suffix.lower() != ".zip":
            raise InputError(f"{sub} is a file but not a .zip")
        if args.out.exists() and not args.out.is_dir():
            raise InputError(f"--out {args.out} exists and is not a folder")
        if sub.is_dir() and args.out.resolve() == sub.resolve():
            raise InputError("--out must not be the submissions folder itself")
        out = args.out.resolve()
        warnings: list[str] = []
        folder = sub.resolve()
        if sub.is_file():
            extracted = out / ".submissions"
            shutil.rmtree(extracted, ignore_errors=True)
            extracted.mkdir(parents=True)
            warnings = extract_zip(sub, extracted)
            for warning in warnings:
                print(f"warning: {warning}", file=sys.stderr)
            folder = class_root(extracted)
        options = Options(
            submissions=folder,
            out=out,
            jobs=args.jobs,
            timeout=args.timeout,
            cell_timeout=min(args.cell_timeout, args.timeout),
            memory_mb=args.memory_mb,
            progress=not args.quiet,
        )
        return run(options, warnings)
    except InputError as err:
        print(f"python -m autograder grade: error: {err}", file=sys.stderr)
        return 2
    except Exception:  # a bug of the grader: the details go to the log, not the terminal
        import traceback

        log = args.out.resolve() / "grader.log"
        try:
            with open(log, "a", encoding="utf-8") as f:
                f.write(traceback.format_exc())
        except OSError:
            log = None
        where = f"; details in {log}" if log else ""
        print(f"python -m autograder grade: internal error{where}", file=sys.stderr)
        return 1
    finally:
        if args.submissions.is_file():
            shutil.rmtree(args.out.resolve() / ".submissions", ignore_errors=True)


def extract_zip(archive: Path, dest: Path) -> list[str]:
    """Extract `archive` into `dest` without leaving it; return warnings on skipped members."""
    warnings = []
    total = 0
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        raise InputError(f"{archive} is not a readable zip file ({err})") from None
    root = dest.resolve()
    with zf:
        for info in zf.infolist():
            name = info.filename.replace("\\", "/")
            parts = PurePosixPath(name).parts
            link = (info.external_attr >> 16) & 0o170000 == 0o120000
            target = dest.joinpath(*parts) if parts else dest
            unsafe = (
                name.startswith("/")
                or ".." in parts
                or (parts and ":" in parts[0])
                or link
                or not target.resolve().is_relative_to(root)
            )
            if unsafe:
                warnings.append(f"skipped unsafe path in the zip: {info.filename!r}")
                continue
            if info.is_dir() or not parts:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zf.open(info) as src, open(target, "wb") as out:
                    while chunk := src.read(1 << 20):
                        total += len(chunk)
                        if total > ZIP_LIMIT:
                            raise InputError(
                                f"{archive} expands to more than {ZIP_LIMIT >> 30} GiB"
                            )
                        out.write(chunk)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as err:
                warnings.append(f"skipped unreadable member {info.filename!r} ({err})")
                target.unlink(missing_ok=True)
    return warnings


def class_root(folder: Path) -> Path:
    """The class folder inside an extracted zip: descend through lone wrapper folders."""
    while True:
        kids = [k for k in folder.iterdir() if not k.name.startswith(".") and k.name != "__MACOSX"]
        if len(kids) != 1 or not kids[0].is_dir() or any(kids[0].glob("*.ipynb")):
            return folder
        if not any(k.is_dir() for k in kids[0].iterdir()):
            return folder
        folder = kids[0]
