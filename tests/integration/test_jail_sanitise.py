"""What leaves the jail for the instructor's eyes is inert: the executed notebook written to
OUT/autograded keeps its images and text, and nothing in it can run in formgrader, JupyterLab
or nbconvert (the end-to-end case: tests/e2e/test_grader_hostile.py; formgrader in a browser:
tests/e2e/browser/test_formgrader_payload.py)."""

from __future__ import annotations

import base64

import nbformat
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
