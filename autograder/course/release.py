"""Regenerate the student notebooks (notebooks/) from the instructor sources (solutions/)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from autograder.model.contract import ASSIGNMENT
from autograder.model.paths import COURSE_DIR, NOTEBOOKS, SOLUTIONS


def _venv_on_path() -> None:
    """nbgrader runs `alembic` and `jupyter` by name: find them beside this interpreter."""
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def nbgrader_api(course_dir: Path):
    """An NbGraderAPI on `course_dir` with the course's settings (it ignores config files)."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    from autograder.course.nbgrader_settings import configure, configure_release

    _venv_on_path()

    config = configure_release(configure(Config()))
    config.CourseDirectory.root = str(course_dir)
    return NbGraderAPI(config=config)


def generate(course_dir: Path, solutions: Path = SOLUTIONS) -> Path:
    """Run nbgrader generate_assignment on a copy of `solutions`; return the release folder."""
    source = course_dir / "source" / ASSIGNMENT
    if source.exists():
        shutil.rmtree(source)
    source.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(solutions, source, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (course_dir / "exchange").mkdir(exist_ok=True)  # nbgrader's exchange, for the formgrader
    result = nbgrader_api(course_dir).generate_assignment(ASSIGNMENT, force=True)
    if not result["success"]:
        raise RuntimeError(
            f"nbgrader generate_assignment failed:\n{result['error']}\n{result['log']}"
        )
    return course_dir / "release" / ASSIGNMENT


def release_into(target: Path, course_dir: Path | None = None) -> list[Path]:
    """Write a fresh release of solutions/ into `target`; return the notebooks written."""
    with tempfile.TemporaryDirectory() as tmp:
        released = generate(course_dir or Path(tmp) / "course")
        target.mkdir(parents=True, exist_ok=True)
        for stale in target.glob("*.ipynb"):
            stale.unlink()
        written = []
        for nb in sorted(released.glob("*.ipynb")):
            written.append(Path(shutil.copy2(nb, target / nb.name)))
    return written


def ensure_course_dir(course_dir: Path = COURSE_DIR) -> Path:
    """nbgrader's course directory (.nbgrader/) with the assignment, for the formgrader."""
    if not (course_dir / "release" / ASSIGNMENT).is_dir():
        generate(course_dir)
    return course_dir


# JupyterLab settings of the course, for the instructor's lab and the students' alike: no
# "get notified about official Jupyter news?" prompt and no update check (often offline).
LAB_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}
}
LAB_OVERRIDES_FILE = "self-attention-course.json"


def write_lab_settings(prefix: Path = Path(sys.prefix)) -> Path:
    """Put LAB_OVERRIDES where JupyterLab in the environment `prefix` reads its defaults."""
    folder = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.d"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / LAB_OVERRIDES_FILE
    target.write_text(json.dumps(LAB_OVERRIDES, indent=2) + "\n", encoding="utf-8")
    return target


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder release`: its options, description and examples."""
    p.description = "Release the notebooks: notebooks/ and the course's .nbgrader/ from solutions/."
    p.epilog = """examples:
  python -m autograder release                     # notebooks/ from solutions/
  python -m autograder release --course-dir-only   # only .nbgrader/ and the lab's settings"""
    p.add_argument(
        "--course-dir-only",
        action="store_true",
        help="only make sure .nbgrader/ holds the assignment, and JupyterLab's course settings",
    )


def run(args: argparse.Namespace) -> int:
    """notebooks/ and .nbgrader/ from solutions/ (`--course-dir-only`: for the lab)."""
    if args.course_dir_only:
        from autograder.course.formgrade import course_dir

        write_lab_settings()
        print(f"course directory ready: {ensure_course_dir(course_dir())}")
        return 0
    from autograder.course import colab

    problem = colab.placeholder_problem(colab.settings())
    if problem:
        print(colab.loud(problem), file=sys.stderr)
    for path in release_into(NOTEBOOKS, course_dir=COURSE_DIR):
        print(f"released {path.relative_to(NOTEBOOKS.parent)}")
    return 0
