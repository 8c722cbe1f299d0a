"""The page a student reads: score and named mistakes first, then the graded notebook.

The summary (templates/feedback_summary.html.j2) says who, which notebook, the score, the
status in words and every graded cell's checks, each named mistake in words with a link to
the cell, and what the instructor gave by hand (points, comments, extra credit): after hand
grading, `with_hand_grading` renders the summary of an existing page again. Below it, the
graded notebook as nbconvert renders it with the course's template
(templates/nbconvert/feedback: the lab page without any script). Before rendering, each test
cell's output is replaced by the trusted report, hidden tests are cleared (nbgrader's
ClearHiddenTests), long sources and outputs are cut with a note (rendering stays inside the
notebook's time budget), widgets are dropped (their state and views are scripts; a view keeps
its text stand-in), and everything that came from student code is sanitised with
nbconvert's SanitizeHTML and nh3: no script, no event handler, no iframe, no javascript:
URL. A Content-Security-Policy meta tag forbids scripts and remote loads as a second wall, and
a page in which a check still finds active content is replaced by the summary alone.
"""

from __future__ import annotations

import copy
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from nbconvert import HTMLExporter
from nbconvert.filters.markdown import markdown2html
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import ClearHiddenTests, LimitOutput

from autograder.checks.base import CellResult
from autograder.checks.catalog import describe
from autograder.model.contract import test_cell_id
from autograder.model.enums import CellState, Reason, Status
from autograder.model.grades import NotebookGrade
from autograder.model.notebook_io import grade_id, is_answer, is_test
from autograder.model.settings import LIMITS, Limits
from autograder.publish.alt_text import describe_images
from autograder.publish.handgrading import NONE, Hand, Settled
from autograder.publish.sanitise import PROTOCOLS, clean, clean_metadata
from autograder.publish.wording import STUB, status_words

PAGES = LIMITS.pages

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; "
    "form-action 'none'; base-uri 'none'"
)
HIDDEN_MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "grade_in_notebook")
WIDGET_MIMES = (
    "application/vnd.jupyter.widget-view+json",
    "application/vnd.jupyter.widget-state+json",
)
STATUS_CLASSES = {Status.OK: "status-ok", Status.UNANSWERED: "status-wait"}  # else status-bad
SUMMARY_START, SUMMARY_END = "<!-- grader-summary -->", "<!-- /grader-summary -->"
ACTIVE_NOTE = "The notebook itself is not shown: it held active content."


def _fmt(x: float) -> str:
    return f"{x:g}"


@cache
def templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"])
    )
    env.globals.update(fmt=_fmt, describe=describe, stub_words=STUB)
    env.globals.update(Status=Status, CellState=CellState, Reason=Reason)
    return env


@cache
def css() -> str:
    return (TEMPLATES / "feedback.css").read_text()


@cache
def exporter() -> HTMLExporter:
    return HTMLExporter(
        template_name="feedback", extra_template_basedirs=[str(TEMPLATES / "nbconvert")]
    )


def summary_html(grade: NotebookGrade, notebook_shown: bool, hand: Hand = NONE) -> str:
    """The first screen of the feedback page, the instructor's hand grading applied, between
    two markers by which `with_hand_grading` finds it again."""
    status = grade.status
    klass = STATUS_CLASSES.get(status, "status-bad")
    rule = "Your notebook as it was graded:" if notebook_shown else ""
    html = (
        templates()
        .get_template("feedback_summary.html.j2")
        .render(
            grade=grade,
            settled=Settled(grade, hand),
            status_class=klass,
            status_label=status,
            status_words=status_words(grade),
            show_cells=bool(grade.cells) and grade.submitted,
            rule=rule,
        )
    )
    return f"{SUMMARY_START}\n{html}\n{SUMMARY_END}"


def page(grade: NotebookGrade, nb: NotebookNode | None = None) -> str:
    """The whole feedback page; `nb` is the executed, prepared notebook (None: summary only)."""
    if nb is not None:
        summary = summary_html(grade, True)
        nb = copy.deepcopy(nb)
        nb.metadata["title"] = f"{grade.student} · {grade.notebook}"
        resources = {"grader": {"csp": CSP, "css": css(), "summary": summary}}
        body, _ = exporter().from_notebook_node(nb, resources=resources)
        if not active_content(body):
            return body
        grade = copy.deepcopy(grade)
        grade.notes.append(ACTIVE_NOTE)
    return summary_page(grade)


def summary_page(grade: NotebookGrade, hand: Hand = NONE) -> str:
    return (
        templates()
        .get_template("feedback_page.html.j2")
        .render(
            title=f"{grade.student} · {grade.notebook}",
            csp=CSP,
            css=Markup(css()),
            summary=Markup(summary_html(grade, False, hand)),
        )
    )


def with_hand_grading(html: str, grade: NotebookGrade, hand: Hand) -> str | None:
    """The page `html` with its summary rendered again with `hand` applied; the notebook under
    it is kept as it is. None when the page holds no summary (not a page of this grader)."""
    start = html.find(SUMMARY_START)
    end = html.find(SUMMARY_END, start)
    if start < 0 or end < 0:
        return None
    old = html[start:end]
    if ACTIVE_NOTE in old and ACTIVE_NOTE not in grade.notes:
        grade = copy.deepcopy(grade)
        grade.notes.append(ACTIVE_NOTE)
    summary = summary_html(grade, 'class="rule"' in old, hand)
    return html[:start] + summary + html[end + len(SUMMARY_END) :]


# ---- the notebook under the summary ---------------------------------------------------------


def prepare_notebook(
    nb: NotebookNode, results: dict[str, CellResult], limits: Limits | None = None
) -> NotebookNode:
    """Test cells show the trusted report; hidden tests cleared; sizes bounded; sanitised."""
    limits = limits or Limits()
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)  # nbconvert would write the widget state as a <script>
    clear = ClearHiddenTests(enforce_metadata=False)
    prefix = test_cell_id("")
    for index, cell in enumerate(nb.cells):
        gid = grade_id(cell)
        if is_test(cell) and gid:
            answer = gid[len(prefix) :] if gid.startswith(prefix) else gid
            report = results[answer].render() if answer in results else ""
            cell.outputs = [new_output("stream", name="stdout", text=report)] if report else []
            clear.preprocess_cell(cell, {}, index)
            if any(marker in cell.source for marker in HIDDEN_MARKERS):  # never show them
                cell.source = "# (hidden tests)"
        _without_widgets(cell)
        clean_metadata(cell)  # nbconvert writes an image's width and height unquoted
        _bound(cell, limits)
        _markdown_as_html(cell)
    describe_images(nb)  # every figure's alt: what its cell's code says it shows
    nb, _ = LimitOutput(
        max_lines=PAGES.output_lines, max_traceback=PAGES.traceback_lines
    ).preprocess(nb, {})
    nb, _ = SanitizeHTML(strip=True).preprocess(nb, {})
    return nb


def _without_widgets(cell: NotebookNode) -> None:
    """A widget's view is a <script> on the page: keep its text/plain stand-in only."""
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if any(mime in data for mime in WIDGET_MIMES):
            for mime in WIDGET_MIMES:
                data.pop(mime, None)
            data.setdefault("text/plain", "[an interactive widget: run the notebook to use it]")


def _cut(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[{what} cut by the grader: {len(text) - limit:,} more characters]"


def _bound(cell: NotebookNode, limits: Limits) -> None:
    """Cut a cell's source and outputs to what the page shows (rendering time and size)."""
    src = cell.get("source", "")
    src = "".join(src) if isinstance(src, list) else str(src)
    cell.source = _cut(src, limits.render_source_chars, "source")
    for output in cell.get("outputs", []):
        if "text" in output:
            text = output["text"]
            text = "".join(text) if isinstance(text, list) else str(text)
            output["text"] = _cut(text, limits.render_output_chars, "output")
        data = output.get("data", {})
        for mime, value in list(data.items()):
            text = "".join(value) if isinstance(value, list) else value
            if not isinstance(text, str):
                continue
            if mime.startswith("image/"):
                if len(text) > LIMITS.pages.image_chars:
                    del data[mime]
                    data.setdefault("text/plain", "[an image too large to show]")
            else:
                data[mime] = _cut(text, limits.render_output_chars, "output")


def _safe_html(markdown: str) -> str:
    """Markdown rendered, keeping nbconvert's SanitizeHTML tags and attributes and links to
    http, https and mailto only."""
    sanitizer = SanitizeHTML()
    return clean(markdown2html(markdown), sanitizer.tags, sanitizer.attributes, PROTOCOLS)


def _markdown_as_html(cell: NotebookNode) -> None:
    """Markdown from student code or a student's written answer, rendered and cleaned here:
    the sanitiser cleans HTML, but a markdown link to javascript: only becomes HTML later."""
    if cell.cell_type == "markdown" and is_answer(cell):
        cell.source = _safe_html(cell.source)
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if isinstance(data.get("text/markdown"), str):
            data["text/html"] = _safe_html(data.pop("text/markdown"))


# ---- a last check for active content ----------------------------------------------------------


class _ActiveContent(HTMLParser):
    BAD_TAGS = {"script", "iframe", "frame", "object", "embed", "applet", "base", "form"}
    URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "data", "srcdoc"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.BAD_TAGS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"{tag} {name}=")
            text = "".join((value or "").split()).lower()
            if name in self.URL_ATTRS and text.startswith(("javascript:", "vbscript:")):
                self.found.append(f"{tag} {name}={text[:30]}")
            if tag == "meta" and name == "http-equiv" and text == "refresh":
                self.found.append("<meta refresh>")

    handle_startendtag = handle_starttag


def active_content(html: str) -> list[str]:
    """Script tags, event handlers, frames and javascript: URLs found in `html`."""
    parser = _ActiveContent()
    parser.feed(html)
    parser.close()
    return parser.found
