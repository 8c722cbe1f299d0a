"""Is an answer displayed in other code? Code compared as the operations it performs.

A piece of code becomes a list of operations in the order Python evaluates them: calls of
library functions and methods (`torch.tril`, `.masked_fill`), operators (`@`, `**`), slices
and attribute reads, each with its constant arguments kept and everything else written `·`.
Local names, whitespace, comments and how work is split into statements disappear: `w =
q @ k.mT; return w` and `return q @ k.mT` read the same. Printing, plotting and asserts do not
count as computing, and calls of local callables (`key(x)`) carry nothing to recognise.

An answer is displayed in some code when its operations occur there as one contiguous run.
Code that does more in between (a line added) or less (a line deleted) is a different answer.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

from autograder.notebook_io import python_source

MODULES = {"torch", "F", "nn", "np", "math", "functional"}
OUTPUT_CALLS = {"print", "display", "plt", "ax", "axes", "fig", "plots", "tqdm"}
DROPPED_KEYWORDS = {"device", "dtype", "generator", "out", "requires_grad"}
TRIVIAL = {"CALL", ".shape", ".__init__", "len", "range", "super", "isinstance", "zip", "list"}
ANY = "·"


def _const(node: ast.AST) -> str | None:
    """The source of a constant argument (-1, 0.5, "tril", (1, 2)), else None."""
    if isinstance(node, ast.Constant):
        return repr(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _const(node.operand)
        return None if inner is None else "-" + inner
    if isinstance(node, ast.Tuple) and all(_const(e) is not None for e in node.elts):
        return "(" + ", ".join(_const(e) or "" for e in node.elts) + ")"
    return None


def _dotted(node: ast.AST) -> str | None:
    """'torch.nn.functional.softmax' for a chain of attributes rooted at a library module."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in MODULES:
        return ".".join([node.id, *reversed(parts)])
    return None


class _Ops:
    def __init__(self) -> None:
        self.ops: list[str] = []

    def arg(self, node: ast.AST | None) -> str:
        """Emit the operations inside an argument, return how it reads in its caller."""
        if node is None:
            return ""
        const = _const(node)
        if const is not None:
            return const
        self.expr(node)
        return ANY

    def expr(self, node: ast.AST) -> None:  # noqa: C901 - one branch per node kind
        if isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.BinOp):
            left, right = self.arg(node.left), self.arg(node.right)
            self.ops.append(f"{left} {type(node.op).__name__} {right}")
        elif isinstance(node, ast.UnaryOp):
            self.ops.append(f"{type(node.op).__name__} {self.arg(node.operand)}")
        elif isinstance(node, ast.Compare):
            parts = [self.arg(node.left)]
            for op, right in zip(node.ops, node.comparators, strict=True):
                parts += [type(op).__name__, self.arg(right)]
            self.ops.append(" ".join(parts))
        elif isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
                return  # a size read off a tensor: bookkeeping, not computing
            self.expr(node.value)
            self.ops.append("[" + self.index(node.slice) + "]")
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted is None:
                self.expr(node.value)
                self.ops.append("." + node.attr)
        elif isinstance(node, ast.Slice):
            self.ops.append(self.index(node))
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child)

    def index(self, node: ast.AST) -> str:
        if isinstance(node, ast.Tuple):
            return ", ".join(self.index(e) for e in node.elts)
        if isinstance(node, ast.Slice):
            return ":".join(self.arg(p) if p else "" for p in (node.lower, node.upper, node.step))
        return self.arg(node)

    def call(self, node: ast.Call) -> None:
        func = node.func
        dotted = _dotted(func)
        if dotted is not None:
            head = dotted.split(".")[-1] if dotted.startswith(("F.", "torch.nn.")) else dotted
            head = "softmax" if head in ("softmax", "torch.softmax", "F.softmax") else head
        elif isinstance(func, ast.Attribute):
            self.expr(func.value)
            head = "." + func.attr
            head = "softmax" if func.attr == "softmax" else head
        elif isinstance(func, ast.Name):
            head = func.id if func.id in __builtins__ or func.id in MODULES else "CALL"  # type: ignore[operator]
        else:
            self.expr(func)
            head = "CALL"
        args = [self.arg(a) for a in node.args]
        kwargs = [
            f"{k.arg}={self.arg(k.value)}"
            for k in node.keywords
            if k.arg not in DROPPED_KEYWORDS and k.arg is not None
        ]
        self.ops.append(f"{head}({', '.join(args + kwargs)})")


def _is_output(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Assert | ast.Pass | ast.Import | ast.ImportFrom | ast.Raise):
        return True
    if isinstance(stmt, ast.Expr):
        if isinstance(stmt.value, ast.Constant):  # a docstring
            return True
        node = stmt.value.func if isinstance(stmt.value, ast.Call) else stmt.value
        while isinstance(node, ast.Attribute | ast.Call):
            node = node.value if isinstance(node, ast.Attribute) else node.func
        return isinstance(node, ast.Name) and node.id in OUTPUT_CALLS
    return False


def _statements(body: Iterable[ast.stmt], ops: _Ops) -> None:
    for stmt in body:
        if _is_output(stmt):
            continue
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            _statements(stmt.body, ops)
        elif isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Return):
            if stmt.value is not None:
                ops.expr(stmt.value)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Subscript):
                    ops.ops.append("[" + ops.index(target.slice) + "]=")
        elif isinstance(stmt, ast.Expr):
            ops.expr(stmt.value)
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    ops.expr(child)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list):
                    _statements([s for s in inner if isinstance(s, ast.stmt)], ops)
                    for handler in inner:
                        if isinstance(handler, ast.ExceptHandler):
                            _statements(handler.body, ops)
            for item in getattr(stmt, "items", []):
                ops.expr(item.context_expr)


def operations(source: str) -> list[str]:
    """The operations of a piece of code, as described in the module docstring."""
    try:
        tree = ast.parse(python_source(source))
    except SyntaxError:
        return []
    ops = _Ops()
    _statements(tree.body, ops)
    return [op for op in ops.ops if op.split("(")[0] not in TRIVIAL]


def contains(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    """Does `needle` occur in `haystack` as one contiguous run?"""
    n = len(needle)
    return n > 0 and any(list(haystack[i : i + n]) == list(needle) for i in range(len(haystack)))


def fenced_code(markdown: str) -> list[str]:
    """The bodies of the ``` fenced blocks of a markdown cell."""
    blocks, current, inside = [], [], False
    for line in markdown.splitlines():
        if line.strip().startswith("```"):
            if inside:
                blocks.append("\n".join(current))
                current = []
            inside = not inside
        elif inside:
            current.append(line)
    return blocks
