"""The grader's code stays readable: no import cycles, short functions, imports at the top."""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.paths import ROOT

PACKAGE = ROOT / "autograder"
# The grading path's modules: the rules below hold for each of them.
STAGES = [
    "cli", "settings", "discover", "rebuild", "judge", "pipeline", "executor", "grade",
    "task", "grades", "state", "outdir", "feedback", "report", "outputs", "examples",
]  # fmt: skip
LONGEST = 60  # lines of one function, unless a comment in it says why


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_imports(path: Path) -> set[str]:
    """autograder modules imported at module level (what an import cycle is made of)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("autograder"):
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("autograder")}
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        m: {d for d in top_level_imports(p) if d in modules and d != m} for m, p in modules.items()
    }


def test_no_import_cycles() -> None:
    edges = graph()
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                cycle = path[path.index(dep) :] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_stage_functions_are_short_and_import_at_the_top() -> None:
    problems = []
    for name in STAGES:
        path = PACKAGE / f"{name}.py"
        lines = path.read_text().splitlines()
        for fn in _functions(ast.parse("\n".join(lines))):
            body = lines[fn.lineno - 1 : fn.end_lineno]
            if len(body) > LONGEST and not any("# long:" in line for line in body):
                problems.append(f"{name}.{fn.name}: {len(body)} lines")
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    said = "#" in lines[node.lineno - 1] or "#" in lines[node.lineno - 2]
                    if not said:
                        problems.append(f"{name}.{fn.name}: import inside without a reason")
    assert not problems, problems


def test_the_stage_modules_exist_and_say_what_they_do() -> None:
    for name in STAGES:
        doc = ast.get_docstring(ast.parse((PACKAGE / f"{name}.py").read_text()))
        assert doc and len(doc) > 40, name
