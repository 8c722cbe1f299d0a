"""Is a graded name defined in its answer cell, or imported from somewhere else?

An answer that imports its graded names (from the course helpers, the grader, any module)
instead of defining them earns nothing for that cell, and so does one that imports a helper
holding earlier answers that its notebook's setup does not hand out (`revealing_imports`).
Two witnesses of an imported name, either one enough:

- `static_imports` (here, on the grader's side, from the source alone): graded names bound by
  an import statement of the cell, or assigned from an attribute of an imported module
  (`Head = helpers.Head`, `N_PARAMS = course.reference.N_PARAMS`);
- the child's runtime record (`ProbeOutcome.imported`, see `probe.child.origins`): functions
  whose code lives in a module file, classes made in a module or inheriting all their
  methods from one.

`screen` turns either into the observed marker `{"!imported": [names]}`, which the spec
scores 0 with the catalog id `imported-answer`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

MARKER = "!imported"


def _parse(source: str) -> ast.Module | None:
    from autograder.notebook_io import python_source

    try:
        return ast.parse(python_source(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _imported_modules(trees: Iterable[ast.Module]) -> set[str]:
    """Names that import statements bind (modules, or anything imported)."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names |= {a.asname or a.name for a in node.names if a.name != "*"}
    return names


def _root(node: ast.AST) -> str | None:
    """The name at the root of an attribute chain `a.b.c` (None for anything else)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for elt in node.elts for n in _targets(elt)]
    return []


def static_imports(source: str, names: Iterable[str], setup: Iterable[str] = ()) -> list[str]:
    """Graded `names` that the answer cell imports, or assigns from an imported module's
    attribute (a module imported by the cell or by the notebook's setup cells)."""
    graded = set(names)
    tree = _parse(source)
    if tree is None or not graded:
        return []
    setup_trees = [t for t in (_parse(s) for s in setup) if t is not None]
    modules = _imported_modules([tree, *setup_trees])
    found: list[str] = []
    for node in tree.body:
        bound: list[str] = []
        if isinstance(node, ast.Import):
            bound = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            bound = [a.asname or a.name for a in node.names]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Attribute) and _root(value) in modules:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = [n for t in targets for n in _targets(t)]
        found += [n for n in bound if n in graded and n not in found]
    return found


def revealing_imports(source: str, setup: Iterable[str] = ()) -> list[str]:
    """Helper modules holding earlier answers (`staging.REVEALS`) that the answer cell imports
    although the notebook's setup cells do not: an answer composed from them is not written
    (the probe's jail hides them too, so such an import fails there)."""
    from autograder import staging

    tree = _parse(source)
    if tree is None:
        return []
    revealing = {staging.module_name(m) for m in staging.REVEALS}
    setup_trees = [t for t in (_parse(s) for s in setup) if t is not None]
    handed_out = revealing & _imported_names(setup_trees)
    return sorted((revealing & _imported_names([tree])) - handed_out)


def _imported_names(trees: Iterable[ast.Module]) -> set[str]:
    """Dotted names of the modules (and submodules) that import statements load."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def screen(
    observed: dict[str, Any],
    source: str | None,
    names: Iterable[str],
    imported: dict[str, str] | None = None,
    setup: Iterable[str] = (),
) -> dict[str, Any]:
    """`observed`, or the `imported` marker when a graded name was not written in the cell.

    An answer that never defined its names ("!missing") keeps that marker.
    """
    graded = list(names)
    if revealing_imports(source or "", setup):
        return {MARKER: graded}
    if "!missing" in observed:
        return observed
    found = static_imports(source or "", graded, setup)
    found += [n for n in graded if n in (imported or {}) and n not in found]
    return {MARKER: found} if found else observed
