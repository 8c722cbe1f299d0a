"""Rebuild the notebook the grader runs: the trusted master with the student's answers in it.

The master (`solutions/<nb>`, hidden tests included) gives every cell, in its order. Only the
answer cells (nbgrader `solution: true`) take their source from the submission:

1. the student's cell with the same grade_id; with several, the last one that is not the
   untouched release stub;
2. when metadata was stripped or the answer was written in an added cell instead of the stub:
   for code, the last student code cell that defines the answer's contract names (found with
   `ast`); for a written answer, the student's markdown cells where it stands (right after its
   question, else right before the master cell that follows it);
3. otherwise the answer is missing (it scores 0; a note says so).

Test, setup and every other cell come from the master, so edited, neutralised, deleted or
reordered test cells change nothing, and cells the student added are not run. Hidden tests are
removed from the run (the scores come from the sandbox, never from the kernel).
"""

from __future__ import annotations

import ast
import copy
import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from nbformat import NotebookNode
from traitlets.config import Config

from autograder.course.nbgrader_settings import configure
from autograder.course.stubs import released
from autograder.model.contract import CONTRACT
from autograder.model.notebook_io import (
    grade_id,
    is_answer,
    is_test,
    nbgrader_meta,
    python_source,
    source,
)
from autograder.model.settings import LIMITS

MISSING_ANSWER = "# (this answer cell is missing from the submission)"
_HIDDEN = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS.*?END HIDDEN TESTS[^\n]*(\n|$)", re.S | re.M)


@dataclass
class Rebuilt:
    """The graded notebook and where each answer came from."""

    notebook: NotebookNode
    answers: dict[str, str | None]  # code answer grade_id -> source (None: missing), master order
    how: dict[str, str] = field(default_factory=dict)  # grade_id -> grade_id | names | missing
    notes: list[str] = field(default_factory=list)
    added_names: frozenset[str] = frozenset()  # names only the student's own added cells define


def normalise(src: str) -> str:
    """Source compared modulo trailing spaces and blank lines at either end."""
    return "\n".join(line.rstrip() for line in src.strip("\n").splitlines()).strip()


def defined_names(src: str, limit: int = LIMITS.match_cell_chars) -> set[str]:
    """Names a cell binds at module level (defs, classes, assignments, imports).

    Empty for a cell longer than `limit` or one that cannot be parsed in any way (deep
    nesting raises RecursionError or MemoryError in the parser: student input is hostile).
    """
    if len(src) > limit:
        return set()
    try:
        tree = ast.parse(python_source(src))
    except Exception:  # SyntaxError, ValueError, RecursionError, MemoryError, ...
        return set()
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                targets(elt)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets(node.target)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    names.add((alias.asname or alias.name).split(".")[0])
            elif isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []) or [])
                for handler in getattr(node, "handlers", []) or []:
                    visit(handler.body)

    try:
        visit(tree.body)
    except RecursionError:
        return set()
    return names


def answer_names(grade_id_: str, master_source: str = "") -> tuple[str, ...]:
    """The names an answer cell must define: the contract's, else those the master defines."""
    for cells in CONTRACT.values():
        if grade_id_ in cells:
            return cells[grade_id_]
    return tuple(sorted(defined_names(master_source)))


def release_stubs(master: NotebookNode) -> dict[str, str]:
    """grade_id -> the answer cell as released to students.

    The same text the course's release writes (`autograder.course.stubs`; a test holds the two to
    each other), without importing nbgrader: the rebuild sits on the path to the kernel's start.
    """
    settings = configure(Config()).ClearSolutions
    code_stub, text_stub = settings.code_stub["python"], settings.text_stub
    stubs = {}
    for cell in master.cells:
        if is_answer(cell) and (gid := grade_id(cell)):
            code = cell.cell_type == "code"
            stubs[gid] = released(source(cell), code, code_stub, text_stub)[0]
    return stubs


def strip_hidden_tests(src: str) -> str:
    return _HIDDEN.sub("", src).rstrip("\n")


def _cells(nb: Any) -> list[dict[str, Any]]:
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def rebuild(master: NotebookNode, student: Any, stubs: dict[str, str] | None = None) -> Rebuilt:
    """The graded notebook: master cells in master order, answers from `student`."""
    stubs = release_stubs(master) if stubs is None else stubs
    stub_norm = {gid: normalise(s) for gid, s in stubs.items()}
    master_ids = {gid for c in master.cells if (gid := grade_id(c))}
    master_answers = [(gid, c) for c in master.cells if is_answer(c) and (gid := grade_id(c))]
    answer_ids = {gid for gid, _ in master_answers}
    # Unchanged copies of the master's other cells never count as answers.
    fixed = {normalise(source(c)) for c in master.cells if not is_answer(c)}

    cells = _cells(student)
    by_id: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, c in enumerate(cells):
        if (gid := grade_id(c)) in answer_ids:
            by_id.setdefault(gid, []).append((i, c))

    def free_code_cell(c: dict[str, Any]) -> bool:
        gid = grade_id(c)
        return (
            c.get("cell_type") == "code"
            and (gid is None or gid not in master_ids or gid in answer_ids)
            and normalise(source(c)) not in fixed
        )

    nb = copy.deepcopy(master)
    result = Rebuilt(nb, {})
    for gid, mcell in master_answers:
        src, how = _answer(gid, mcell, cells, by_id.get(gid, []), stub_norm, free_code_cell, result)
        if how == "missing" and mcell.cell_type == "markdown":
            src, how = _written_in_place(master, gid, cells, fixed, answer_ids, result)
        result.how[gid] = how
        code = mcell.cell_type == "code"
        if code:
            result.answers[gid] = src
        for cell in nb.cells:
            if grade_id(cell) == gid and is_answer(cell):
                cell.source = src if src is not None else (MISSING_ANSWER if code else "")
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            if is_test(cell):
                cell.source = strip_hidden_tests(source(cell))
    result.added_names = _added_names(cells, fixed, result.answers)
    return result


def _added_names(
    cells: list[dict[str, Any]], fixed: set[str], answers: dict[str, str | None]
) -> frozenset[str]:
    """Names bound by the student's code cells that are neither a graded answer nor a copy of
    a master cell: cells the grader never runs (said so when an answer reads such a name)."""
    graded = {normalise(src) for src in answers.values() if src is not None}
    names: set[str] = set()
    for c in cells:
        text = normalise(source(c))
        if c.get("cell_type") == "code" and text not in fixed and text not in graded:
            names |= defined_names(source(c))
    return frozenset(names)


def _answer(
    gid: str,
    mcell: NotebookNode,
    cells: list[dict[str, Any]],
    with_id: list[tuple[int, dict[str, Any]]],
    stub_norm: dict[str, str],
    free_code_cell: Any,
    result: Rebuilt,
) -> tuple[str | None, str]:
    """(the student's source of answer `gid` or None, how it was found); notes go to result."""
    code = mcell.cell_type == "code"
    found = [(i, c) for i, c in with_id if not code or c.get("cell_type") == "code"]
    edited = [(i, c) for i, c in found if normalise(source(c)) != stub_norm.get(gid)]
    chosen = edited[-1] if edited else (found[-1] if found else None)
    if len(found) > 1:
        where = ", ".join(f"#{i + 1}" for i, _ in found)
        pick = f"#{chosen[0] + 1}" if chosen else "none"
        result.notes.append(
            f"{len(found)} cells carry the answer id {gid} (cells {where}); graded cell "
            f"{pick}, the last one that differs from the empty stub."
        )
    how = "grade_id"
    if code and (chosen is None or not edited):
        names = set(answer_names(gid, source(mcell)))
        scored = [
            (len(names & defined_names(source(c))), i, c)
            for i, c in enumerate(cells)
            if free_code_cell(c) and grade_id(c) != gid
        ]
        best = max((s for s in scored if s[0] > 0), key=lambda s: (s[0], s[1]), default=None)
        if best is not None:
            chosen, how = (best[1], best[2]), "names"
            why = "its answer id was lost" if not found else "the answer cell still holds the stub"
            result.notes.append(
                f"{gid}: graded cell #{best[1] + 1}, which defines "
                f"{', '.join(sorted(names & defined_names(source(best[2]))))} ({why})."
            )
    if chosen is None:
        result.notes.append(
            f"{gid}: no answer found (the cell was deleted or lost its id, and no cell "
            f"defines {', '.join(answer_names(gid, source(mcell)))}); it scores 0."
            if code
            else f"{gid}: the written answer was not found (its cell was deleted or lost its id)."
        )
        return None, "missing"
    return source(chosen[1]), how


def _written_in_place(
    master: NotebookNode,
    gid: str,
    cells: list[dict[str, Any]],
    fixed: set[str],
    answer_ids: set[str],
    result: Rebuilt,
) -> tuple[str | None, str]:
    """A written answer whose cell lost its id, found where it stands: the student's markdown
    cells right after the question (the master cell before the answer), else right before the
    master cell that follows it. (None, "missing") when neither is found."""
    index = next(i for i, c in enumerate(master.cells) if grade_id(c) == gid and is_answer(c))
    before = next((c for c in reversed(master.cells[:index]) if not is_answer(c)), None)
    after = next((c for c in master.cells[index + 1 :] if not is_answer(c)), None)
    texts = [normalise(source(c)) for c in cells]

    def answer_cell(c: dict[str, Any], edge: NotebookNode | None) -> bool:
        """A markdown cell of the student's: not a master cell, nor another answer, nor an
        edit of the master cell `edge` at the far end of the walk."""
        other = grade_id(c)
        text = normalise(source(c))
        return (
            c.get("cell_type") == "markdown"
            and text not in fixed
            and (edge is None or not _resembles(text, source(edge)))
            and (other is None or other == gid or other not in answer_ids)
        )

    found: list[dict[str, Any]] = []
    where = ""
    if before is not None and normalise(source(before)) in texts:
        for c in cells[texts.index(normalise(source(before))) + 1 :]:
            if not answer_cell(c, after):
                break
            found.append(c)
        where = "after its question"
    if not found and after is not None and normalise(source(after)) in texts:
        for c in reversed(cells[: texts.index(normalise(source(after)))]):
            if not answer_cell(c, before):
                break
            found.insert(0, c)
        where = "before the text that follows it"
    if not found:
        return None, "missing"
    if result.notes and result.notes[-1].startswith(f"{gid}: the written answer was not found"):
        result.notes.pop()
    result.notes.append(
        f"{gid}: the written answer was found {where} (its cell had lost its answer id)."
    )
    return "\n\n".join(source(c) for c in found), "place"


def _resembles(text: str, master_source: str, limit: int = 4_000) -> bool:
    """True when `text` is (an edit of) the master cell's text: most of it is kept."""
    theirs = normalise(master_source)
    if not theirs or len(text) > limit or len(theirs) > limit:
        return False
    return difflib.SequenceMatcher(None, text, theirs, autojunk=False).ratio() >= 0.6


def match_score(nb: Any, master: NotebookNode, limit: int = LIMITS.match_cell_chars) -> int:
    """How strongly a (possibly renamed) submission looks like `master`: shared answer ids
    count 2, contract names defined in its code cells count 1."""
    answers = {gid: c for c in master.cells if is_answer(c) and (gid := grade_id(c))}
    cells = _cells(nb)
    ids = {grade_id(c) for c in cells}
    score = 2 * len(ids & set(answers))
    defined: set[str] = set()
    for c in cells:
        if c.get("cell_type") == "code":
            defined |= defined_names(source(c), limit)
    for gid, c in answers.items():
        if c.cell_type == "code":
            score += len(set(answer_names(gid, source(c))) & defined)
    return score


def has_nbgrader_metadata(nb: Any) -> bool:
    return any(nbgrader_meta(c) for c in _cells(nb))
