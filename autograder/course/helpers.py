"""Which course helpers (attention_course/) a student release may carry, and which it needs.

A helper module that holds a graded answer (a reference `Head`, a mask-then-softmax) gives
that answer away: it may ship only once that notebook is graded. `autograder.course.staging.REVEALS`
says which module holds which notebook's answers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from autograder.course import staging
from autograder.model.contract import CONTRACT, notebook_named
from autograder.model.notebook_io import python_source

PACKAGE = "attention_course"


def notebook_of(key: str) -> str:
    """'05', '5', '05_the_head' or '05_the_head.ipynb' -> '05_the_head.ipynb'."""
    notebook = notebook_named(key)
    if notebook is not None:
        return notebook
    raise ValueError(f"no course notebook is called {key!r} (try 01 ... {list(CONTRACT)[-1][:2]})")


def module_file(key: str) -> str:
    """'attention_course/x.py', 'attention_course.x', 'x' or 'x.py' -> 'x.py' (package-relative)."""
    text = str(key).strip().replace("\\", "/")
    text = text.removeprefix(f"{PACKAGE}/").removeprefix(f"{PACKAGE}.")
    if not text.endswith(".py"):
        text = text.replace(".", "/") + ".py"
    return text


def reveals() -> dict[str, str]:
    """Module file (package-relative) -> notebook file whose answers it holds."""
    return {module_file(m): notebook_of(nb) for m, nb in staging.REVEALS.items()}


def shippable(graded: Iterable[str], package: Path) -> set[str]:
    """Helper modules that may ship while only the notebooks in `graded` are graded."""
    graded = {notebook_of(g) for g in graded}
    table = reveals()
    candidates = {p.relative_to(package).as_posix() for p in package.rglob("*.py")}
    candidates = {m for m in candidates if "__pycache__" not in m}
    return {m for m in candidates if m not in table or table[m] in graded}


def _imports(tree: ast.AST, current: str) -> set[str]:
    """Dotted names of the attention_course modules (or names) a tree imports."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == PACKAGE}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the current module's package
                parts = current.split(".")[: -node.level]
                base = ".".join([*parts, base] if base else parts)
            if base.split(".")[0] == PACKAGE:
                found.add(base)
                found |= {f"{base}.{a.name}" for a in node.names}
    return found


def _files_of(dotted: str, package: Path) -> list[str]:
    """Package-relative files that importing `dotted` runs (parents' __init__ included)."""
    parts = dotted.split(".")[1:]
    files = ["__init__.py"]
    for i in range(1, len(parts) + 1):
        rel = "/".join(parts[:i])
        if (package / rel / "__init__.py").is_file():
            files.append(f"{rel}/__init__.py")
        elif (package / f"{rel}.py").is_file():
            files.append(f"{rel}.py")
            break
    return files


def needed(sources: Iterable[str], package: Path) -> set[str]:
    """Helper files that code importing from the sources needs, transitively."""
    todo = [(src, "__main__") for src in sources]
    seen: set[str] = set()
    while todo:
        src, current = todo.pop()
        try:
            tree = ast.parse(python_source(src))
        except SyntaxError:
            continue
        for dotted in _imports(tree, current):
            for rel in _files_of(dotted, package):
                if rel not in seen:
                    seen.add(rel)
                    module = ".".join([PACKAGE, *rel.removesuffix(".py").split("/")])
                    todo.append(((package / rel).read_text(encoding="utf-8"), module))
    return seen
