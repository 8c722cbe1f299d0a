"""The grader's code stays readable: packages by concern that import only in the directions their
`__init__` docstrings allow, no import cycles, short functions, imports at the top."""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.model.paths import ROOT

PACKAGE = ROOT / "autograder"
# Each package and the packages it may import (function-level imports included). "cli" stands
# for the modules at the top of `autograder/` (the command line), which may import everything.
ALLOWED: dict[str, set[str]] = {
    "probe": set(),
    "model": set(),
    "checks": {"model", "probe"},
    "course": {"model"},
    "jail": {"model", "course", "probe"},
    "intake": {"model", "course"},
    "publish": {"model", "checks", "course", "intake"},
    "worker": {"model", "checks", "probe", "course", "jail", "intake", "publish"},
    "run": {"model", "checks", "course", "jail", "intake", "worker", "publish"},
    "gradescope": {
        "model",
        "checks",
        "course",
        "jail",
        "intake",
        "worker",
        "publish",
        "run",
        "cli",
    },  # fmt: skip
}
TOP = {"__init__", "__main__", "cli"}  # the only modules outside a package
# Imports against the directions above, each with its reason: to shrink, never to grow.
EXCEPTIONS = {
    ("autograder.model.grades", "autograder.checks.base"): "a CellGrade carries the CellResult",
    ("autograder.model.course", "autograder.course.staging"): "Master.context: the hidden helpers",
    ("autograder.model.course", "autograder.worker.context"): "Master.context",
    ("autograder.model.course", "autograder.worker.rebuild"): "Master.stubs: release_stubs",
    ("autograder.intake.discover", "autograder.worker.rebuild"): "matching files by content",
}
# The grading path's modules: the rules below hold for each of them.
STAGES = [
    "cli", "model.settings", "intake.discover", "worker.rebuild", "worker.judge",
    "worker.pipeline", "run.executor", "run.grade", "worker.task", "model.grades",
    "publish.state", "publish.outdir", "publish.feedback", "publish.report", "publish.outputs",
    "model.course",
]  # fmt: skip
LONGEST = 60  # lines of one function, unless a comment in it says why


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, top_level_only: bool = False) -> list[tuple[int, str]]:
    """(line, module) of each autograder module or name `path` imports: `from a.b import c`
    gives `a.b` and `a.b.c` (c may be a module). Relative imports are the package's own."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "autograder":
                found.append((node.lineno, node.module))
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("autograder")]
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return "cli" if len(parts) < 3 and parts[-1] not in ALLOWED else parts[1]


def graph() -> dict[str, set[str]]:
    known = modules()
    return {
        m: {d for _, d in imports(p, top_level_only=True) if d in known and d != m}
        for m, p in known.items()
    }


def crossings() -> list[str]:
    """Every import from one package into another that ALLOWED does not allow."""
    known = modules()
    problems = []
    for module, path in known.items():
        here = package_of(module)
        found = imports(path)
        for line, target in found:
            if target not in known or target == "autograder":
                continue  # a name, not a module: its module is listed too
            if any(t.startswith(target + ".") and t in known for n, t in found if n == line):
                continue  # `from package import module`: the module is the import
            there = package_of(target)
            if here in (there, "cli") or there in ALLOWED.get(here, set()):
                continue
            if (module, target) not in EXCEPTIONS:
                where = path.relative_to(ROOT)
                problems.append(f"{where}:{line}: {module} ({here}) imports {target} ({there})")
    return problems


def test_every_module_is_in_a_package() -> None:
    flat = [m for m in modules() if package_of(m) == "cli" and m.split(".")[-1] not in TOP]
    flat = [m for m in flat if m != "autograder"]
    assert not flat, f"modules outside every package (put each in one, ALLOWED): {flat}"


def test_every_package_says_what_it_owns_and_may_import() -> None:
    for name in ALLOWED:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        where = f"autograder/{name}/__init__.py"
        assert doc and "May import:" in doc, f"{where}: say what it may import"
        said = doc.split("May import:", 1)[1].split("\n\n")[0]
        for other in ALLOWED[name] if "every package" not in said else ():
            assert other in said, f"autograder/{name}/__init__.py does not list {other}"


def test_packages_import_only_in_the_allowed_directions() -> None:
    problems = crossings()
    assert not problems, "imports against the layout (tests/unit/test_grader_structure.py):\n" + (
        "\n".join(problems)
    )


def test_the_allowed_directions_have_no_cycle() -> None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(ALLOWED.get(node, set()) - {"cli"}):
            assert state.get(dep) != 1, "packages allowed in a cycle: " + " -> ".join(path + [dep])
            if dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for package in sorted(ALLOWED):
        if package not in state:
            visit(package, [package])


def test_the_exceptions_are_still_needed() -> None:
    known = modules()
    used = {(m, t) for m, p in known.items() for _, t in imports(p)}
    stale = [pair for pair in EXCEPTIONS if pair not in used]
    assert not stale, f"exceptions no longer imported (delete them): {stale}"


def test_a_forbidden_import_is_named(tmp_path: Path, monkeypatch) -> None:
    """The check sees a function-level import and names it, file and line."""
    module = PACKAGE / "model" / "contract.py"
    source = module.read_text() + "\n\ndef _late():\n    from autograder.run import grade\n"
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda p: source if p == module else real(p))
    problems = crossings()
    assert any(
        p.startswith("autograder/model/contract.py:")
        and "autograder.model.contract (model) imports autograder.run.grade (run)" in p
        for p in problems
    ), problems


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


def _path(name: str) -> Path:
    return PACKAGE / (name.replace(".", "/") + ".py")


def test_stage_functions_are_short_and_import_at_the_top() -> None:
    problems = []
    for name in STAGES:
        lines = _path(name).read_text().splitlines()
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
        doc = ast.get_docstring(ast.parse(_path(name).read_text()))
        assert doc and len(doc) > 40, name
