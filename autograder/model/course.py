"""The course model: the masters (the instructor's source notebooks the grader grades against),
the version of the grading code they are keyed with, and the notebooks a run is asked for.

`grader_hash` digests the grading path only (GRADING_PATH: the modules whose code can change a
grade, a feedback page or a saved state, and every template): editing what only writes files
from saved grades (the CSVs, the report, the gradebook, the exports) or releases the course
does not regrade a class; editing a template does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from nbformat import NotebookNode

from autograder.course import staging
from autograder.model.contract import CONTRACT, notebook_named, test_cell_id
from autograder.model.notebook_io import (
    answer_cells,
    grade_id,
    is_test,
    nbgrader_meta,
    read,
)
from autograder.model.notebook_io import setup_sources as _setup_sources
from autograder.model.paths import SOLUTIONS
from autograder.worker.context import Context
from autograder.worker.rebuild import release_stubs

_PKG = Path(__file__).resolve().parents[1]
# What grader_hash digests, below autograder/: whole folders, or single modules.
GRADING_PATH = (
    "model", "intake", "worker", "jail", "checks", "probe", "run", "templates",
    "publish/feedback.py", "publish/alt_text.py", "publish/sanitise.py", "publish/state.py",
    "publish/outdir.py",
    "course/staging.py", "course/stubs.py", "course/nbgrader_settings.py",
)  # fmt: skip


class InputError(Exception):
    """Bad command-line input: reported as one line, exit code 2."""


# ---- masters ------------------------------------------------------------------------------


@dataclass
class Master:
    """A trusted source notebook of the course and what the grader needs from it."""

    notebook: str
    path: Path
    key: str  # changes when the master or the grading code changes

    @cached_property
    def nb(self) -> NotebookNode:
        return read(self.path)

    @cached_property
    def stubs(self) -> dict[str, str]:
        return release_stubs(self.nb)

    @cached_property
    def setup(self) -> list[str]:
        return _setup_sources(self.nb)

    @cached_property
    def code_answers(self) -> list[str]:
        return [g for g, c in answer_cells(self.nb).items() if c.cell_type == "code"]

    @cached_property
    def context(self) -> Context:
        """The master's cells analysed for the names an answer reads from above them."""
        hidden = [staging.module_name(m) for m in staging.probe_hidden_helpers(self.notebook)]
        return Context(self.nb, hidden)

    @cached_property
    def graded(self) -> dict[str, float]:
        """Autograded answer cells -> points of their test cell, in notebook order."""
        points = {
            gid: float(nbgrader_meta(c).get("points", 0))
            for c in self.nb.cells
            if is_test(c) and (gid := grade_id(c))
        }
        return {g: points[test_cell_id(g)] for g in self.code_answers if test_cell_id(g) in points}

    @cached_property
    def manual(self) -> dict[str, float]:
        """Manually graded answer cells (written answers) -> their points."""
        return {
            gid: float(nbgrader_meta(c).get("points", 0))
            for gid, c in answer_cells(self.nb).items()
            if nbgrader_meta(c).get("grade") and gid not in self.graded
        }

    @property
    def spec_module(self) -> str:
        return f"autograder.checks.nb{self.notebook[:2]}"

    @property
    def max_score(self) -> float:
        return round(sum(self.graded.values()) + sum(self.manual.values()), 6)


def grading_files(package: Path = _PKG) -> list[Path]:
    """The files of GRADING_PATH below `package`: the modules, and every file of templates/."""
    found = set()
    for rel in GRADING_PATH:
        path = package / rel
        if path.is_dir():
            pattern = "*" if rel == "templates" else "*.py"
            found |= {
                p for p in path.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts
            }
        elif path.is_file():
            found.add(path)
    return sorted(found)


def grader_hash(package: Path = _PKG) -> str:
    """Digest of the grading path's code and templates: a change there regrades instead of
    resuming (and proves the masters again)."""
    h = hashlib.sha256()
    for path in grading_files(package):
        h.update(str(path.relative_to(package)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def load_masters(
    solutions: Path | None = None, notebooks: tuple[str, ...] = ()
) -> dict[str, Master]:
    """Contract notebooks whose master exists in solutions/ (only `notebooks`, when given)."""
    folder = solutions or SOLUTIONS
    code = grader_hash()
    masters = {}
    for notebook in CONTRACT:
        path = folder / notebook
        if path.is_file() and (not notebooks or notebook in notebooks):
            key = hashlib.sha256(path.read_bytes() + code.encode()).hexdigest()
            masters[notebook] = Master(notebook, path, key)
    return masters


def select_notebooks(spec: str) -> tuple[str, ...]:
    """Course notebooks named by `spec`: numbers or file names, separated by commas or spaces.

    An assignment file holds the same, one or more per line; `#` starts a comment.
    """
    lines = [line.split("#", 1)[0] for line in spec.splitlines()]
    words = [w for line in lines for w in line.replace(",", " ").split()]
    chosen = []
    for word in words:
        hit = notebook_named(word)
        if hit is None:
            first = next(iter(CONTRACT))
            raise InputError(f"{word!r} is not a course notebook (expected e.g. 01 or {first})")
        chosen += [hit] if hit not in chosen else []
    if not chosen:
        raise InputError("no notebooks selected")
    return tuple(nb for nb in CONTRACT if nb in chosen)
