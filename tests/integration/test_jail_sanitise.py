"""What leaves the jail for the instructor's eyes is inert: the executed notebook written to
OUT/autograded keeps its images and text, and nothing in it can run in formgrader, JupyterLab
or nbconvert (the end-to-end case: tests/e2e/test_grader_hostile.py; formgrader in a browser:
tests/e2e/browser/test_formgrader_payload.py)."""

from __future__ import annotations

import base64
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.publish.feedback import active_content, exporter
from autograder.publish.sanitise import IMAGES, REMOVED, needs_cleaning, sanitise, sanitised_json

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(32)).decode()
WIDTH = "1 onerror=alert(document.cookie) data-x=1"


def payload() -> nbformat.NotebookNode:
    """Every way an output or a written answer could carry active content."""
    evil_html = (
        '<script>alert(1)</script><img src=x onerror="alert(2)"><iframe src="//x.org"></iframe>'
        '<a href="javascript:alert(3)">link</a><table><tr><td>kept</td></tr></table>'
    )
    outputs = [
        new_output(
            "display_data",
            data={"image/png": PNG, "text/plain": "an image"},
            metadata={"image/png": {"width": WIDTH, "height": 40}, "filenames": {"x": "/etc"}},
        ),
        new_output("display_data", data={"text/html": evil_html}),
        new_output("display_data", data={"text/markdown": "[click](javascript:alert(4))"}),
        new_output("display_data", data={"application/javascript": "alert(5)"}),
        new_output("display_data", data={"image/svg+xml": "<svg onload='alert(6)'/>"}),
        new_output("execute_result", data={"image/png": '" onerror="alert(7)'}, execution_count=1),
        new_output("stream", name="stdout", text="<script>alert(8)</script> is text"),
    ]
    answer = new_markdown_cell("My answer <img src=x onerror=alert(9)> [x](javascript:alert(10))")
    answer.metadata["nbgrader"] = {"solution": True, "grade": True, "grade_id": "w", "points": 1}
    honest = new_markdown_cell("# Heading\n\n*so* `a < b`\n\n```\nif a < b: pass\n```")
    honest.metadata["nbgrader"] = {"solution": True, "grade": True, "grade_id": "h", "points": 1}
    return new_notebook(cells=[new_code_cell("x = 1", outputs=outputs), answer, honest])


def test_the_payload_is_active_before_and_inert_after() -> None:
    before, _ = exporter().from_notebook_node(payload())
    assert "img onerror=" in active_content(before)  # the width attack works on nbconvert
    nb = nbformat.reads(sanitised_json(nbformat.writes(payload())), as_version=4)
    after, _ = exporter().from_notebook_node(nb)
    assert active_content(after) == []
    for output in nb.cells[0].outputs:
        assert set(output.get("metadata", {})) <= set(IMAGES)
        assert not needs_cleaning(output.get("data", {}).get("text/html", ""))
    image, html, markdown, script, svg, forged, stream = nb.cells[0].outputs
    assert image.data == {"image/png": PNG, "text/plain": "an image"}  # the image stays
    assert image.metadata == {"image/png": {"height": 40}}  # only a numeric size
    assert "kept" in html.data["text/html"] and "<table>" in html.data["text/html"]
    assert "javascript" not in markdown.data["text/html"] and "click" in markdown.data["text/html"]
    assert script.data == {"text/plain": REMOVED.format("application/javascript")}
    assert svg.data == {"text/plain": REMOVED.format("image/svg+xml")}
    assert forged.data == {"text/plain": REMOVED.format("image/png")}
    assert stream.text == "<script>alert(8)</script> is text"  # text, escaped where shown
    assert "onerror" not in nb.cells[1].source and "javascript" not in nb.cells[1].source
    assert "My answer" in nb.cells[1].source
    assert nb.cells[2].source == payload().cells[2].source  # an honest answer is left alone


def test_sanitise_is_idempotent() -> None:
    once = sanitise(payload())
    assert sanitise(nbformat.from_dict(once)) == once


def test_the_students_own_page_shows_the_notebook_without_the_width_attack() -> None:
    from autograder.model.grades import NotebookGrade
    from autograder.publish.feedback import ACTIVE_NOTE, page, prepare_notebook

    nb = new_notebook(cells=[payload().cells[0]])
    nb.cells[0].outputs = nb.cells[0].outputs[:1]  # the image whose width is a payload
    grade = NotebookGrade("s", "01_uniform_averaging.ipynb", "ok")
    html = page(grade, prepare_notebook(nb, {}))
    assert ACTIVE_NOTE not in html  # the notebook is shown, not the summary alone
    assert PNG[:40] in html and active_content(html) == []
    assert "onerror" not in html and "filenames" not in html  # not even as a quoted width


# nh3 (ammonia) is not bleach: each of these is where the two could differ and it matters.
CLEANED = [  # (HTML from student code, what must be in the cleaned text, what must not)
    ('<p onclick="x()" onmouseover=y() class="c" title="t">p</p>',
     ['<p class="c" title="t">p</p>'], ["onclick", "onmouseover"]),
    ('<a href="javascript:alert(1)">a</a><a href=" JaVaScRiPt:alert(2)">b</a>',
     ["<a>a</a>", "<a>b</a>"], ["javascript", "JaVaScRiPt"]),
    ('<a href="vbscript:x">v</a><a href="data:text/html,<script>x</script>">d</a>',
     ["<a>v</a>", "<a>d</a>"], ["vbscript", "data:"]),
    ('<a href="https://x.org/?a=1&amp;b=2" title="t">l</a><a href="mailto:a@b.c">m</a>',
     ['<a href="https://x.org/?a=1&amp;b=2" title="t">l</a>', '<a href="mailto:a@b.c">m</a>'],
     ["rel=", "noopener"]),  # no rel added: the page is the same with or without it
    ("<style>body{display:none}</style><span style='color:red'>s</span>",
     ["<span>s</span>"], ["<style", "style="]),
    ('<iframe src="https://x.org"></iframe><frame><object data="x"></object><embed src="x">',
     [], ["iframe", "frame", "object", "embed", "src="]),
    ("<script>alert(1)</script><noscript><img src=x onerror=alert(2)></noscript>",
     ["alert(1)", "&lt;img"], ["<script", "<img"]),  # their text stays, as text
    ('<svg onload="alert(1)"><a href="javascript:x">s</a></svg><!-- <script>x</script> -->',
     [], ["onload", "javascript", "<svg", "<!--", "<script"]),
    ("<table><tr><td colspan=2 onclick=x>c</td></tr></table>a &lt; b &amp; c",
     ['<td colspan="2">c</td>', "a &lt; b &amp; c"], ["onclick"]),
    ("<textarea><img src=x onerror=alert(1)></textarea><form action=x><input></form>",
     [], ["<img", "<textarea", "<form", "<input"]),
]  # fmt: skip


@pytest.mark.parametrize("html, kept, gone", CLEANED)
def test_nh3_keeps_the_listed_html_and_nothing_active(
    html: str, kept: list[str], gone: list[str]
) -> None:
    from autograder.publish.sanitise import clean_html

    cleaned = clean_html(html)
    for text in kept:
        assert text in cleaned, (text, cleaned)
    for text in gone:
        assert text not in cleaned, (text, cleaned)
    assert active_content(cleaned) == [] and not needs_cleaning(cleaned)
    assert clean_html(cleaned) == cleaned  # cleaning again changes nothing


def test_student_markdown_on_the_page_keeps_only_sanitize_htmls_tags() -> None:
    """Written answers and markdown outputs on the feedback page: nbconvert's SanitizeHTML tags
    and attributes (no p, table or img), links to http, https and mailto only."""
    from nbconvert.preprocessors.sanitize import SanitizeHTML

    from autograder.publish.feedback import _safe_html

    markdown = (
        '**bold** [ok](https://x.org "t") [bad](javascript:alert(1)) <b onclick=x>b</b>\n\n'
        "![img](x.png) <script>alert(2)</script>\n\n| a |\n|---|\n| 1 |\n"
    )
    html = _safe_html(markdown)
    assert '<strong>bold</strong> <a href="https://x.org" title="t">ok</a> <a>bad</a>' in html
    assert "<b>b</b>" in html and "alert(2)" in html  # the script's text, as text
    for gone in ("<p", "<table", "<img", "<script", "onclick", "javascript", "rel="):
        assert gone not in html, (gone, html)
    tags = {t.lstrip("</").split(">")[0].split()[0] for t in re.findall(r"</?[a-z][^>]*>", html)}
    assert tags <= set(SanitizeHTML().tags), tags
    assert active_content(html) == []
