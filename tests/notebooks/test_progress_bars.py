"""Every training loop shows a notebook-flavoured progress bar (tqdm.auto).

A training loop is a `for`/`while` loop whose own body calls `.backward()` or an optimizer's
`.step()`, or a function of the same module that does (a training step). It must iterate over
`tqdm(...)`/`trange(...)` (directly or through a name bound to one), or update such a bar by
hand, with tqdm imported from `tqdm.auto`: the console flavour writes to stderr, which
JupyterLab shows in red and nbgrader counts as a failure.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autograder.model.notebook_io import python_source, read, source
from autograder.model.paths import ROOT, SOLUTIONS

NOTEBOOK_FLAVOURS = {"tqdm.auto", "tqdm.notebook", "tqdm.autonotebook"}
BAR_FACTORIES = {"tqdm", "trange"}


def _own_nodes(loop: ast.For | ast.While) -> list[ast.AST]:
    """Nodes of the loop's body, not descending into nested loops or definitions."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(loop.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, ast.For | ast.While | ast.FunctionDef | ast.ClassDef | ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _trains(loop: ast.For | ast.While | ast.FunctionDef, steps: set[str] = frozenset()) -> bool:
    for node in _own_nodes(loop):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in steps:
                return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = ast.unparse(node.func.value).lower()
            if node.func.attr == "backward":
                return True
            if node.func.attr == "step" and ("optim" in receiver or receiver == "opt"):
                return True
    return False


def _is_bar(node: ast.AST, bars: set[str]) -> bool:
    """`tqdm(...)`, `trange(...)` (also as `x.tqdm(...)`) or a name bound to one."""
    if isinstance(node, ast.Call):
        func = node.func
        return (
            func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        ) in BAR_FACTORIES
    return isinstance(node, ast.Name) and node.id in bars


def problems(code: str) -> list[str]:
    """What is wrong with the progress bars of one module or notebook (its code joined)."""
    tree = ast.parse(code)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "tqdm":
            found.append(f"line {node.lineno}: `from tqdm import ...` is the console flavour")
        if isinstance(node, ast.Import) and any(a.name == "tqdm" for a in node.names):
            found.append(f"line {node.lineno}: `import tqdm`: use `from tqdm.auto import tqdm`")
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in NOTEBOOK_FLAVOURS
        for alias in node.names
    }
    bars = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_bar(node.value, set())
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    steps = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _trains(n)}
    for loop in (n for n in ast.walk(tree) if isinstance(n, ast.For | ast.While)):
        if not _trains(loop, steps):
            continue
        if isinstance(loop, ast.For) and _is_bar(loop.iter, bars):
            ok = True
        else:  # a bar updated by hand: bar.update(...)
            ok = any(
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "update"
                and ast.unparse(n.func.value) in bars
                for n in _own_nodes(loop)
            )
        if not ok:
            found.append(f"line {loop.lineno}: a training loop without a tqdm progress bar")
        elif not imported & BAR_FACTORIES:
            found.append(f"line {loop.lineno}: tqdm is not imported from tqdm.auto")
    return found


def notebook_code(path: Path) -> str:
    return "\n".join(python_source(source(c)) for c in read(path).cells if c.cell_type == "code")


SOURCES = sorted(SOLUTIONS.glob("*.ipynb")) + sorted((ROOT / "attention_course").glob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_training_loops_show_a_notebook_progress_bar(path: Path) -> None:
    code = notebook_code(path) if path.suffix == ".ipynb" else path.read_text()
    assert problems(code) == []


def test_the_shared_training_loop_is_checked() -> None:
    """charmodel.train is a training loop the check recognises (so it cannot pass vacuously)."""
    code = (ROOT / "attention_course" / "charmodel.py").read_text()
    tree = ast.parse(code)
    steps = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _trains(n)}
    assert steps == {"train_step"}, steps
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For) and _trains(n, steps)]
    assert loops, "no training loop found in attention_course/charmodel.py"


GOOD = """
from tqdm.auto import tqdm
for step in tqdm(range(10)):
    loss.backward()
    optimizer.step()
bar = tqdm(total=5)
while True:
    opt.step()
    bar.update(1)
"""
BAD = {
    "no bar": "for step in range(10):\n    loss.backward()\n",
    "console flavour": "from tqdm import tqdm\nfor s in tqdm(range(3)):\n    loss.backward()\n",
    "not imported": "for s in tqdm(range(3)):\n    optimizer.step()\n",
    "a step function, no bar": (
        "def one(m, opt):\n    m.loss().backward()\n    opt.step()\n"
        "for s in range(9):\n    one(model, opt)\n"
    ),
    "inner loop bare": (
        "from tqdm.auto import tqdm\n"
        "for seed in tqdm(range(3)):\n    for s in range(9):\n        loss.backward()\n"
    ),
}


def test_checker_accepts_bars() -> None:
    assert problems(GOOD) == []


@pytest.mark.parametrize("label", sorted(BAD))
def test_checker_rejects(label: str) -> None:
    assert problems(BAD[label]), label
