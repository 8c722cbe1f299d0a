"""Text alternatives for the figures of a graded notebook (the feedback page's `<img alt>`).

A figure's PNG says nothing a screen reader can read, so each image output gets an `alt` from
what the code of its cell says about it: the titles it gives (`title=`, `suptitle=`,
`titles=[...]`, `set_title(...)`, `plt.title(...)`, `suptitle(...)`, a list assigned to a name
with "title" in it) and its axis labels
(`xlabel=`, `ylabel=`, `set_xlabel(...)`, ...), an f-string's fields shown as "…"; the number
of panels from matplotlib's text stand-in; and the heading of the section the cell is in.
An alt the output already carries (the notebook's own) is kept.
"""

from __future__ import annotations

import ast
import re

from nbformat import NotebookNode

from autograder.model.settings import LIMITS

IMAGE_MIMES = ("image/png", "image/jpeg")
TITLE_KEYWORDS = ("title", "suptitle", "titles")
TITLE_CALLS = ("set_title", "title", "suptitle")
LABEL_KEYWORDS = ("xlabel", "ylabel")
LABEL_CALLS = ("set_xlabel", "set_ylabel", "xlabel", "ylabel")


def _text(node: ast.AST) -> list[str]:
    """The strings a literal, an f-string or a list of them spells ('…' for each field)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts = [
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "…"
            for v in node.values
        ]
        return ["".join(parts)]
    if isinstance(node, ast.List | ast.Tuple):
        return [text for item in node.elts for text in _text(item)]
    return []


def figure_words(source: str) -> tuple[list[str], list[str]]:
    """(titles, axis labels) the code of a cell gives its figures, in source order, each once."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return [], []
    found: list[tuple[tuple[int, int], str, list[str]]] = []  # (where, kind, texts)
    for node in ast.walk(tree):
        where = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        if isinstance(node, ast.Assign):  # titles = ["softmax(logits)", ...], then set_title
            if any(isinstance(t, ast.Name) and "title" in t.id for t in node.targets):
                found.append((where, "title", _text(node.value)))
            continue
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg in TITLE_KEYWORDS:
                found.append((where, "title", _text(keyword.value)))
            elif keyword.arg in LABEL_KEYWORDS:
                found.append((where, "label", _text(keyword.value)))
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if node.args and name in TITLE_CALLS:
            found.append((where, "title", _text(node.args[0])))
        elif node.args and name in LABEL_CALLS:
            found.append((where, "label", _text(node.args[0])))
    found.sort(key=lambda item: item[0])

    def words(kind: str) -> list[str]:
        texts = [" ".join(t.split()) for _, k, ts in found if k == kind for t in ts]
        return list(dict.fromkeys(t for t in texts if t))

    return words("title"), words("label")


def _heading(cell: NotebookNode) -> str:
    """The last Markdown heading of a cell, without its marks ('' when it has none)."""
    found = ""
    for line in str(cell.get("source", "")).splitlines():
        if line.startswith("#"):
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line.lstrip("#").strip())
            text = re.sub(r"<[^>]*>", "", text)  # <u>62:00</u> and the like
            found = re.sub(r"[*_`]", "", text).strip()
    return found


def _panels(output: NotebookNode) -> int:
    """How many axes matplotlib's text stand-in counts ('<Figure ... with 2 Axes>'), or 0."""
    text = output.get("data", {}).get("text/plain", "")
    text = "".join(text) if isinstance(text, list) else str(text)
    match = re.search(r"with (\d+) Axes", text)
    return int(match[1]) if match else 0


def alt_text(titles: list[str], labels: list[str], heading: str, panels: int) -> str:
    """One figure's text alternative."""
    if titles:
        words = f"Figure: {'; '.join(titles)}"
    else:
        words = "A figure drawn by the code above"
    if panels > 1:
        words += f" ({panels} panels)"
    if labels:
        words += f"; axes: {', '.join(labels)}"
    if heading:
        words += f"; in the section “{heading}”"
    words += "."
    most = LIMITS.pages.alt_text_chars
    return words if len(words) <= most else words[: most - 1] + "…"


def describe_images(nb: NotebookNode) -> None:
    """Give every image output of `nb` an `alt` in its metadata (`metadata[mime]["alt"]`)."""
    heading = ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = _heading(cell) or heading
            continue
        images = [
            (output, mime)
            for output in cell.get("outputs", [])
            for mime in IMAGE_MIMES
            if mime in output.get("data", {})
        ]
        if not images:
            continue
        titles, labels = figure_words(str(cell.get("source", "")))
        for number, (output, mime) in enumerate(images, start=1):
            meta = output.setdefault("metadata", {}).setdefault(mime, {})
            if not isinstance(meta, dict) or str(meta.get("alt", "")).strip():
                continue
            text = alt_text(titles, labels, heading, _panels(output))
            if len(images) > 1:
                text = f"{text[:-1]} (figure {number} of {len(images)})."
            meta["alt"] = text
