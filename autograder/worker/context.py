"""The notebook's own names in a probe: which of the master's cells an answer needs run first.

In the student's kernel an answer cell runs after every cell above it, so it may read any name
those cells define (`C`, `head_size`, `block_size`, `x`, `key`, ...). A probe runs the master's
setup cells and the student's answer cells; before each answer it also runs the master's
demonstration cells above it that define a name the answer reads, found statically (`ast`,
`symtable`), with what those cells need in turn:

- the cells defining the names they read (module level, and inside the functions and classes
  they define, read when called);
- the cells that may change such a name in place before the answer (`x[0] = ...`, `m.to(...)`,
  `train(model, ...)`);
- for a cell that draws from torch's global generator, every cell that draws from it since the
  last `torch.manual_seed` before it, so that its tensors are the kernel's (a drawing cell of
  the course's helpers or of a student's answer counts as drawing).

Never run: test cells (their hidden tests never enter a jail, and their visible checks run the
student's code), cells a student added, and cells that import a helper the probe's jail hides
(`staging.probe_hidden_helpers`: an answer is never composed from answers the notebook hands out
only after it). A name only such a cell defines stays undefined, and `unavailable` says why in
words. The analysis of the master is made once per master (`Master.context`); a student's
answers are parsed per notebook graded. Masters whose answers read no such name run no extra
cell at all.
"""

from __future__ import annotations

import ast
import builtins
import symtable
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nbformat import NotebookNode

from autograder.model.notebook_io import (
    grade_id,
    is_answer,
    is_setup,
    is_test,
    python_source,
    source,
)
from autograder.model.settings import LIMITS

BUILTINS = frozenset(dir(builtins)) | {"get_ipython", "display", "__name__", "__file__"}

# calls that draw from torch's global generator (unless given a generator= of their own)
RANDOM_CALLS = frozenset(
    {
        "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
        "normal", "bernoulli", "multinomial", "poisson", "normal_", "uniform_", "random_",
        "bernoulli_", "exponential_", "geometric_", "cauchy_", "log_normal_",
        "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
        "trunc_normal_", "orthogonal_", "sparse_", "dropout", "dropout1d", "dropout2d",
        "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu", "generate", "sample",
        "get_batch", "shuffle",
    }
)  # fmt: skip
# torch.nn layers whose construction draws their initial weights
DRAWING_LAYERS = frozenset(
    {
        "Linear", "Bilinear", "LazyLinear", "Embedding", "EmbeddingBag", "Conv1d", "Conv2d",
        "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "RNN", "LSTM", "GRU",
        "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "Transformer",
        "TransformerEncoderLayer", "TransformerDecoderLayer", "PReLU",
    }
)  # fmt: skip
SEEDS = frozenset({"manual_seed", "seed"})
# method names that change their object in place
MUTATING_METHODS = frozenset(
    {
        "train", "eval", "to", "cuda", "cpu", "half", "float", "double", "bfloat16", "apply",
        "load_state_dict", "register_buffer", "register_parameter", "register_forward_hook",
        "register_forward_pre_hook", "register_full_backward_hook", "requires_grad_",
        "zero_grad", "step", "backward", "append", "extend", "insert", "update", "pop",
        "popitem", "clear", "setdefault", "remove", "add_module", "share_memory_",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Names:
    """What one cell does with names, read from its source alone."""

    defines: frozenset[str] = frozenset()  # names it binds at module level
    reads: frozenset[str] = frozenset()  # names it reads from earlier cells (now or when called)
    mutates: frozenset[str] = frozenset()  # names of earlier cells it may change in place
    calls: frozenset[str] = frozenset()  # bare names it calls while it runs
    arguments: frozenset[str] = frozenset()  # "callee:name" for a name passed first to a call
    draws: bool = False  # draws from torch's global generator while it runs (its own calls)
    seeds_first: bool = False  # reseeds torch's generator before drawing from it
    seeds: bool = False  # reseeds it at some point
    drawing_defs: frozenset[str] = frozenset()  # functions/classes it defines that draw
    defs: frozenset[str] = frozenset()  # functions and classes it defines
    def_calls: dict[str, frozenset[str]] = field(default_factory=dict)  # def -> names it calls
    imports: frozenset[str] = frozenset()  # dotted modules its import statements load
    import_names: frozenset[str] = frozenset()  # names bound by its import statements
    parsed: bool = True


def _root(node: ast.AST) -> str | None:
    """The name at the root of an attribute or subscript chain (None through a call)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _call_name(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _own_generator(call: ast.Call) -> bool:
    return any(k.arg == "generator" for k in call.keywords)


class _RunNow(ast.NodeVisitor):
    """The calls and in-place changes a cell makes while it runs (not in function bodies)."""

    def __init__(self) -> None:
        self.calls: list[ast.Call] = []
        self.mutated: set[str] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for part in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if part is not None:
                self.visit(part)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for part in [*node.args.defaults, *node.args.kw_defaults]:
            if part is not None:
                self.visit(part)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for part in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(part)
        for stmt in node.body:  # a class body runs when the class is made
            self.visit(stmt)

    def visit_Call(self, node: ast.Call) -> None:
        self.calls.append(node)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr.endswith("_")
            or (isinstance(func, ast.Attribute) and func.attr in MUTATING_METHODS)
        ):
            root = _root(func.value)
            if root:
                self.mutated.add(root)
        self.generic_visit(node)

    def _store(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = _root(target)
            if root:
                self.mutated.add(root)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._store(elt)
        elif isinstance(target, ast.Starred):
            self._store(target.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._store(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._store(node.target)
        if isinstance(node.target, ast.Name):
            self.mutated.add(node.target.id)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._store(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._store(target)
        self.generic_visit(node)


def _draws(call: ast.Call) -> bool:
    """Does this call draw from torch's global generator by itself?"""
    func = call.func
    name = _call_name(func)
    if _own_generator(call):
        return False
    if name in RANDOM_CALLS:
        return True
    return isinstance(func, ast.Attribute) and name in DRAWING_LAYERS


def _seeds(call: ast.Call) -> bool:
    """torch.manual_seed(...) (or torch.random.manual_seed, torch.seed): the global generator."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr in SEEDS and _root(func) == "torch"


class _Order(ast.NodeVisitor):
    """Module-level loads and stores of `names` in the order a cell runs them: which of them
    it reads before it binds them (so from an earlier cell)."""

    def __init__(self, names: set[str]) -> None:
        self.names, self.bound, self.early = names, set(), set()
        self.scoped = 0  # inside a class body or a comprehension: stores bind no module name

    def visit_Name(self, node: ast.Name) -> None:
        if node.id not in self.names:
            return
        if isinstance(node.ctx, ast.Load):
            if node.id not in self.bound:
                self.early.add(node.id)
        elif not self.scoped:
            self.bound.add(node.id)

    def _bind(self, name: str) -> None:
        if name in self.names and not self.scoped:
            self.bound.add(name)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and node.target.id not in self.bound:
            if node.target.id in self.names:
                self.early.add(node.target.id)
        self.visit(node.value)
        self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for part in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if part is not None:
                self.visit(part)
        self._bind(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for part in [*node.args.defaults, *node.args.kw_defaults]:
            if part is not None:
                self.visit(part)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for part in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(part)
        self.scoped += 1
        for stmt in node.body:
            self.visit(stmt)
        self.scoped -= 1
        self._bind(node.name)

    def _comprehension(self, node: ast.AST) -> None:
        self.scoped += 1
        self.generic_visit(node)
        self.scoped -= 1

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._bind((alias.asname or alias.name).split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            self._bind(alias.asname or alias.name)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self._bind(node.name)
        for stmt in node.body:
            self.visit(stmt)


def _reads_before_binding(tree: ast.Module, names: set[str]) -> set[str]:
    """Of `names` (bound and read at module level), those read before the cell binds them."""
    order = _Order(names)
    for stmt in tree.body:
        order.visit(stmt)
    return order.early


def _symbols(table: symtable.SymbolTable, reads: set[str], defines: set[str]) -> None:
    """Global names read in nested scopes (functions, classes, comprehensions), and globals
    they assign (`global x; x = ...`)."""
    for child in table.get_children():
        for sym in child.get_symbols():
            if sym.is_global() and sym.is_referenced():
                reads.add(sym.get_name())
            if sym.is_declared_global() and sym.is_assigned():
                defines.add(sym.get_name())
        _symbols(child, reads, defines)


def analyse(src: str, limit: int = LIMITS.reads.analyse_cell_chars) -> Names:
    """The `Names` of one cell's source (empty and unparsed when it cannot be read)."""
    if len(src) > limit:
        return Names(parsed=False)
    try:
        text = python_source(src)
        tree = ast.parse(text)
        table = symtable.symtable(text, "<cell>", "exec")
    except Exception:  # SyntaxError, RecursionError, MemoryError: student input is hostile
        return Names(parsed=False)
    try:
        return _analyse(tree, table)
    except RecursionError:
        return Names(parsed=False)


def _analyse(tree: ast.Module, table: symtable.SymbolTable) -> Names:
    defines, reads, both = set(), set(), set()
    for sym in table.get_symbols():
        name = sym.get_name()
        bound = sym.is_assigned() or sym.is_imported()
        if bound:
            defines.add(name)
        if sym.is_referenced():
            (both if bound else reads).add(name)
    reads |= _reads_before_binding(tree, both)
    nested: set[str] = set()
    _symbols(table, nested, defines)
    reads |= nested - defines  # a function reads the cell's own names once the cell has run
    return Names(
        defines=frozenset(defines),
        reads=frozenset(reads - BUILTINS),
        **_running(tree),
        **_definitions(tree),
        **_imports(tree),
    )


def _running(tree: ast.Module) -> dict[str, Any]:
    """What the cell does while it runs: calls, in-place changes, torch's generator."""
    run = _RunNow()
    for stmt in tree.body:
        run.visit(stmt)
    draws = seeds = seeds_first = False
    calls: set[str] = set()
    arguments: set[str] = set()
    for call in sorted(run.calls, key=lambda c: (c.lineno, c.col_offset)):
        if _seeds(call):
            seeds_first = seeds_first or not draws
            seeds = True
            continue
        if isinstance(call.func, ast.Name):
            calls.add(call.func.id)
            first = _root(call.args[0]) if call.args else None  # train(model, ...) changes it
            if first:
                arguments.add(f"{call.func.id}:{first}")
        draws = draws or _draws(call)
    return {
        "mutates": frozenset(run.mutated),
        "calls": frozenset(calls),
        "arguments": frozenset(arguments),
        "draws": draws,
        "seeds_first": seeds_first,
        "seeds": seeds,
    }


def _definitions(tree: ast.Module) -> dict[str, Any]:
    """The functions and classes the cell defines, those that draw, and what each calls."""
    defs, drawing_defs, def_calls = set(), set(), {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.add(stmt.name)
            inner = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]
            if any(_draws(c) or _seeds(c) for c in inner):
                drawing_defs.add(stmt.name)
            def_calls[stmt.name] = frozenset(
                c.func.id for c in inner if isinstance(c.func, ast.Name)
            )
    return {
        "defs": frozenset(defs),
        "drawing_defs": frozenset(drawing_defs),
        "def_calls": def_calls,
    }


def _imports(tree: ast.Module) -> dict[str, Any]:
    imports, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports |= {a.name for a in node.names}
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imports.add(node.module)
            imports |= {f"{node.module}.{a.name}" for a in node.names}
            names |= {a.asname or a.name for a in node.names if a.name != "*"}
    return {"imports": frozenset(imports), "import_names": frozenset(names)}


# ---- the master's cells -----------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One code cell of the master, as the context sees it."""

    position: int  # its index among the notebook's cells
    kind: str  # "setup", "demo", "answer" or "test"
    grade_id: str | None
    source: str
    names: Names
    hidden: tuple[str, ...] = ()  # helper modules it imports that the probe's jail hides

    @property
    def label(self) -> str:
        return context_label(self.position)


def context_label(position: int) -> str:
    """The file name a context cell's code is compiled under (never a cell of the student's:
    a graded name defined there counts as not written in the answer cell)."""
    return f"<notebook cell {position + 1}>"


@dataclass
class Plan:
    """What one probe runs after the setup cells, and the names no run can give."""

    steps: list[tuple[str, str, str]]  # ("context", label, source) | ("answer", grade_id, src)
    cells: list[int]  # positions of the context cells run
    unavailable: dict[str, str]  # name -> why the probe does not define it (the answer reads it)


class Context:
    """The master's code cells, analysed once; `plan` slices them for one probe."""

    def __init__(self, nb: NotebookNode, hidden_modules: Iterable[str] = ()) -> None:
        hidden = tuple(hidden_modules)
        self.cells: list[Cell] = []
        for position, c in enumerate(nb.cells):
            if c.get("cell_type") != "code":
                continue
            if is_answer(c):
                kind = "answer"
            elif is_test(c):
                kind = "test"
            elif is_setup(c):
                kind = "setup"
            else:
                kind = "demo"
            src = source(c)
            names = analyse(src, limit=10**7)
            imports_hidden = tuple(
                m for m in hidden if any(i == m or i.startswith(m + ".") for i in names.imports)
            )
            self.cells.append(Cell(position, kind, grade_id(c), src, names, imports_hidden))
        self.position = {c.grade_id: c.position for c in self.cells if c.kind == "answer"}
        self._drawing_defs = self._drawing_definitions()

    def _drawing_definitions(self) -> set[str]:
        """Functions and classes of the master that draw when called (transitively)."""
        drawing: set[str] = set()
        bodies: dict[str, frozenset[str]] = {}
        for c in self.cells:
            if c.kind in ("setup", "demo"):
                drawing |= c.names.drawing_defs
                bodies.update(c.names.def_calls)
        changed = True
        while changed:
            changed = False
            for name, callees in bodies.items():
                if name not in drawing and callees & drawing:
                    drawing.add(name)
                    changed = True
        return drawing

    def demo_sources(self, positions: Iterable[int]) -> list[str]:
        wanted = set(positions)
        return [c.source for c in self.cells if c.position in wanted]

    # ---- one probe ------------------------------------------------------------------------

    def plan(
        self,
        answers: list[tuple[str, str]],
        target: str,
        added: Iterable[str] = (),
        parsed: dict[str, Names] | None = None,
    ) -> Plan:
        """The steps of one probe of `target`: `answers` (grade_id, source) are the student's
        answer cells it runs, in notebook order; `added`: names the student's own added cells
        define (for the words of `unavailable`); `parsed`: a cache of analysed answers."""
        parsed = {} if parsed is None else parsed
        student: dict[int, Names] = {}
        for gid, src in answers:
            if gid not in self.position:
                continue
            key = f"{gid}\0{src}"
            if key not in parsed:
                parsed[key] = analyse(src)
            student[self.position[gid]] = parsed[key]
        slicer = _Slicer(self, student, self._drawing_defs)
        for gid, _ in answers:
            if gid in self.position:
                position = self.position[gid]
                for name in student[position].reads:
                    slicer.need(name, position, gid == target)
        chosen = sorted(slicer.included)
        steps: list[tuple[str, str, str]] = []
        by_position = {c.position: c for c in self.cells}
        answer_at = {self.position[g]: (g, s) for g, s in answers if g in self.position}
        for position in sorted([*chosen, *answer_at]):
            if position in answer_at:
                gid, src = answer_at[position]
                steps.append(("answer", gid, src))
            else:
                cell = by_position[position]
                steps.append(("context", cell.label, cell.source))
        unavailable = {name: slicer.why(name, added) for name in sorted(slicer.missing)}
        return Plan(steps, chosen, unavailable)


class _Slicer:
    """The fixpoint of one plan: cells included for names, in-place changes and the RNG."""

    def __init__(self, context: Context, student: dict[int, Names], drawing: set[str]) -> None:
        self.context, self.student, self.drawing = context, student, drawing
        self.included: set[int] = set()
        self.missing: set[str] = set()  # names the target reads that no run can give
        self.cells = list(context.cells)
        self.setup_names = {n for c in self.cells if c.kind == "setup" for n in c.names.defines}
        self.helper_names = {
            n for c in self.cells if c.kind == "setup" for n in c.names.import_names
        }

    def _defines(self, cell: Cell) -> frozenset[str]:
        if cell.kind == "answer":
            names = self.student.get(cell.position)
            return names.defines if names is not None else frozenset()
        return cell.names.defines

    def definer(self, name: str, before: int) -> Cell | None:
        """The last cell above `before` that the kernel would have run and that binds `name`."""
        for cell in reversed(self.cells):
            if cell.position >= before or cell.kind == "test":
                continue
            if cell.kind == "answer" and cell.position not in self.student:
                continue
            if name in self._defines(cell):
                return cell
        return None

    def need(self, name: str, before: int, target: bool) -> None:
        if name in BUILTINS:
            return
        cell = self.definer(name, before)
        if cell is None or cell.hidden:
            if target:
                self.missing.add(name)
            return
        if cell.kind in ("setup", "answer"):
            return
        self.include(cell, before)
        for other in self.cells:  # cells that may change it in place before it is read
            if cell.position < other.position < before and other.kind == "demo":
                if self._changes(other, name):
                    self.include(other, before)

    def _changes(self, cell: Cell, name: str) -> bool:
        names = cell.names
        if name in names.mutates:
            return True
        return any(
            arg.split(":", 1)[1] == name and arg.split(":", 1)[0] not in BUILTINS
            for arg in names.arguments
        )

    def include(self, cell: Cell, reader: int) -> None:
        if cell.position in self.included or cell.hidden:
            return
        self.included.add(cell.position)
        for name in cell.names.reads:
            self.need(name, cell.position, False)
        if self._draws(cell) and not cell.names.seeds_first:
            self._generator_before(cell.position)

    def _draws(self, cell: Cell) -> bool:
        """Does running this cell draw from torch's generator (itself or through a call)?"""
        if cell.names.draws:
            return True
        for callee in cell.names.calls:
            if callee in BUILTINS or callee in cell.names.defs and callee not in self.drawing:
                continue
            if callee in self.drawing or callee in self.helper_names:
                return True
            definer = self.definer(callee, cell.position)
            if definer is None or definer.kind == "answer":
                return True  # a student's function, or unknown: it may draw
            if definer.kind == "demo" and callee not in definer.names.defs:
                return True  # a variable of the notebook called: a module's forward may draw
        return False

    def _generator_before(self, position: int) -> None:
        """Include every cell that drew from the generator since it was last reseeded."""
        for cell in reversed(self.cells):
            if cell.position >= position or cell.kind != "demo":
                continue
            if cell.names.seeds or self._draws(cell):
                self.include(cell, position)
            if cell.names.seeds_first or (cell.names.seeds and not self._draws(cell)):
                return

    def why(self, name: str, added: Iterable[str]) -> str:
        """In words: why the probe cannot give the answer this name."""
        above = [c for c in self.cells if name in c.names.defines and c.kind in ("demo", "setup")]
        tests = [c for c in self.cells if c.kind == "test" and name in c.names.defines]
        if name in set(added):
            return (
                "only a cell you added defines it, and the grader runs the notebook's own "
                "cells and your answer cells, never cells you added"
            )
        if any(c.hidden for c in above):
            return (
                "the notebook defines it in a cell that hands out later answers, which the "
                "grader does not run before yours"
            )
        if tests:
            return "only a self-check cell defines it, and the grader does not run self-checks"
        if above:
            return "the notebook defines it only below this answer"
        return "no cell of the notebook defines it"
