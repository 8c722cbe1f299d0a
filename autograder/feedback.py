"""The page a student reads: score and named mistakes first, then the graded notebook.

The first screen says who, which notebook, the score, the status in words, and a table of the
graded cells with the points of every check and each named mistake in words with a link to the
cell to look at. Below it, the graded notebook as nbconvert renders it (images embedded), with
each test cell's output replaced by the trusted report and hidden tests cleared by nbgrader's
ClearHiddenTests (then LimitOutput), so the hidden tests' code never reaches the page.
"""

from __future__ import annotations

import copy
import html
import re
from functools import lru_cache
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import new_output

from autograder.catalog import describe
from autograder.checks.base import CellResult
from autograder.contract import test_cell_id
from autograder.notebook_io import grade_id, is_test

STATUS_WORDS = {
    "ok": "Your notebook ran from top to bottom.",
    "timeout": (
        "Your notebook did not finish in time ({detail}). Each answer cell was still graded "
        "on its own, so the points below are what your answers earned."
    ),
    "error": (
        "The Python kernel running your notebook stopped ({detail}). Each answer cell was "
        "still graded on its own, so the points below are what your answers earned."
    ),
    "invalid": (
        "This file could not be read as a notebook ({detail}), so nothing in it could be "
        "graded. Open it in Jupyter, save it again and resubmit."
    ),
    "missing": "This notebook was not submitted.",
}
HIDDEN_MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "grade_in_notebook")

_CSS = """
.grader-summary{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:60rem;
margin:1.5rem auto 2rem auto;padding:0 1rem;line-height:1.45;color:#1b1b1b}
.grader-summary h1{font-size:1.5rem;margin:.2rem 0 .6rem 0}
.grader-summary .score{font-size:1.25rem;font-weight:600}
.grader-summary table{border-collapse:collapse;width:100%;margin:.8rem 0}
.grader-summary th,.grader-summary td{border-bottom:1px solid #ddd;padding:.3rem .5rem;
text-align:left;vertical-align:top}
.grader-summary tr.cell th{background:#f3f5f8}
.grader-summary .ok{color:#17723a;font-weight:600}
.grader-summary .fail{color:#b3261e;font-weight:600}
.grader-summary a{color:#1a5fb4;text-decoration:underline}
.grader-summary .mistake{background:#fff6e5}
.grader-summary .status-ok{color:#17723a}.grader-summary .status-bad{color:#b3261e}
.grader-summary ul.notes{color:#444;font-size:.92rem}
.grader-summary .rule{margin-top:1.5rem;border-top:3px solid #888;padding-top:.4rem;color:#555}
"""


def _fmt(x: float) -> str:
    return f"{x:g}"


def summary_html(state: dict[str, Any]) -> str:
    """The first screen of the feedback page."""
    e = html.escape
    status = state["status"]
    words = STATUS_WORDS.get(status, status).format(detail=e(state.get("detail") or "no detail"))
    klass = "status-ok" if status == "ok" else "status-bad"
    parts = [
        '<section class="grader-summary">',
        f"<h1>Feedback · {e(state['notebook'])}</h1>",
        f"<p>Student: <b>{e(state['student'])}</b></p>",
        f'<p class="score">Score: {_fmt(state["score"])} / {_fmt(state["max_score"])}</p>',
        f'<p>Status: <b class="{klass}">{e(status)}</b>. {words}</p>',
    ]
    cells = state.get("cells", [])
    if cells and status not in ("missing", "invalid") and not state.get("synthetic"):
        parts.append("<table><thead><tr><th>Graded cell / check</th><th>Points</th></tr></thead>")
        parts.append("<tbody>")
        for cell in cells:
            result = CellResult.from_dict(cell["result"])
            anchor = cell.get("anchor") or cell["grade_id"]
            link = f'<a href="#{e("cell-id=" + anchor)}">{e(cell["grade_id"])}</a>'
            parts.append(
                f'<tr class="cell"><th>{link}</th><th>{_fmt(cell["score"])} / '
                f"{_fmt(cell['max_score'])}</th></tr>"
            )
            if result.problem:
                parts.append(
                    f'<tr><td colspan="2">Could not grade the answer: {e(result.problem)}</td></tr>'
                )
            for check in result.checks:
                mark = (
                    '<span class="ok">passed</span>'
                    if check.passed
                    else '<span class="fail">failed</span>'
                )
                detail = (
                    f"<br><small>{e(check.detail)}</small>"
                    if check.detail and not check.passed
                    else ""
                )
                parts.append(
                    f"<tr><td>{mark} · {e(check.name)}{detail}</td>"
                    f"<td>{_fmt(check.earned)} / {_fmt(check.points)}</td></tr>"
                )
            for mistake in result.mistakes:
                parts.append(
                    f'<tr class="mistake"><td colspan="2"><b>Likely mistake</b> '
                    f"(<code>{e(mistake)}</code>), look at cell {link}: {e(describe(mistake))}"
                    "</td></tr>"
                )
        parts.append("</tbody></table>")
    notes = state.get("notes") or []
    if notes:
        parts.append("<p>What the grader did with your file:</p><ul class='notes'>")
        parts.extend(f"<li>{e(n)}</li>" for n in notes)
        parts.append("</ul>")
    parts.append(
        '<p class="rule">Your notebook as it was graded:</p>'
        if status not in ("invalid", "missing") and not state.get("synthetic")
        else ""
    )
    parts.append("</section>")
    return "\n".join(parts)


def prepare_notebook(nb: NotebookNode, results: dict[str, CellResult]) -> NotebookNode:
    """Test cells show the trusted report; hidden tests cleared; long outputs limited."""
    from nbgrader.preprocessors import ClearHiddenTests, LimitOutput

    nb = copy.deepcopy(nb)
    clear = ClearHiddenTests(enforce_metadata=False)
    prefix = test_cell_id("")
    for index, cell in enumerate(nb.cells):
        gid = grade_id(cell)
        if not (is_test(cell) and gid):
            continue
        answer = gid[len(prefix) :] if gid.startswith(prefix) else gid
        if answer in results:
            cell.outputs = [new_output("stream", name="stdout", text=results[answer].render())]
        else:
            cell.outputs = []
        clear.preprocess_cell(cell, {}, index)
        if any(marker in cell.source for marker in HIDDEN_MARKERS):  # never show hidden tests
            cell.source = "# (hidden tests)"
    nb, _ = LimitOutput(max_lines=200, max_traceback=40).preprocess(nb, {})
    return nb


@lru_cache(maxsize=1)
def _exporter() -> Any:
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab")


def notebook_html(nb: NotebookNode, title: str) -> str:
    nb = copy.deepcopy(nb)
    nb.metadata["title"] = title
    body, _ = _exporter().from_notebook_node(nb)
    return body


def page(state: dict[str, Any], nb: NotebookNode | None = None) -> str:
    """The whole feedback page; `nb` is the executed, prepared notebook (None: summary only)."""
    title = f"{state['student']} · {state['notebook']}"
    summary = summary_html(state)
    if nb is not None:
        body = notebook_html(nb, title)
        match = re.search(r"<body[^>]*>", body)
        if match:
            body = body[: match.end()] + summary + body[match.end() :]
            return body.replace("</head>", f"<style>{_CSS}</style></head>", 1)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>"
        f"<body>{summary}</body></html>\n"
    )
