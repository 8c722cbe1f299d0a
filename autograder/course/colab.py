"""Colab links from one setting: `[tool.course]` in pyproject.toml.

`repository` is the GitHub address (owner/name) of the *student release*, the repository that
`python -m autograder student-release` writes (never the instructor's own). The "Open in
Colab" badge of every notebook and the setup cell's Colab branch (pip-install the course
helpers from that repository and branch) are derived from it: `python -m autograder badges`
rewrites both in solutions/*.ipynb (`--check` only reports), and the student release rewrites
its own copies. While `repository` is the placeholder, both refuse with the fix in one line.

The setup cell is also read statically: `colab_install(src)` returns the pip command it runs
in Colab, so tests can prove that it installs only the course helpers, with --no-deps.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.model import options
from autograder.model.notebook_io import is_setup, python_source, source
from autograder.model.paths import ROOT, SOLUTIONS

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
_BADGE = re.compile(
    r"\[!\[Open In Colab\]\(https://colab\.research\.google\.com/assets/colab-badge\.svg\)\]"
    r"\((?P<url>[^)\s]*)\)"
)
# The address shipped with the course: no student release lives there.
PLACEHOLDER = "selfattention-course/self-attention"


@dataclass(frozen=True)
class CourseRepo:
    """`repository` is "owner/name" on GitHub; `branch` the branch students open."""

    repository: str
    branch: str = "main"

    @property
    def github(self) -> str:
        return f"https://github.com/{self.repository}"

    def badge_url(self, notebook: str) -> str:
        return (
            f"https://colab.research.google.com/github/{self.repository}/blob/{self.branch}"
            f"/notebooks/{notebook}"
        )

    def badge(self, notebook: str) -> str:
        """The badge's Markdown: an image linking to the notebook in Colab."""
        return f"[![Open In Colab]({BADGE_IMAGE})]({self.badge_url(notebook)})"

    @property
    def pip_url(self) -> str:
        """What the setup cell hands to pip in Colab: the helpers at the students' branch."""
        return f"git+{self.github}@{self.branch}"

    @property
    def is_placeholder(self) -> bool:
        return self.repository.lower() == PLACEHOLDER


class PlaceholderRepository(ValueError):
    """`[tool.course] repository` was never set to the student release's address."""


def placeholder_problem(repo: CourseRepo) -> str:
    """One line saying what is wrong and how to fix it ("" when the address is set)."""
    if not repo.is_placeholder:
        return ""
    return (
        f"[tool.course] repository in pyproject.toml is still the placeholder {PLACEHOLDER!r}: "
        "set it to the GitHub owner/name of your student release (README, Instructors), "
        "then run `make badges`"
    )


def loud(message: str) -> str:
    """A warning that stands out in a terminal full of log lines."""
    bar = "!" * min(100, len(message) + 4)
    return f"{bar}\n! {message}\n{bar}"


def settings(pyproject: Path = ROOT / "pyproject.toml") -> CourseRepo:
    """The `[tool.course]` table of pyproject.toml."""
    table = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["course"]
    repository = str(table["repository"]).strip("/")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repository):
        raise ValueError(f"[tool.course] repository must be 'owner/name', got {repository!r}")
    return CourseRepo(repository, str(table.get("branch", "main")))


def badge_urls(markdown: str) -> list[str]:
    """Targets of every Colab badge in a Markdown text."""
    return [m.group("url") for m in _BADGE.finditer(markdown)]


# --- reading the setup cell -----------------------------------------------------------------


def _is_colab_test(node: ast.expr) -> bool:
    """`"google.colab" in sys.modules`, the one Colab test the course uses."""
    return (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Constant)
        and node.left.value == "google.colab"
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.In)
        and ast.unparse(node.comparators[0]) == "sys.modules"
    )


def _strings(body: list[ast.stmt], known: dict[str, str] | None = None) -> dict[str, str]:
    """Names bound to strings (constants, f-strings over earlier names) by assignments."""
    found: dict[str, str] = dict(known or {})
    for stmt in body:
        if not isinstance(stmt, ast.Assign):
            continue
        try:
            value = _evaluate(stmt.value, found)
        except ValueError:
            continue
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                found[target.id] = value
    return found


def _evaluate(node: ast.expr, names: dict[str, str]) -> str:
    """A command-line word: a string, an f-string over known names, or sys.executable."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if ast.unparse(node) == "sys.executable":
        return "python"
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                parts.append(_evaluate(value.value, names))
            else:
                parts.append(_evaluate(value, names))
        return "".join(parts)
    raise ValueError(f"cannot read {ast.unparse(node)!r} statically")


def _commands(tree: ast.AST, names: dict[str, str]) -> list[tuple[ast.Call, list[str]]]:
    """Subprocess calls and shell escapes (!pip, %pip) in `tree`, with their argument lists."""
    commands = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = ast.unparse(node.func)
        first = node.args[0]
        if func.startswith("subprocess.") and isinstance(first, ast.List | ast.Tuple):
            commands.append((node, [_evaluate(arg, names) for arg in first.elts]))
        elif func.endswith(("run_line_magic", "system")):  # %pip ... and !pip ...
            words = [_evaluate(arg, names) for arg in node.args]
            commands.append((node, " ".join(words).split()))
    return commands


@dataclass(frozen=True)
class ColabInstall:
    """What a setup cell runs: commands inside the Colab branch and outside it."""

    in_colab: list[list[str]]
    everywhere: list[list[str]]
    has_colab_branch: bool


def colab_install(setup_src: str) -> ColabInstall:
    """Read a setup cell: the commands it runs under `if "google.colab" in sys.modules:`."""
    tree = ast.parse(python_source(setup_src))
    branches = [n for n in ast.walk(tree) if isinstance(n, ast.If) and _is_colab_test(n.test)]
    inside = {id(n) for b in branches for stmt in b.body for n in ast.walk(stmt)}
    names = _strings([s for b in branches for s in b.body], _strings(tree.body))
    commands = _commands(tree, names)
    return ColabInstall(
        in_colab=[cmd for node, cmd in commands if id(node) in inside],
        everywhere=[cmd for node, cmd in commands if id(node) not in inside],
        has_colab_branch=bool(branches),
    )


def pip_packages(command: list[str]) -> tuple[list[str], list[str]] | None:
    """(options, packages) of a `pip install` command, None for anything else."""
    if "pip" not in command or "install" not in command:
        return None
    words = command[command.index("install") + 1 :]
    return [w for w in words if w.startswith("-")], [w for w in words if not w.startswith("-")]


# --- rewriting the notebooks ----------------------------------------------------------------


def rewrite_markdown(src: str, notebook: str, repo: CourseRepo) -> str:
    """Point every Colab badge at `notebook`; add one under the title when there is none."""
    if _BADGE.search(src):
        return _BADGE.sub(lambda _: repo.badge(notebook), src)
    lines = src.split("\n")
    return "\n".join([lines[0], "", repo.badge(notebook), *lines[1:]])


def colab_block(repo: CourseRepo) -> str:
    """The setup cell's Colab branch: install the helpers, or stop with one line and the fix."""
    return _COLAB_BLOCK.replace("@@REPO@@", repo.github).replace("@@BRANCH@@", repo.branch)


_COLAB_BLOCK = """\
if "google.colab" in sys.modules:
    # Colab has torch, numpy, matplotlib and ipywidgets: install only the course helpers.
    import os
    import subprocess

    COURSE_REPO = "@@REPO@@"
    HELPERS = f"git+{COURSE_REPO}@@@BRANCH@@"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-color", HELPERS],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    if pip.returncode != 0:

        class SetupFailed(Exception):
            def _render_traceback_(self):  # Jupyter shows this one line, not a traceback
                return [str(self)]

        reason = (pip.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise SetupFailed(
            f"Could not install the course helpers from {COURSE_REPO} ({reason}). Fix: check "
            "that this runtime is online, then Runtime > Restart session and run this cell "
            "again; if it keeps failing, tell your instructor the course address does not answer."
        )"""


def _colab_branch(src: str) -> ast.If | None:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    return next((n for n in tree.body if isinstance(n, ast.If) and _is_colab_test(n.test)), None)


def rewrite_setup(src: str, repo: CourseRepo) -> str:
    """Replace the setup cell's `if "google.colab" in sys.modules:` block by `colab_block`."""
    branch = _colab_branch(src)
    if branch is None or branch.end_lineno is None:
        return src
    lines = src.split("\n")
    start, end = branch.lineno - 1, branch.end_lineno
    return "\n".join([*lines[:start], *colab_block(repo).split("\n"), *lines[end:]])


def rewrite_cells(nb: nbformat.NotebookNode, notebook: str, repo: CourseRepo) -> bool:
    """Rewrite badge and setup cells of `nb` in place; return whether anything changed."""
    changed = False
    markdown = [c for c in nb.cells if c.cell_type == "markdown"]
    with_badge = [c for c in markdown if _BADGE.search(source(c))] or markdown[:1]
    for cell in with_badge:
        new = rewrite_markdown(source(cell), notebook, repo)
        changed |= new != source(cell)
        cell.source = new
    setups = [c for c in nb.cells if is_setup(c)]
    if setups and _colab_branch(python_source(source(setups[0]))) is None:
        raise ValueError(
            f'{notebook}: the first setup cell has no `if "google.colab" in sys.modules:` block '
            "to install the course helpers in Colab"
        )
    for cell in setups:
        new = rewrite_setup(source(cell), repo)
        changed |= new != source(cell)
        cell.source = new
        for command in colab_install(new).in_colab:
            parsed = pip_packages(command)
            if parsed and parsed[1] != [repo.pip_url]:
                raise ValueError(f"{notebook}: the setup cell installs {parsed[1]} in Colab")
    return changed


def rewrite_notebook(path: Path, repo: CourseRepo, write: bool = True) -> bool:
    """Rewrite badge and setup cells of one notebook file; return whether anything changed."""
    nb = nbformat.read(str(path), as_version=4)
    changed = rewrite_cells(nb, path.name, repo)
    if changed and write:
        nbformat.write(nb, str(path))
    return changed


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder badges` (`make badges`): its options, description and examples."""
    p.description = (
        "Point the Colab badges and setup cells of solutions/ at pyproject.toml's [tool.course] "
        "repository."
    )
    p.epilog = """examples:
  python -m autograder badges           # rewrite the notebooks that are out of date
  python -m autograder badges --check   # only name them (exit 1 when there are any)"""
    p.add_argument("--check", action="store_true", help="only report notebooks out of date")
    options.allow_placeholder(p, "rewrite the notebooks")


def run(args: argparse.Namespace) -> int:
    repo = settings()
    problem = placeholder_problem(repo)
    if problem and not args.allow_placeholder:
        print(loud(problem), file=sys.stderr)
        return 2
    stale = []
    for path in sorted(SOLUTIONS.glob("*.ipynb")):
        if rewrite_notebook(path, repo, write=not args.check):
            stale.append(path)
            print(f"{'out of date' if args.check else 'rewrote'}: {path.relative_to(ROOT)}")
    if args.check and stale:
        print("run `make badges` (then `make release`) to update them", file=sys.stderr)
        return 1
    return 0
