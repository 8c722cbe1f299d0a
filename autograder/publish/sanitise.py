"""Student content made inert before an executed notebook is written to OUT/autograded.

The instructor opens those notebooks in formgrader (rendered on the Jupyter server's own
origin, in the instructor's logged-in session), in JupyterLab, or with nbconvert: nothing a
student's code put in them may run there. nbconvert's templates write an image's width and
height from the output's metadata without quotes, so metadata is a way in even where HTML
is cleaned. For every output:

- metadata keeps only what rendering needs: a positive, numeric width and height per image
  type (no `filenames`, no `isolated`, nothing else);
- images keep only PNG, JPEG or GIF data that is plain base64;
- HTML is cleaned with nh3 (ammonia): text formatting, lists, tables and links (http, https, mailto)
  are kept; scripts, event handlers, frames, forms, styles, images and every other tag or
  attribute are removed (their text stays);
- markdown is rendered to HTML and cleaned the same way (a javascript: link is markdown until
  it is rendered);
- SVG, JavaScript, widgets and every other type are dropped; an output left with nothing is
  a line of text saying what was removed.

An answer's markdown cell (a written answer) that holds active content or a tag outside that list is
replaced by its rendered, cleaned HTML; one without is left as the student wrote it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from html.parser import HTMLParser
from typing import Any

import nbformat
import nh3
from nbconvert.filters.markdown import markdown2html
from nbformat import NotebookNode

from autograder.model.settings import LIMITS

IMAGES = ("image/png", "image/jpeg", "image/gif")
KEPT = {"text/plain", "text/html", *IMAGES}
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
REMOVED = "[an output the grader removed: {}, which could run code where it is shown]"
TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "s",
    "samp", "small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th",
    "thead", "tr", "u", "ul", "var",
})  # fmt: skip
ATTRIBUTES = {"*": ["class", "title"], "a": ["href"], "td": ["colspan", "rowspan"],
              "th": ["colspan", "rowspan"]}  # fmt: skip
PROTOCOLS = ("http", "https", "mailto")


def sanitised_json(text: str) -> str:
    """An nbformat notebook's JSON, sanitised (see the module's docstring)."""
    nb = nbformat.reads(text, as_version=4)
    return nbformat.writes(sanitise(nb))


def sanitise(nb: NotebookNode) -> NotebookNode:
    """`nb`, changed in place and returned: every output inert, written answers too."""
    from autograder.model.notebook_io import is_answer

    for cell in nb.cells:
        if cell.cell_type == "markdown" and is_answer(cell):  # the others are the master's
            _markdown_cell(cell)
            _attachments(cell)
        for output in cell.get("outputs", []):
            _output(output)
    return nb


def clean_metadata(cell: NotebookNode) -> None:
    """Every output of `cell` keeps only a numeric width and height of its metadata."""
    for output in cell.get("outputs", []):
        if "metadata" in output:
            output["metadata"] = _metadata(output["metadata"])


def clean(
    html: str, tags: Iterable[str], attributes: dict[str, list[str]], protocols: Iterable[str]
) -> str:
    """`html` with only `tags`, `attributes` (tag -> names, "*" for any tag) and URL schemes:
    every other tag is removed and its text kept (a script's or a style's too, as text), comments
    go, and no `rel` is added to links."""
    return nh3.clean(
        html, tags=set(tags), attributes={t: set(a) for t, a in attributes.items()},
        url_schemes=set(protocols), clean_content_tags=set(), link_rel=None, strip_comments=True,
    )  # fmt: skip


def clean_html(html: str) -> str:
    """HTML with only the tags, attributes and URL schemes of the lists above."""
    return clean(html, TAGS, ATTRIBUTES, PROTOCOLS)


class _Tags(HTMLParser):
    """The tags an HTML text uses outside `TAGS` (and img, which markdown makes)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.others: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TAGS and tag != "img":
            self.others.add(tag)

    handle_startendtag = handle_starttag


def needs_cleaning(html: str) -> bool:
    """Active content (script, handler, frame, javascript: URL) or an unlisted tag."""
    from autograder.publish.feedback import active_content

    tags = _Tags()
    tags.feed(html)
    tags.close()
    return bool(active_content(html) or tags.others)


def _text(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return value if isinstance(value, str) else None


def _output(output: NotebookNode) -> None:
    if "metadata" in output:
        output["metadata"] = _metadata(output["metadata"])
    if "data" not in output:
        return  # stream and error outputs are text, escaped wherever they are shown
    data, kept, removed = output["data"], {}, []
    html = _text(data.get("text/html"))
    markdown = _text(data.get("text/markdown"))
    if html is None and markdown is not None:
        html = markdown2html(markdown)
    for mime, value in data.items():
        text = _text(value)
        if mime in IMAGES and text is not None and BASE64.fullmatch(text):
            kept[mime] = text
        elif mime == "text/plain" and text is not None:
            kept[mime] = text
        elif mime not in ("text/html", "text/markdown") or text is None:
            removed.append(mime)
    if html is not None:
        kept["text/html"] = clean_html(html)
    if not kept:
        kept["text/plain"] = REMOVED.format(", ".join(sorted(removed)) or "no data")
    output["data"] = kept


def _metadata(metadata: Any) -> dict[str, Any]:
    """Only a numeric width and height per image type."""
    kept: dict[str, Any] = {}
    if not isinstance(metadata, dict):
        return kept
    for mime, value in metadata.items():
        if mime not in IMAGES or not isinstance(value, dict):
            continue
        sizes = {k: _size(value.get(k)) for k in ("width", "height")}
        sizes = {k: v for k, v in sizes.items() if v is not None}
        if sizes:
            kept[mime] = sizes
    return kept


def _size(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or not 0 < value <= LIMITS.pages.image_pixels:
        return None
    return value


def _markdown_cell(cell: NotebookNode) -> None:
    source = _text(cell.get("source")) or ""
    rendered = markdown2html(source)
    if needs_cleaning(source) or needs_cleaning(rendered):
        cell["source"] = clean_html(rendered)


def _attachments(cell: NotebookNode) -> None:
    attachments = cell.get("attachments")
    if not isinstance(attachments, dict):
        return
    kept = {}
    for name, bundle in attachments.items():
        if not isinstance(bundle, dict):
            continue
        images = {m: t for m, v in bundle.items() if m in IMAGES and (t := _text(v)) is not None}
        images = {m: t for m, t in images.items() if BASE64.fullmatch(t)}
        if images:
            kept[str(name)] = images
    cell["attachments"] = kept
