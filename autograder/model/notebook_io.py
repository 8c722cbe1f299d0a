"""Read notebooks and pick out their parts: setup cells, answer cells, test cells."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

SETUP_TAG = "setup"
_SOLUTION_LINE = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


def read(path: str | Path) -> NotebookNode:
    return nbformat.read(str(path), as_version=4)


def nbgrader_meta(cell: Any) -> dict[str, Any]:
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    nbg = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return nbg if isinstance(nbg, dict) else {}


def grade_id(cell: Any) -> str | None:
    gid = nbgrader_meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def is_answer(cell: Any) -> bool:
    return bool(nbgrader_meta(cell).get("solution"))


def is_test(cell: Any) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution") and cell.get("cell_type") == "code"


def is_setup(cell: Any) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return cell.get("cell_type") == "code" and isinstance(tags, list) and SETUP_TAG in tags


def source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def strip_solution_markers(src: str) -> str:
    """The instructor's solution as a student would hand it in: without nbgrader's markers."""
    return "\n".join(line for line in src.splitlines() if not _SOLUTION_LINE.match(line))


def setup_sources(nb: NotebookNode) -> list[str]:
    """Sources of the cells tagged 'setup': the trusted prelude every answer may rely on."""
    return [source(c) for c in nb.cells if is_setup(c)]


def answer_cells(nb: NotebookNode) -> dict[str, NotebookNode]:
    """grade_id -> answer cell, in notebook order."""
    return {gid: c for c in nb.cells if is_answer(c) and (gid := grade_id(c))}


def solution_answers(nb: NotebookNode) -> dict[str, str]:
    """grade_id -> the solution's answer source, markers removed (code cells only)."""
    return {
        gid: strip_solution_markers(source(c))
        for gid, c in answer_cells(nb).items()
        if c.cell_type == "code"
    }


def python_source(src: str) -> str:
    """Cell source as plain Python: IPython magics become get_ipython() calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return TransformerManager().transform_cell(src)
    except Exception:  # leave it to compile() to report the syntax error
        return src


class _NoIPython:
    """Stand-in for get_ipython() outside a kernel: magics and shell escapes do nothing."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def exec_cell(src: str, namespace: dict[str, Any], label: str = "<cell>") -> None:
    """Execute one cell's source in `namespace`, as a kernel would (minus display)."""
    namespace.setdefault("get_ipython", _NoIPython)
    namespace.setdefault("__name__", "__main__")
    code = compile(python_source(src), label, "exec")
    exec(code, namespace)  # noqa: S102 - running notebook code is the point
