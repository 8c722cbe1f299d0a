"""An answer is graded in the notebook it was written in: the master cells a probe runs first.

`autograder.worker.context` slices the master's cells above an answer down to those that define the
names it reads (and what they need: their own names, in-place changes, the random draws since
the last seed). Here: the slice on small notebooks made for each rule, the masters' own
solutions (they read nothing from above, so they cost nothing more), and the corpus's answers
that read the notebook's names (tests/corpus/context.py): each needs a cell from above, loses
points without it and keeps full marks with it. End to end through the command line:
test_grader_corpus.py.
"""

from __future__ import annotations

import nbformat
import pytest

from autograder.checks import run_in_process, spec_for
from autograder.model.course import load_masters
from autograder.model.notebook_io import exec_cell, setup_sources, solution_answers
from autograder.worker.context import Context, analyse
from tests import corpus
from tests.corpus import context as variants
from tests.corpus import one_thread  # noqa: F401 (a fixture)


def notebook(*cells: tuple[str, str]) -> nbformat.NotebookNode:
    """A master from (kind, source) pairs: kind is setup, demo, answer:<id> or test:<id>."""
    nb = nbformat.v4.new_notebook()
    for kind, src in cells:
        cell = nbformat.v4.new_code_cell(src)
        if kind == "setup":
            cell.metadata["tags"] = ["setup"]
        elif kind.startswith("answer:"):
            cell.metadata["nbgrader"] = {"grade_id": kind[7:], "solution": True, "grade": False}
        elif kind.startswith("test:"):
            meta = {"grade_id": kind[5:], "solution": False, "grade": True, "points": 1}
            cell.metadata["nbgrader"] = meta
        nb.cells.append(cell)
    return nb


def positions(ctx: Context, answer: str, target: str = "a") -> list[int]:
    return ctx.plan([(target, answer)], target).cells


def test_a_name_brings_its_cell_and_what_that_cell_reads() -> None:
    ctx = Context(
        notebook(
            ("setup", "import torch"),
            ("demo", "C = 32"),
            ("demo", "plot = 'slow figure'"),
            ("demo", "head_size = C // 2"),
            ("answer:a", "N = 0"),
        )
    )
    assert positions(ctx, "N = 3 * C * head_size") == [1, 3]
    assert positions(ctx, "N = 3 * 32 * 16") == []  # the solution: nothing more runs


def test_a_function_body_and_a_default_read_names_too() -> None:
    ctx = Context(notebook(("demo", "T = 8"), ("demo", "block = 4"), ("answer:a", "")))
    assert positions(ctx, "def f(x):\n    return x[:T]") == [0]
    assert positions(ctx, "def f(x, b=block):\n    return x") == [1]
    assert positions(ctx, "T = 3\ndef f(x):\n    return x[:T]") == []  # its own T


def test_a_name_changed_in_place_before_the_answer_brings_the_change() -> None:
    ctx = Context(
        notebook(
            ("demo", "x = [0, 0]"),
            ("demo", "x[0] = 5"),
            ("demo", "y = 1"),
            ("demo", "print(x, len(x))"),
            ("demo", "train(x, steps=10)"),
            ("answer:a", ""),
        )
    )
    assert positions(ctx, "z = x") == [0, 1, 4]


def test_a_drawing_cell_brings_the_draws_since_the_last_seed() -> None:
    ctx = Context(
        notebook(
            ("setup", "import torch"),
            ("demo", "torch.manual_seed(0)\na = torch.randn(3)"),
            ("demo", "b = torch.randn(3)"),
            ("demo", "text = 'no draw'"),
            ("demo", "g = torch.Generator().manual_seed(1)\nc = torch.randn(3, generator=g)"),
            ("demo", "d = torch.randn(3)"),
            ("answer:a", ""),
        )
    )
    assert positions(ctx, "e = d") == [1, 2, 5]
    assert positions(ctx, "e = c") == [4]  # its own generator: no earlier draw matters


def test_test_cells_later_cells_and_hidden_imports_are_never_run() -> None:
    ctx = Context(
        notebook(
            ("demo", "from attention_course.references.nb02 import affinities\nS = 1"),
            ("test:t", "x_check = 1"),
            ("answer:a", ""),
            ("demo", "late = 1"),
        ),
        hidden_modules=["attention_course.references.nb02"],
    )
    plan = ctx.plan([("a", "y = S + x_check + late + nowhere + mine")], "a", added={"mine"})
    assert plan.cells == []
    assert set(plan.unavailable) == {"S", "x_check", "late", "nowhere", "mine"}
    assert "hands out later answers" in plan.unavailable["S"]
    assert "self-check" in plan.unavailable["x_check"]
    assert "below this answer" in plan.unavailable["late"]
    assert "no cell of the notebook" in plan.unavailable["nowhere"]
    assert "a cell you added" in plan.unavailable["mine"]


def test_a_students_earlier_answer_defines_what_it_defines() -> None:
    ctx = Context(notebook(("demo", "T = 8"), ("answer:a", ""), ("answer:b", "")))
    answers = [("a", "T = 3"), ("b", "y = T")]
    assert ctx.plan(answers, "b").cells == []  # the student's own T, as in the kernel
    assert ctx.plan([("a", "z = 1"), ("b", "y = T")], "b").cells == [0]


def test_student_source_that_cannot_be_read_reads_nothing() -> None:
    for src in ["def (", "(" * 10_000, "x = 1\n" * 20_000]:
        names = analyse(src)
        assert not names.reads and not names.parsed


def test_the_solutions_run_no_cell_of_the_notebook() -> None:
    for nb, master in load_masters().items():
        sols = solution_answers(master.nb)
        order = master.code_answers
        for gid in order:
            plan = master.context.plan([(g, sols[g]) for g in order[: order.index(gid) + 1]], gid)
            assert plan.cells == [], (nb, gid, plan.cells)


def test_every_answer_cell_has_a_variant_that_reads_the_notebooks_names() -> None:
    missing = [(nb, gid) for nb, gid in variants.code_answer_cells() if not variants.covered(gid)]
    assert not missing, f"no in-context variant in tests/corpus/context.py for {missing}"


WITH_CONTEXT = [a for a in variants.ALTERNATIVES if a.grade_id != "pick-device"]


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("alternative", WITH_CONTEXT, ids=lambda a: a.id)
def test_each_variant_needs_a_cell_from_above(alternative: corpus.Alternative) -> None:
    """Without the cells above, the variant loses its points (the grader's old behaviour);
    with them (test_checks_corpus.py) it keeps every point."""
    master = load_masters(notebooks=(alternative.notebook,))[alternative.notebook]
    answers = corpus.answers_with(alternative.notebook, alternative.grade_id, alternative.source)
    order = master.code_answers[: master.code_answers.index(alternative.grade_id) + 1]
    plan = master.context.plan([(g, answers[g]) for g in order], alternative.grade_id)
    assert plan.cells, "the variant reads nothing from the cells above"
    ns: dict = {}
    for src in setup_sources(master.nb):
        exec_cell(src, ns)
    for gid in order:
        try:
            exec_cell(answers[gid], ns, f"<answer {gid}>")
        except Exception:  # noqa: S110 - the spec reports what is missing
            pass
    result = run_in_process(spec_for(alternative.grade_id), ns)
    assert result.score < result.max_score, result.render()
