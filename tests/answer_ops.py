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
import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from autograder.model.notebook_io import python_source

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


# ---- answers composed of what the page provides ---------------------------------------------
#
# An answer cell asks for an idea; it must not be answerable by calling what the page already
# provides. The callables a student can lean on without writing anything are what the setup cells
# define (the grader runs them before every answer) and, from the other cells above the answer,
# what they import from the course helpers or define with `def` and `class`. `compositions` builds
# the expressions that call those callables (and the answer's own parameters that are modules, and
# their submodules) two levels deep on the parameters, then joins two of them with `@`; it runs
# each on sample arguments and keeps the ones that run, one per distinct value.

COURSE = "attention_course"
PAGE = "__page__"
_FAILED = object()


def _provides(node: ast.stmt) -> bool:
    """A statement of a non-setup cell that hands the student a callable (or a literal it needs)."""
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == COURSE
    if isinstance(node, ast.Import):
        return all(alias.name.split(".")[0] == COURSE for alias in node.names)
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return True
    if isinstance(node, ast.Assign):  # `cache = {}` beside a function that fills it
        try:
            ast.literal_eval(node.value)
        except ValueError:
            return False
        return True
    return False


def page_namespace(cells: Sequence[Any], setup: Callable[[Any], bool], skip: Callable[[Any], bool]):
    """The namespace of the page above an answer: `setup` cells run whole, the others (but the
    cells `skip` names: answers and their checks) contribute what `_provides` keeps."""
    import torch  # the setup cells may set torch's thread count: keep the test process's own

    threads = torch.get_num_threads()
    ns: dict[str, Any] = {"__name__": PAGE}
    try:
        for cell in cells:
            if cell.cell_type != "code" or skip(cell):
                continue
            src = python_source("".join(cell.source))
            if setup(cell):
                exec(compile(src, "<setup>", "exec"), ns)  # noqa: S102 - the course's own cells
                continue
            for node in ast.parse(src).body:
                if _provides(node):
                    try:  # a definition that needs the cell's other work is left out
                        exec(compile(ast.Module([node], []), "<page>", "exec"), ns)  # noqa: S102
                    except Exception:
                        continue
    finally:
        torch.set_num_threads(threads)
    return ns


def draws(fn: Callable) -> bool:
    """Is `fn` a helper that draws (annotated to return a figure or axes)? It computes nothing."""
    annotation = str(getattr(fn, "__annotations__", {}).get("return", ""))
    return any(word in annotation for word in ("Figure", "Axes")) and "Tensor" not in annotation


def page_callables(ns: dict[str, Any]) -> dict[str, Callable]:
    """name -> callable for what the page defines or imports from the course helpers; the public
    functions and classes of an imported helper module count too, as `module.name`. Helpers
    that draw are left out."""
    import types

    found: dict[str, Callable] = {}
    for name, value in ns.items():
        if name.startswith("_"):
            continue
        if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] == COURSE:
            for attr, member in vars(value).items():
                if not attr.startswith("_") and callable(member) and not draws(member):
                    if getattr(member, "__module__", None) == value.__name__:
                        found[f"{name}.{attr}"] = member
        elif callable(value) and not draws(value):
            module = getattr(value, "__module__", None) or ""
            if module == PAGE or module.split(".")[0] == COURSE:
                found[name] = value
    return found


def arity(fn: Callable) -> int | None:
    """How many positional arguments a call needs; None when it needs keywords as well."""
    import inspect

    import torch.nn as nn

    try:
        signature = inspect.signature(fn.forward if isinstance(fn, nn.Module) else fn)
    except (TypeError, ValueError):
        return None
    needed = 0
    for p in signature.parameters.values():
        if p.default is p.empty and p.kind is p.KEYWORD_ONLY:
            return None
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            needed += 1
    return needed


def _kept(value: Any) -> bool:
    """Values worth composing further: tensors, numbers, devices and modules."""
    import torch
    import torch.nn as nn

    if isinstance(value, bool):
        return False
    return isinstance(value, torch.Tensor | int | float | torch.device | nn.Module)


def fingerprint(value: Any) -> tuple:
    """Equal values, equal fingerprints (good enough to drop repeats of the same term)."""
    import torch
    import torch.nn as nn

    if isinstance(value, torch.Tensor):
        v = value.detach().double()
        sums = (v.nansum().item(), (v * v).nansum().item(), v.isnan().sum().item())
        return ("tensor", tuple(v.shape), *(round(s, 6) for s in sums))
    if isinstance(value, nn.Module):
        shapes = tuple((n, tuple(p.shape)) for n, p in value.state_dict().items())
        return ("module", type(value).__name__, shapes)
    return (type(value).__name__, repr(value))


def same(a: Any, b: Any) -> bool:
    """The same result: equal tensors (to float round-off), numbers or devices."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.shape != b.shape or a.is_complex() or b.is_complex():
            return False
        return bool(torch.allclose(a.double(), b.double(), atol=1e-5, equal_nan=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def attempt(fn: Callable, args: Sequence[Any]) -> Any:
    """fn(*args) on copies of tensor arguments; _FAILED when it raises (see `quietly`)."""
    import matplotlib.pyplot as plt
    import torch

    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    try:
        return fn(*copies)
    except Exception:
        return _FAILED
    finally:
        if plt.get_fignums():
            plt.close("all")


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """No printing, no warnings and no autograd while helpers are tried on odd arguments."""
    import io
    import warnings

    import torch

    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            yield


class Term:
    """One expression, its value on the sample arguments, and whether it calls the page."""

    def __init__(self, text: str, value: Any, calls_page: bool) -> None:
        self.text, self.value, self.calls_page = text, value, calls_page


class Budget(Exception):
    """The search ran out of calls before it was complete."""


def _keep(made: list[Term], seen: set, text: str, value: Any, calls_page: bool) -> None:
    """Add a new term unless it failed, is of no use, or repeats a value already made."""
    if value is _FAILED or not _kept(value):
        return
    mark = fingerprint(value)
    if mark not in seen:
        seen.add(mark)
        made.append(Term(text, value, calls_page))


def compositions(
    params: dict[str, Any],
    page: dict[str, Callable],
    depth: int = 2,
    max_arity: int = 3,
    max_calls: int = 30_000,
) -> list[Term]:
    """Every expression that runs on `params`, one per distinct value: calls nested `depth` deep,
    then the product `a @ b` of any two tensor results.

    A call is of a page callable, or of a module among the terms (a parameter such as `key`, its
    submodules such as `head.query`, or one a page class built), on terms made so far, at least
    one of them made on the level before. Raises `Budget` rather than answer from an incomplete
    search.
    """
    import operator

    import torch
    import torch.nn as nn

    terms = [Term(name, value, False) for name, value in params.items()]
    for name, value in params.items():
        if isinstance(value, nn.Module):
            terms += [Term(f"{name}.{n}", m, False) for n, m in value.named_children()]
    seen = {fingerprint(t.value) for t in terms}
    newest = {id(t) for t in terms}
    calls = 0
    with quietly():
        for level in range(depth):
            made: list[Term] = []
            modules = [t for t in terms if isinstance(t.value, nn.Module)]
            callers = [(name, fn, True) for name, fn in page.items()]
            callers += [(t.text, t.value, t.calls_page) for t in modules]
            for name, fn, from_page in callers:
                n = arity(fn)
                if n is None or n > max_arity or (n == 0 and level > 0):
                    continue
                for args in itertools.product(terms, repeat=n):
                    if level > 0 and not any(id(a) in newest for a in args):
                        continue
                    calls += 1
                    if calls > max_calls:
                        raise Budget(f"more than {max_calls} calls")
                    text = f"{name}({', '.join(a.text for a in args)})"
                    used = from_page or any(a.calls_page for a in args)
                    _keep(made, seen, text, attempt(fn, [a.value for a in args]), used)
            terms += made
            newest = {id(t) for t in made}
        made = []
        tensors = [t for t in terms if isinstance(t.value, torch.Tensor)]
        for a, b in itertools.product(tensors, repeat=2):
            value = attempt(operator.matmul, [a.value, b.value])
            _keep(made, seen, f"{a.text} @ {b.text}", value, a.calls_page or b.calls_page)
    return terms + made
