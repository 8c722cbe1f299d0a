"""The figures' text alternatives on the feedback page (autograder/publish/alt_text.py), without a
browser: what a cell's code says of its figure, the section it is in, several figures in one
cell."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.model.grades import NotebookGrade
from autograder.publish.alt_text import describe_images, figure_words
from autograder.publish.feedback import page, prepare_notebook

PNG = "iVBORw0KGgo="  # a stand-in: the page never decodes it


def _figure(text: str = "<Figure size 640x480 with 2 Axes>") -> nbformat.NotebookNode:
    return new_output("display_data", data={"image/png": PNG, "text/plain": text})


def test_titles_and_labels_come_from_the_code() -> None:
    source = (
        'plots.heatmap(wei, title="uniform weights")\n'
        'fig.suptitle(f"step {i} of {n}")\n'
        'ax.set(xlabel="key position", ylabel="query")\n'
        'titles = ["softmax(logits)", "softmax(logits * 8)"]\n'
        "ax.set_title(title)  # a name: nothing to read\n"
    )
    titles, labels = figure_words(source)
    assert titles == ["uniform weights", "step … of …", "softmax(logits)", "softmax(logits * 8)"]
    assert labels == ["key position", "query"]
    assert figure_words("def broken(:\n") == ([], [])


def test_each_image_gets_an_alt_that_says_what_it_shows() -> None:
    nb = new_notebook(
        cells=[
            new_markdown_cell("## 6. The weights, <u>as a picture</u> ([62:00](https://x))"),
            new_code_cell('plots.heatmap(w, title="uniform weights")', outputs=[_figure()]),
            new_code_cell(
                "plt.plot(x); plt.show(); plt.plot(y)", outputs=[_figure(""), _figure("")]
            ),
            new_code_cell("show(img)", outputs=[_figure()]),
        ]
    )
    nb.cells[3].outputs[0].metadata = {"image/png": {"alt": "the student's own words"}}
    describe_images(nb)
    first = nb.cells[1].outputs[0].metadata["image/png"]["alt"]
    assert first == (
        "Figure: uniform weights (2 panels); in the section “6. The weights, as a picture (62:00)”."
    )
    two = [o.metadata["image/png"]["alt"] for o in nb.cells[2].outputs]
    assert two[0].startswith("A figure drawn by the code above; in the section “6.")
    assert two[0].endswith("(figure 1 of 2).") and two[1].endswith("(figure 2 of 2).")
    assert nb.cells[3].outputs[0].metadata["image/png"]["alt"] == "the student's own words"


def test_the_page_carries_the_alt_and_never_nbconverts_placeholder() -> None:
    nb = new_notebook(
        cells=[new_code_cell('ax.set_title("raw <scores>")', outputs=[_figure()])],
        metadata={"language_info": {"name": "python"}},
    )
    html = page(NotebookGrade("s", "01_uniform_averaging.ipynb", "ok"), prepare_notebook(nb, {}))
    assert 'alt="Figure: raw &lt;scores&gt; (2 panels)."' in html
    assert "No description has been provided" not in html
