"""No graded answer is on the page before it is asked for, in its notebook or an earlier one.

An answer counts as displayed when its solution, compared as operations (`tests.answer_ops`:
local names, whitespace, comments and statement boundaries do not matter), occurs in the code
cells or fenced code blocks that a student sees before the answer cell: in its own release
notebook, or anywhere in an earlier notebook. A later notebook may show an earlier notebook's
answers only where staging knows it: it imports a helper that gives them away
(`autograder.staging.NEEDS`) or declares them (`SHOWS`), so that a staged release holds it back
until that notebook is graded.
"""

from __future__ import annotations

import nbformat
import pytest

from autograder import staging
from autograder.contract import NOTEBOOKS as ORDER
from autograder.notebook_io import grade_id, is_answer, read, solution_answers, source
from autograder.paths import NOTEBOOKS, SOLUTIONS
from tests.answer_ops import contains, fenced_code, operations


def shown_ops(cells: list) -> list[str]:
    """The operations of everything a student can read in `cells` as code."""
    ops: list[str] = []
    for cell in cells:
        if cell.cell_type == "code":
            ops += operations(source(cell))
        elif cell.cell_type == "markdown":
            for block in fenced_code(source(cell)):
                ops += operations(block)
    return ops


def answers(notebook: str) -> dict[str, list[str]]:
    """grade_id -> the operations of its solution, for every code answer with any operation."""
    found = {
        gid: operations(src) for gid, src in solution_answers(read(SOLUTIONS / notebook)).items()
    }
    return {gid: ops for gid, ops in found.items() if ops}


def displayed_before(nb: nbformat.NotebookNode, gid: str, ops: list[str]) -> bool:
    index = next(i for i, c in enumerate(nb.cells) if is_answer(c) and grade_id(c) == gid)
    return contains(shown_ops(nb.cells[:index]), ops)


@pytest.mark.parametrize("notebook", ORDER)
def test_no_answer_is_shown_before_its_cell(notebook: str) -> None:
    nb = read(NOTEBOOKS / notebook)
    shown = [gid for gid, ops in answers(notebook).items() if displayed_before(nb, gid, ops)]
    assert not shown, f"{notebook}: the answers of {shown} are on the page before their cells"


@pytest.mark.parametrize("notebook", ORDER)
def test_no_later_answer_is_shown_in_an_earlier_notebook(notebook: str) -> None:
    page = shown_ops(read(NOTEBOOKS / notebook).cells)
    later = ORDER[ORDER.index(notebook) + 1 :]
    shown = [(nb, gid) for nb in later for gid, ops in answers(nb).items() if contains(page, ops)]
    assert not shown, f"{notebook} shows answers of later notebooks: {shown}"


@pytest.mark.parametrize("notebook", ORDER)
def test_earlier_answers_shown_only_behind_a_staged_helper(notebook: str) -> None:
    """Showing notebook N's answer is allowed where the notebook needs a helper revealing N."""
    page = shown_ops(read(NOTEBOOKS / notebook).cells)
    covered = [staging.REVEALS[m] for m in staging.NEEDS.get(notebook, ())]
    covered += [staging.SHOWS[notebook]] if notebook in staging.SHOWS else []
    gated = max((ORDER.index(nb) for nb in covered), default=-1)
    earlier = ORDER[: ORDER.index(notebook)]
    shown = [
        (nb, gid)
        for nb in earlier
        for gid, ops in answers(nb).items()
        if contains(page, ops) and ORDER.index(nb) > gated
    ]
    assert not shown, f"{notebook} shows earlier answers no staged helper covers: {shown}"


# ---- the comparison itself ----------------------------------------------------------------

HEAD = """
def attend(x, key, query, value):
    T = x.shape[1]
    k = key(x)  # (B,T,hs)
    q = query(x)
    wei = q @ k.transpose(-2, -1)
    tril = torch.tril(torch.ones(T, T))
    wei = wei.masked_fill(tril == 0, float("-inf"))
    wei = F.softmax(wei, dim=-1)
    return wei @ value(x)
"""


def test_renamed_and_reflowed_code_is_the_same_answer() -> None:
    reflowed = """
size = inp.shape[1]
scores = query_layer(inp) @ key_layer(inp).transpose(-2,-1)
lower = torch.tril(torch.ones(size, size))
out = F.softmax(scores.masked_fill(lower == 0, float('-inf')), dim=-1) @ value_layer(inp)
print(out.shape)
"""
    assert contains(operations(reflowed), operations(HEAD))


def test_code_that_does_less_or_more_is_another_answer() -> None:
    no_mask = HEAD.replace('    wei = wei.masked_fill(tril == 0, float("-inf"))\n', "")
    scaled = HEAD.replace("k.transpose(-2, -1)", "k.transpose(-2, -1) * 0.25")
    assert not contains(operations(HEAD), operations(no_mask)), "a deleted line is a change"
    assert not contains(operations(scaled), operations(HEAD)), "an added factor is a change"
    assert not contains(operations(HEAD.replace("dim=-1", "dim=-2")), operations(HEAD))


def test_an_answer_pasted_above_its_cell_is_caught() -> None:
    nb = read(NOTEBOOKS / "04_value_aggregation.ipynb")
    cheat = nbformat.v4.new_markdown_cell("The whole thing:\n\n```python\n" + HEAD + "\n```")
    nb.cells.insert(3, cheat)
    assert displayed_before(nb, "attend", answers("04_value_aggregation.ipynb")["attend"])


def test_output_only_code_is_not_computing() -> None:
    shown = "print(q @ k.transpose(-2, -1))\nassert (q @ k.mT).shape == (2, 2)\nplt.plot(x)\n"
    assert operations(shown) == []
