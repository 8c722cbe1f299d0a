"""Every notebook reads as the course promises: an honest time estimate at the top, predictions
and written answers wired for grading, Run All that goes on past unanswered cells, a summary
and exercises at the end, the links, and prose that speaks of neither one machine nor the
grader's machinery."""

from __future__ import annotations

import ast
import re

import pytest

from autograder.checks import notebook_specs, understanding
from autograder.model import contract
from autograder.model.contract import CONTRACT
from autograder.model.contract import NOTEBOOKS as ORDER
from autograder.model.notebook_io import (
    grade_id,
    is_answer,
    is_test,
    nbgrader_meta,
    python_source,
    read,
    source,
)
from autograder.model.paths import NOTEBOOKS, SOLUTIONS

RAISES = "raises-exception"
TIME = re.compile(r"\*\*Time:\*\* about (\d+) minutes: (\d+) of [^,]+, (\d+) for ")


def markdown(notebook: str) -> list[str]:
    return [source(c) for c in read(SOLUTIONS / notebook).cells if c.cell_type == "markdown"]


def prose(notebook: str) -> str:
    """The notebook's markdown, without the model answers of its written-answer cells."""
    cells = read(SOLUTIONS / notebook).cells
    return "\n".join(source(c) for c in cells if c.cell_type == "markdown" and not is_answer(c))


@pytest.mark.parametrize("notebook", ORDER)
def test_time_estimate_at_the_top_adds_up_and_fits_the_budget(notebook: str) -> None:
    found = TIME.search(markdown(notebook)[0])
    assert found, f"{notebook}: no '**Time:** about N minutes: a of ..., b for ...' in the title"
    total, reading, answering = map(int, found.groups())
    assert reading + answering == total, f"{notebook}: {reading} + {answering} != {total}"
    assert 30 <= total <= 75, f"{notebook}: {total} minutes, outside 30-75"


@pytest.mark.parametrize("notebook", ORDER)
def test_ends_with_a_summary_and_two_to_four_exercises(notebook: str) -> None:
    text = prose(notebook)
    assert "\n## Summary\n" in text, f"{notebook}: no summary"
    exercises = text.split("\n## Exercises\n", 1)
    assert len(exercises) == 2, f"{notebook}: no exercises section"
    numbered = re.findall(r"^(\d)\. \*\*", exercises[1], flags=re.MULTILINE)
    assert 2 <= len(numbered) <= 4, f"{notebook}: {len(numbered)} exercises"
    assert numbered == [str(i) for i in range(1, len(numbered) + 1)]


def test_every_prediction_spec_has_its_cells() -> None:
    for spec in understanding.SPECS:
        nb = read(SOLUTIONS / spec.notebook)
        cells = {grade_id(c): c for c in nb.cells if grade_id(c)}
        answer, test = cells.get(spec.grade_id), cells.get(contract.test_cell_id(spec.grade_id))
        assert answer is not None and is_answer(answer), f"{spec.grade_id}: no answer cell"
        assert test is not None and is_test(test), f"{spec.grade_id}: no test cell"
        assert float(nbgrader_meta(test)["points"]) == spec.points == len(spec.names)
        assert f'grade_in_notebook("{spec.grade_id}", globals())' in source(test)
        tree = ast.parse(python_source(source(answer)))
        assigned = {
            t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
        }
        assert assigned == set(spec.names), f"{spec.grade_id}: defines {assigned}"
        assert spec.grade_id in notebook_specs(spec.notebook)


@pytest.mark.parametrize("notebook", ORDER)
def test_predictions_come_before_their_experiment(notebook: str) -> None:
    """A prediction's names are never computed or printed before its answer cell."""
    cells = read(SOLUTIONS / notebook).cells
    for spec in (s for s in understanding.SPECS if s.notebook == notebook):
        at = next(i for i, c in enumerate(cells) if grade_id(c) == spec.grade_id)
        before = "\n".join(source(c) for c in cells[:at] if c.cell_type == "code")
        for name in spec.names:
            assert name not in before, f"{notebook}: {name} appears before its prediction cell"


@pytest.mark.parametrize("notebook", ORDER)
def test_written_answers_are_hand_graded_markdown(notebook: str) -> None:
    for cell in read(SOLUTIONS / notebook).cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type == "markdown" and meta.get("solution"):
            assert meta.get("grade") and float(meta["points"]) > 0, grade_id(cell)
            assert grade_id(cell) not in CONTRACT[notebook]
    released = read(NOTEBOOKS / notebook).cells
    for cell in released:
        if cell.cell_type == "markdown" and nbgrader_meta(cell).get("solution"):
            assert source(cell).strip() == "YOUR ANSWER HERE", "a model answer was released"


def test_a_few_written_answers_across_the_course() -> None:
    written = [
        grade_id(c)
        for nb in ORDER
        for c in read(SOLUTIONS / nb).cells
        if c.cell_type == "markdown" and is_answer(c)
    ]
    assert 3 <= len(written) <= 6, written


# ---- Run All goes on past unanswered cells ------------------------------------------------


def _top_level_reads(src: str) -> set[str]:
    """Names read when the cell runs (not inside function bodies, which run later)."""
    tree = ast.parse(python_source(src))
    reads: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for default in node.args.defaults:
                visit(default)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return reads


def _all_names(src: str) -> tuple[set[str], set[str]]:
    """(every name the cell reads anywhere, every name it defines or assigns)."""
    tree = ast.parse(python_source(src))
    reads, writes = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (reads if isinstance(node.ctx, ast.Load) else writes).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            writes.add(node.name)
    return reads, writes


def _failing_functions(src: str, tainted: set[str]) -> set[str]:
    """Functions and classes a cell defines whose bodies read names downstream of an answer."""
    found = set()
    for node in ast.walk(ast.parse(python_source(src))):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names = [n for n in ast.walk(node) if isinstance(n, ast.Name)]
            local = {n.id for n in names if not isinstance(n.ctx, ast.Load)}
            if {n.id for n in names if isinstance(n.ctx, ast.Load)} - local & tainted:
                found.add(node.name)
    return found


@pytest.mark.parametrize("notebook", ORDER)
def test_run_all_goes_on_past_unanswered_cells(notebook: str) -> None:
    """Answer and test cells carry raises-exception, and so does every cell that can fail
    because an answer is missing (it reads, when it runs, a name downstream of an answer).
    The tag is on no other cell: elsewhere an error still stops Run All."""
    tainted: set[str] = set()
    for i, cell in enumerate(read(NOTEBOOKS / notebook).cells):
        if cell.cell_type != "code":
            continue
        src, tags = source(cell), cell.metadata.get("tags", [])
        _, writes = _all_names(src)
        if is_answer(cell) or is_test(cell):
            assert RAISES in tags, f"{notebook} cell {i} ({grade_id(cell)}) is not tagged"
            tainted |= writes
            continue
        failing = _failing_functions(src, tainted)  # calling them may hit a missing answer
        outer = _top_level_reads(src) - (writes - failing)  # read, not set by the cell itself
        downstream = bool(outer & (tainted | failing))
        assert (RAISES in tags) == downstream, (
            f"{notebook} cell {i}: tagged {RAISES in tags}, downstream of an answer {downstream}"
        )
        tainted |= failing | (writes if downstream else set())


# ---- links and prose ----------------------------------------------------------------------

LINKS = {
    "05_the_head.ipynb": ["arxiv.org/abs/1706.03762", "3.2.1", "$$", "d_k"],
    "07_head_on_gpu.ipynb": [
        "## Further reading",
        "arxiv.org/abs/1706.03762",
        "ng-video-lecture/blob/master/gpt.py",
        "nanoGPT/blob/master/model.py",
        "scaled_dot_product_attention.html",
        "arxiv.org/abs/2205.14135",
    ],
    "04_value_aggregation.ipynb": ["plots.attention_diagram()"],
}


@pytest.mark.parametrize("notebook", ORDER)
def test_links_to_the_lecture_with_timestamps(notebook: str) -> None:
    text = prose(notebook)
    assert "youtube.com/watch?v=kCc8FmEb1nY" in text
    if notebook != ORDER[0]:
        assert re.search(r"youtube\.com/watch\?v=kCc8FmEb1nY&t=\d+s", text), "no timestamp link"
    every_cell = "\n".join(source(c) for c in read(SOLUTIONS / notebook).cells)
    for needed in LINKS.get(notebook, []):
        assert needed in every_cell, f"{notebook}: {needed!r} missing"


MACHINE = re.compile(r"this machine|on my machine|on our machine|three seeds on", re.IGNORECASE)
GRADER = re.compile(r"\bgrader\b|hidden (test|check)|autograd", re.IGNORECASE)
# the grading as something that happens to the notebook ("while it is being graded"), not the
# student's graded cells ("graded by hand", "Not graded", "is graded when you submit")
GRADING = re.compile(
    r"\bgrading\b|\bbeing graded\b|\b(notebook|run|runs|cell|cells) (is|are|get|gets) graded\b"
    r"|\bwhen graded\b|\bwhile [^.]{0,40}\bgraded\b",
    re.IGNORECASE,
)
# the switch behind it, in code a student reads
GRADING_SWITCH = re.compile(r"NBGRADER|\bGRADING\b")


def test_the_grading_words_are_told_apart() -> None:
    caught = [
        "runs are shorter while the notebook is\nbeing graded, and end a little higher",
        "Shorter training runs while the notebook is graded.",
        "during grading the runs are shorter",
        "the notebook is graded with fewer steps",
    ]
    allowed = [
        "In two or three sentences of your own (graded by hand): why",
        "Not graded; in order of difficulty.",
        "Whether each shape is right is graded when you submit.",
        "each answer cell is followed by a self-check",
    ]
    assert all(GRADING.search(text) for text in caught)
    assert not any(GRADING.search(text) for text in allowed)
    old_setup = '# Shorter runs while the notebook is being graded.\nGRADING = os.environ.get("X")'
    assert GRADING.search("\n".join(comments(old_setup)))
    assert GRADING_SWITCH.search(old_setup)


@pytest.mark.parametrize("notebook", ORDER)
def test_prose_names_no_machine_and_no_grader_machinery(notebook: str) -> None:
    text = prose(notebook)
    assert not MACHINE.findall(text), MACHINE.findall(text)
    assert not GRADER.findall(text), GRADER.findall(text)
    grading = [m.group(0) for m in GRADING.finditer(text)]
    assert not grading, f"{notebook}: the prose speaks of the grading: {grading}"
    code = [source(c) for c in read(NOTEBOOKS / notebook).cells if c.cell_type == "code"]
    switches = [m.group(0) for src in code for m in GRADING_SWITCH.finditer(src)]
    assert not switches, f"{notebook}: the code a student reads names {switches}"
    said = [m.group(0) for src in code for m in GRADING.finditer("\n".join(comments(src)))]
    assert not said, f"{notebook}: code comments speak of the grading: {said}"
    hardware = re.findall(r"H200", text)
    if notebook == "07_head_on_gpu.ipynb":
        named = re.findall(r"an NVIDIA H200 on \d{4}-\d\d-\d\d \(the PyTorch version", text)
        assert len(named) == 2, "each passage of GPU figures names the GPU, its date and torch"
    else:
        assert not hardware, f"{notebook} quotes hardware-specific figures"


def comments(src: str) -> list[str]:
    """The comments of a cell's code."""
    import io
    import tokenize

    tokens = tokenize.generate_tokens(io.StringIO(python_source(src)).readline)
    return [t.string for t in tokens if t.type == tokenize.COMMENT]
