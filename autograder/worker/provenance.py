"""Is a graded name defined in its answer cell, or imported from somewhere else?

An answer that imports its graded names (from the course helpers, the grader, any module)
instead of defining them earns nothing for that cell, and so does one that imports a helper
holding earlier answers that its notebook's setup does not hand out (`revealing_imports`).
What decides is established outside the student's process, where nothing the student's code
patches can reach:

- `static_imports`, from the source alone (in `screen`, on the grader's side): graded names
  bound by an import statement of the cell, assigned from an imported name or attribute
  (`Head = helpers.Head`, `N_PARAMS = course.reference.N_PARAMS`), assigned from an expression
  that uses a module the cell imports other than the plain libraries (`ALLOWED`), classes with
  no method of their own built on such a module's class, definitions decorated from one, and
  every graded name of a cell that builds names at run time (exec, eval, compile,
  __import__, importlib, globals(), sys.modules, a function's __code__, ...);
- `recorded_imports`, the grader's cross-check of what the probe child records of each graded
  name (where its code was compiled, at which line; a class's module, methods and bases): a
  name with no record (the record was erased or forged away), a function compiled outside the
  cells the probe ran, or one whose recorded line holds no definition in that cell's source,
  counts as imported. The child's record can only add to what the source shows.

`screen` turns either into the observed marker `{probe.IMPORTED: [names]}`, which the spec
scores 0 with the catalog id `imported-answer`.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from autograder.probe import IMPORTED, MISSING

# Modules whose names an answer may use freely: no course answer lives in them.
ALLOWED = frozenset({
    "torch", "numpy", "math", "functools", "itertools", "typing", "dataclasses",
    "collections", "operator", "abc", "random", "statistics", "matplotlib",
})  # fmt: skip
# Names that make or fetch definitions at run time, out of the grader's sight.
DYNAMIC_CALLS = frozenset({"exec", "eval", "compile", "__import__", "globals", "vars", "locals"})
DYNAMIC_NAMES = frozenset(
    {"importlib", "builtins", "__builtins__", "marshal", "runpy", "ctypes", "__main__"}
)
DYNAMIC_ATTRIBUTES = frozenset({
    "__code__", "__globals__", "__module__", "__wrapped__", "__bases__", "__builtins__",
    "FunctionType", "CodeType",
})  # fmt: skip
CELL_LABELS = ("<answer ", "<setup ", "<notebook ")  # how the probe child names what it ran


@functools.lru_cache(maxsize=32)  # each check of a cell reads the same source (never changed)
def _parse(source: str) -> ast.Module | None:
    from autograder.model.notebook_io import python_source

    try:
        return ast.parse(python_source(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _imported_modules(trees: Iterable[ast.Module]) -> set[str]:
    """Names that import statements bind (modules, or anything imported)."""
    return set(_import_sources(trees))


def _import_sources(trees: Iterable[ast.Module]) -> dict[str, str]:
    """Each name an import statement binds -> the module it comes from."""
    names: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    bound = a.asname or a.name.split(".")[0]
                    names[bound] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for a in node.names:
                    if a.name != "*":
                        names[a.asname or a.name] = module
    return names


def _plain(module: str) -> bool:
    return module.split(".")[0] in ALLOWED


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


def _mentions(node: ast.AST | None, names: set[str]) -> bool:
    """`node` uses one of `names` anywhere."""
    if node is None or not names:
        return False
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def builds_names_at_run_time(tree: ast.AST) -> bool:
    """The source calls exec, eval, compile, __import__, globals(), vars() or locals(), or uses
    importlib, builtins, marshal, runpy, ctypes, __main__, sys.modules or a function's __code__
    (and the like): what it defines cannot be read from the source."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in DYNAMIC_CALLS:
                return True
        if isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES:
            return True
        if isinstance(node, ast.Attribute) and node.attr in DYNAMIC_ATTRIBUTES:
            return True
        if isinstance(node, ast.Attribute) and node.attr == "modules" and _root(node) == "sys":
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            modules.append(getattr(node, "module", None) or "")
            if any(m.split(".")[0] in DYNAMIC_NAMES for m in modules):
                return True
    return False


def static_imports(source: str, names: Iterable[str], setup: Iterable[str] = ()) -> list[str]:
    """Graded `names` that the answer cell does not visibly define itself (see the module's
    docstring): imported, taken from an import, built from a module the cell imports, or made
    at run time."""
    order = list(dict.fromkeys(names))
    graded = set(order)
    tree = _parse(source)
    if tree is None or not graded:
        return []
    setup_trees = [t for t in (_parse(s) for s in setup) if t is not None]
    modules = _imported_modules([tree, *setup_trees])
    own = _import_sources([tree])
    foreign = {name for name, module in own.items() if not _plain(module)}
    if builds_names_at_run_time(tree):
        return order
    found: list[str] = []
    for node in tree.body:
        bound: list[str] = []
        if isinstance(node, ast.Import):
            bound = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            bound = [a.asname or a.name for a in node.names]
            if any(a.name == "*" for a in node.names) and not _plain(node.module or ""):
                bound = order  # anything may have come from it
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            taken = isinstance(value, (ast.Attribute, ast.Name)) and _root(value) in modules
            if taken or _mentions(value, foreign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = [n for t in targets for n in _targets(t)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            decorated = any(_mentions(d, foreign) for d in node.decorator_list)
            borrowed = isinstance(node, ast.ClassDef) and _borrowed_class(node, foreign)
            if decorated or borrowed:
                bound = [node.name]
        found += [n for n in bound if n in graded and n not in found]
    return found


def _borrowed_class(node: ast.ClassDef, foreign: set[str]) -> bool:
    """A class with no method of its own, built on a class of a module the cell imports."""
    own = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in node.body)
    return not own and any(_mentions(b, foreign) for b in [*node.bases, *node.keywords])


# ---- the probe child's record, checked on the grader's side ---------------------------------


def _definition_lines(source: str) -> set[int]:
    """Lines where the cell's source starts a function, a lambda or a decorated definition."""
    tree = _parse(source)
    lines: set[int] = set()
    if tree is None:
        return lines
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            lines.add(node.lineno)
            lines |= {d.lineno for d in getattr(node, "decorator_list", [])}
    return lines


def recorded_imports(
    record: Any, names: Iterable[str], answers: Mapping[str, str], labels: Iterable[str] = ()
) -> dict[str, str]:
    """Graded name -> why it counts as imported, from the probe child's `record` (see
    `probe.child.origins`) checked against the sources the grader gave the child: `answers`
    (grade_id -> source of each answer cell it ran) and `labels` (the names of the other
    cells it ran: setup and the notebook's own cells)."""
    if not isinstance(record, dict):
        record = {}
    ran = {f"<answer {g}>" for g in answers} | set(labels)
    found: dict[str, str] = {}
    for name in names:
        facts = record.get(name)
        if not isinstance(facts, dict):
            found[name] = "no record of where it was made"
            continue
        why = _judge_facts(facts, answers, ran)
        if why:
            found[name] = why[:200]
    return found


def _judge_facts(facts: dict[str, Any], answers: Mapping[str, str], ran: set[str]) -> str:
    kind = facts.get("kind")
    if kind == "value":
        return ""
    if kind == "builtin":
        module = str(facts.get("module"))
        return "" if module == "__main__" else module
    if kind == "function":
        return _judge_code(str(facts.get("file")), facts.get("line"), answers, ran)
    if kind == "class":
        files = [str(f) for f in facts.get("methods", []) if isinstance(f, str)]
        module = str(facts.get("module"))
        if any(f.startswith("<answer ") and f in ran for f in files) and module == "__main__":
            return ""
        if module != "__main__":
            return module
        elsewhere = [f for f in files if not f.startswith(CELL_LABELS) or f not in ran]
        bases = [str(b) for b in facts.get("bases", []) if isinstance(b, str)]
        strange = [b for b in bases if b.split(".")[0] not in ("torch", "builtins", "abc")]
        return (elsewhere or [b for b in strange if b != "__main__"] or [""])[0]
    return "no record of where it was made"


def _judge_code(file: str, line: Any, answers: Mapping[str, str], ran: set[str]) -> str:
    """'' when code compiled from `file` at `line` is a definition the cells show."""
    if file not in ran:
        return file
    if file.startswith("<answer "):
        gid = file[len("<answer ") : -1]
        if not isinstance(line, int) or line not in _definition_lines(answers.get(gid, "")):
            return f"{file} holds no definition at line {line}"
    return ""


def revealing_imports(source: str, setup: Iterable[str] = ()) -> list[str]:
    """Helper modules holding earlier answers (`staging.REVEALS`) that the answer cell imports
    although the notebook's setup cells do not: an answer composed from them is not written
    (the probe's jail hides them too, so such an import fails there)."""
    from autograder.course import staging

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

    An answer that never defined its names (`probe.MISSING`) keeps that marker.
    """
    graded = list(names)
    if revealing_imports(source or "", setup):
        return {IMPORTED: graded}
    if MISSING in observed:
        return observed
    found = static_imports(source or "", graded, setup)
    found += [n for n in graded if n in (imported or {}) and n not in found]
    return {IMPORTED: found} if found else observed
