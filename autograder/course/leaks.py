"""Does a folder give answers away? A scan for solutions, hidden tests and grader references.

What counts as an answer ("secret"), each tied to the notebook whose answers it holds:
- the body of every solution region (`### BEGIN SOLUTION` ... `### END SOLUTION`) and of
  every written (markdown) solution cell of solutions/*.ipynb;
- every hidden test region (`### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS`);
- the body of every function in the grader's checks (its references), tied to no notebook;
- a definition (def, class, assignment) of a contract name anywhere but in that notebook's
  own answer stub: a "reference" of an earlier answer shipped in a later notebook or helper.

Code is compared as syntax, not text: comments, docstrings, whitespace and (for bodies large
enough to be distinctive) the names of variables do not matter. Prose is compared with its
whitespace collapsed. Secrets of the notebooks in `allowed` (already graded) are not leaks.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.model.contract import CONTRACT
from autograder.model.notebook_io import nbgrader_meta, python_source, source

MIN_RENAMED = 16  # AST nodes a body needs before renamed copies of it count as a leak
MIN_EXACT = 6  # below this a body is too common to be a secret
MIN_TEXT = 40  # characters of prose before it counts
_REGION = {
    "solution": re.compile(r"(?ms)^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION"),
    "hidden test": re.compile(
        r"(?ms)^[ \t]*### BEGIN HIDDEN TESTS[ \t]*\n(.*?)^[ \t]*### END HIDDEN TESTS"
    ),
}
_MARKERS = re.compile(r"### (BEGIN|END) (SOLUTION|HIDDEN TESTS)")
_GRADER_IMPORT = re.compile(r"(?m)^\s*(from|import)\s+autograder\b")


@dataclass(frozen=True)
class Secret:
    """Something a student tree must not contain, and the notebook it gives away ("" = any)."""

    notebook: str
    label: str
    code: tuple[int, str] | None = None  # (statements, canonical form) of a code body
    text: str = ""  # normalised prose


@dataclass(frozen=True)
class Leak:
    path: str
    where: str
    what: str
    notebook: str

    def __str__(self) -> str:
        gives = f" (an answer of {self.notebook})" if self.notebook else ""
        return f"{self.path} {self.where}: {self.what}{gives}"


# ---- canonical forms ------------------------------------------------------------------------


_SKIP_FIELDS = {"ctx", "type_comment", "type_params", "kind"}


def _dump(node: object, names: dict[str, str] | None) -> str:
    """A compact structural dump; with `names`, local names are renamed by first use."""
    if isinstance(node, list):
        return "[" + ",".join(_dump(n, names) for n in node) + "]"
    if not isinstance(node, ast.AST):
        return repr(node)
    if isinstance(node, ast.Name | ast.arg):
        name = node.id if isinstance(node, ast.Name) else node.arg
        return f"N({_rename(name, names)})"
    parts = []
    for field, value in ast.iter_fields(node):
        if field in _SKIP_FIELDS or field == "annotation" or field == "returns":
            continue
        if field == "name" and isinstance(value, str):
            value = _rename(value, names)
        if field == "body" and isinstance(node, ast.FunctionDef | ast.ClassDef):
            value = _without_docstring(value) or value
        parts.append(_dump(value, names))
    return f"{type(node).__name__}({','.join(parts)})"


def _rename(name: str, names: dict[str, str] | None) -> str:
    return name if names is None else names.setdefault(name, f"v{len(names)}")


def size(stmts: Iterable[ast.stmt]) -> int:
    return sum(1 for stmt in stmts for _ in ast.walk(stmt))


def canonical(stmts: list[ast.stmt], rename: bool) -> str:
    names: dict[str, str] | None = {} if rename else None
    return "|".join(_dump(stmt, names) for stmt in stmts)


def code_secret(notebook: str, label: str, stmts: list[ast.stmt]) -> Secret | None:
    """A code body as a secret, renamed when it is large enough to be distinctive."""
    n = size(stmts)
    if n < MIN_EXACT:
        return None
    return Secret(notebook, label, (len(stmts), canonical(stmts, rename=n >= MIN_RENAMED)))


def normal_text(text: str) -> str:
    return " ".join(text.split()).lower()


def parse(src: str) -> list[ast.stmt] | None:
    try:
        return ast.parse(python_source(textwrap.dedent(src))).body
    except (SyntaxError, ValueError):
        return None


# ---- what is secret -------------------------------------------------------------------------


def _cell_secrets(notebook: str, cell: nbformat.NotebookNode) -> Iterator[Secret]:
    src, meta = source(cell), nbgrader_meta(cell)
    gid = meta.get("grade_id", "?")
    if cell.cell_type == "markdown" and meta.get("solution"):
        if len(normal_text(src)) >= MIN_TEXT:
            yield Secret(notebook, f"written answer {gid}", text=normal_text(src))
        return
    if cell.cell_type != "code":
        return
    for kind, pattern in _REGION.items():
        for region in pattern.findall(src):
            yield from _region_secrets(notebook, f"{kind} of {gid}", region)


def _region_secrets(notebook: str, label: str, region: str) -> Iterator[Secret]:
    stmts = parse(region)
    if stmts is None:
        if len(normal_text(region)) >= MIN_TEXT:
            yield Secret(notebook, label, text=normal_text(region))
        return
    whole = code_secret(notebook, label, stmts)
    if whole:
        yield whole
    for stmt in stmts:  # each definition of the region on its own, and its body
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            parts = [_without_docstring(stmt.body)] + ([[stmt]] if len(stmts) > 1 else [])
            for part in parts:
                found = code_secret(notebook, f"{label} ({stmt.name})", part)
                if found:
                    yield found


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            return body[1:]
    return body


def solution_secrets(solutions: Path) -> list[Secret]:
    """Every solution body, written answer and hidden test of the instructor notebooks."""
    secrets: list[Secret] = []
    for path in sorted(solutions.glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        for cell in nb.cells:
            secrets.extend(_cell_secrets(path.name, cell))
    return list(dict.fromkeys(secrets))


def _notebook_of_module(stem: str) -> str:
    """checks/nb05.py holds notebook 05's references; any other module, every notebook's."""
    match = re.fullmatch(r"nb(\d\d)", stem)
    return next((nb for nb in CONTRACT if match and nb.startswith(match[1])), "")


def reference_secrets(checks: Path) -> list[Secret]:
    """The body of every function of the grader's checks (references, variants, judges)."""
    secrets: list[Secret] = []
    for path in sorted(checks.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        owner = _notebook_of_module(path.stem)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                label = f"grader reference {path.name}:{node.name}"
                found = code_secret(owner, label, _without_docstring(node.body))
                if found and size(node.body) >= MIN_RENAMED:
                    secrets.append(found)
    return list(dict.fromkeys(secrets))


# ---- definitions of contract names ----------------------------------------------------------

CONTRACT_OWNER = {
    name: nb for nb, cells in CONTRACT.items() for ns in cells.values() for name in ns
}


def is_stub(stmt: ast.stmt) -> bool:
    """An answer stub: it raises NotImplementedError, or every method of the class does."""
    if not isinstance(stmt, ast.FunctionDef | ast.ClassDef):
        return False
    body = [s for s in _without_docstring(stmt.body) if not isinstance(s, ast.Pass)]
    if any(_raises_not_implemented(s) for s in body):
        return True
    return (
        isinstance(stmt, ast.ClassDef)
        and bool(body)
        and all(isinstance(s, ast.FunctionDef) and is_stub(s) for s in body)
    )


def _raises_not_implemented(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Raise) or stmt.exc is None:
        return False
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def defined_contract_names(stmts: list[ast.stmt]) -> Iterator[tuple[str, bool]]:
    """(contract name, is a stub) for each definition of a contract name, at any depth."""
    for node in (n for stmt in stmts for n in ast.walk(stmt)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name in CONTRACT_OWNER:
                yield node.name, is_stub(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id in CONTRACT_OWNER:
                        yield name.id, False


# ---- scanning -------------------------------------------------------------------------------


class Scanner:
    """Finds the secrets of the notebooks not in `allowed` in code and prose."""

    def __init__(self, secrets: list[Secret], allowed: Iterable[str] = ()) -> None:
        allowed = set(allowed)
        live = [s for s in secrets if s.notebook not in allowed]
        self.allowed = allowed
        self.code = {s.code: s for s in live if s.code}
        self.sizes = sorted({s.code[0] for s in live if s.code})
        self.texts = [s for s in live if s.text]
        self.min_size = MIN_EXACT

    def code_leaks(self, stmts: list[ast.stmt], stub_of: str = "") -> Iterator[tuple[str, str]]:
        """(what, notebook) found in parsed code; `stub_of`: the notebook whose stubs it holds."""
        for block in _blocks(stmts):
            sizes = [size([stmt]) for stmt in block]
            for n in self.sizes:
                for i in range(len(block) - n + 1):
                    nodes = sum(sizes[i : i + n])
                    if nodes < MIN_EXACT:
                        continue
                    window = block[i : i + n]
                    hit = self.code.get((n, canonical(window, rename=nodes >= MIN_RENAMED)))
                    if hit:
                        yield hit.label, hit.notebook
        for name, stub in defined_contract_names(stmts):
            owner = CONTRACT_OWNER[name]
            if owner not in self.allowed and not (stub and owner == stub_of):
                yield f"a definition of {name}", owner

    def text_leaks(self, text: str) -> Iterator[tuple[str, str]]:
        flat = normal_text(text)
        for secret in self.texts:
            if secret.text in flat:
                yield secret.label, secret.notebook
        if _MARKERS.search(text):
            yield "nbgrader's solution or hidden-test markers", ""
        if _GRADER_IMPORT.search(text):
            yield "an import of the grader (autograder)", ""


def _blocks(stmts: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """Every statement list: the module's, and each body nested in it."""
    yield stmts
    for stmt in stmts:
        for node in ast.walk(stmt):
            for field in ("body", "orelse", "finalbody"):
                body = getattr(node, field, None)
                if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                    yield body


def scan_notebook(path: Path, rel: str, scanner: Scanner) -> Iterator[Leak]:
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception:
        yield Leak(rel, "", "not a readable notebook", "")
        return
    for i, cell in enumerate(nb.cells):
        src, where = source(cell), f"cell {i}"
        found = list(scanner.text_leaks(src))
        if cell.cell_type == "code":
            stmts = parse(src)
            if stmts is not None:
                found += scanner.code_leaks(stmts, stub_of=path.name)
        for what, notebook in dict.fromkeys(found):
            yield Leak(rel, where, what, notebook)


def scan_tree(root: Path, scanner: Scanner) -> list[Leak]:
    """Every leak in the files under `root` (.git excluded)."""
    leaks: list[Leak] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(".git/"):
            continue
        if path.suffix == ".ipynb":
            leaks += scan_notebook(path, rel, scanner)
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            leaks.append(Leak(rel, "", "a binary file", ""))
            continue
        found = list(scanner.text_leaks(text))
        if path.suffix == ".py":
            stmts = parse(text)
            found += scanner.code_leaks(stmts) if stmts is not None else []
        leaks += [Leak(rel, "", what, nb) for what, nb in dict.fromkeys(found)]
    return leaks


# ---- an earlier answer shown in a later notebook's own cells ----------------------------------

MIN_SHOWN = 10  # AST nodes an expression of an answer needs before a copy of it counts


def _expressions(stmts: list[ast.stmt]) -> Iterator[tuple[ast.expr, str]]:
    """Each distinctive expression in `stmts`, with its canonical form (names kept)."""
    for node in (n for stmt in stmts for n in ast.walk(stmt)):
        if isinstance(node, ast.expr) and sum(1 for _ in ast.walk(node)) > MIN_SHOWN:
            yield node, _dump(node, None)


def answer_expressions(solutions: Path, notebook: str) -> dict[str, str]:
    """Canonical form -> grade_id, for each distinctive expression of `notebook`'s solutions."""
    nb = nbformat.read(str(solutions / notebook), as_version=4)
    found: dict[str, str] = {}
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        gid = nbgrader_meta(cell).get("grade_id", "?")
        for region in _REGION["solution"].findall(source(cell)):
            for _, form in _expressions(parse(region) or []):
                found.setdefault(form, gid)
    return found


def shown_answers(
    nb: nbformat.NotebookNode, rel: str, expressions: dict[str, str], shown: str
) -> Iterator[Leak]:
    """Each line of `nb`'s code cells that holds an expression of `shown`'s answers."""
    for i, cell in enumerate(c if c.cell_type == "code" else None for c in nb.cells):
        lines = source(cell).splitlines() if cell else []
        seen: set[int] = set()
        for node, form in _expressions((parse(source(cell)) or []) if cell else []):
            gid = expressions.get(form)
            if gid and node.lineno not in seen and node.lineno <= len(lines):
                seen.add(node.lineno)
                line = lines[node.lineno - 1].split("#")[0].strip()
                yield Leak(rel, f"cell {i}", f"`{line}` shows the answer of {gid}", shown)
