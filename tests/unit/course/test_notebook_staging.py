"""autograder.course.staging tells the truth about the helpers, and its rules hold for every
release.

REVEALS is read off the code: a helper that holds a notebook's answer (compared as operations,
see `tests.answer_ops`) must be listed as revealing that notebook or a later one, and a listed
helper must hold an answer of the notebook it names. NEEDS is read off the notebooks' imports.
"""

from __future__ import annotations

import ast
import itertools

import pytest

from autograder.course import staging
from autograder.model.contract import NOTEBOOKS as ORDER
from autograder.model.notebook_io import python_source, read, setup_sources, source
from autograder.model.paths import NOTEBOOKS, ROOT, SOLUTIONS
from tests.answer_ops import contains, operations
from tests.notebooks.test_notebook_answers import answers, shown_ops

MODULES = staging.helper_modules()


def helpers_imported(notebook: str, setup_only: bool = False) -> set[str]:
    """Course-helper files that the code cells (or only the setup cells) of a notebook import."""
    found = set()
    nb = read(SOLUTIONS / notebook)
    cells = (
        setup_sources(nb) if setup_only else [source(c) for c in nb.cells if c.cell_type == "code"]
    )
    for cell in cells:
        for node in ast.walk(ast.parse(python_source(cell))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                path = name.replace(".", "/")
                found |= {m for m in MODULES if m in (f"{path}.py", f"{path}/__init__.py")}
    return found


def revealed_by(module: str) -> list[str]:
    """Notebooks some of whose answers the module's code holds."""
    ops = operations((ROOT / module).read_text())
    return [nb for nb in ORDER if any(contains(ops, a) for a in answers(nb).values())]


def test_reveals_names_existing_helpers_and_notebooks() -> None:
    for module, notebook in staging.REVEALS.items():
        assert module in MODULES, f"{module} is not a course helper"
        assert notebook in ORDER


@pytest.mark.parametrize("module", MODULES)
def test_reveals_is_true_for_every_helper(module: str) -> None:
    holds = revealed_by(module)
    if module not in staging.REVEALS:
        assert not holds, f"{module} holds answers of {holds} but REVEALS does not list it"
        return
    last = ORDER.index(staging.REVEALS[module])
    assert holds, f"{module} is listed as revealing {staging.REVEALS[module]} but holds no answer"
    assert ORDER.index(holds[-1]) == last, (
        f"{module} holds answers of {holds}: REVEALS should name {holds[-1]}"
    )


@pytest.mark.parametrize("notebook", ORDER)
def test_needs_is_what_the_notebook_imports(notebook: str) -> None:
    revealing = helpers_imported(notebook) & set(staging.REVEALS)
    assert revealing == set(staging.NEEDS.get(notebook, ())), (
        f"{notebook} imports {sorted(revealing)}; NEEDS says {staging.NEEDS.get(notebook)}"
    )


@pytest.mark.parametrize("notebook", ORDER)
def test_setup_needs_is_what_the_setup_cells_import(notebook: str) -> None:
    setup = {m for m in helpers_imported(notebook, setup_only=True) if m in staging.REVEALS}
    assert setup == set(staging.SETUP_NEEDS.get(notebook, ())), (
        f"{notebook}'s setup imports {sorted(setup)}; SETUP_NEEDS says "
        f"{staging.SETUP_NEEDS.get(notebook)}"
    )
    hidden = set(staging.probe_hidden_helpers(notebook))
    assert hidden >= set(staging.hidden_helpers(notebook))
    assert not hidden & setup, "a probe must see what the setup cells it runs import"


@pytest.mark.parametrize("notebook", ORDER)
def test_a_notebook_never_imports_what_its_grading_hides(notebook: str) -> None:
    clash = helpers_imported(notebook) & set(staging.hidden_helpers(notebook))
    assert not clash, f"{notebook} imports {sorted(clash)}, hidden while it is graded"


@pytest.mark.parametrize("notebook", sorted(staging.SHOWS))
def test_shows_is_not_stale(notebook: str) -> None:
    page = shown_ops(read(NOTEBOOKS / notebook).cells)
    declared = staging.SHOWS[notebook]
    assert ORDER.index(declared) < ORDER.index(notebook)
    assert any(contains(page, ops) for ops in answers(declared).values()), (
        f"{notebook} no longer shows an answer of {declared}: drop it from SHOWS"
    )


def test_hidden_helpers_are_the_modules_revealing_this_notebook_or_later() -> None:
    assert staging.hidden_helpers("03") == [
        "attention_course/references/nb03.py",
        "attention_course/references/nb05.py",
        "attention_course/references/nb06.py",
    ]
    assert staging.hidden_helpers("01_uniform_averaging.ipynb") == sorted(staging.REVEALS)
    assert staging.hidden_helpers("solutions/07_head_on_gpu.ipynb") == []
    for a, b in itertools.pairwise(ORDER):
        assert set(staging.hidden_helpers(b)) <= set(staging.hidden_helpers(a))
    with pytest.raises(ValueError, match="unknown notebook"):
        staging.hidden_helpers("08")


def test_a_staged_release_ships_the_references_of_graded_notebooks_only() -> None:
    upto = lambda n: set(ORDER[:n])  # noqa: E731 - 01 .. the n-th notebook
    five = staging.shippable_helpers(upto(5))  # 05 is open, 01-04 graded
    assert "attention_course/references/nb03.py" in five
    assert "attention_course/references/nb05.py" not in five
    six = staging.shippable_helpers(upto(6))
    assert "attention_course/references/nb05.py" in six
    assert "attention_course/references/nb06.py" not in six
    for released in (upto(1), upto(7), {"03"}):
        shipped = staging.shippable_helpers(released)
        assert set(MODULES) - set(staging.REVEALS) <= set(shipped), "plain helpers always ship"


def test_several_open_notebooks_hold_back_everything_they_would_give_away() -> None:
    released = {"01", "02", "03", "04"}
    shipped = staging.shippable_helpers(released, still_open=released)
    assert not set(shipped) & set(staging.REVEALS)
    problems = staging.release_problems(released, still_open=released)
    assert any(p.startswith("03_mask_then_softmax.ipynb needs") for p in problems)
    assert any(p.startswith("04_value_aggregation.ipynb needs") for p in problems)
    assert staging.release_problems(released) == [], "staged: 01-03 graded, 04 open"


def test_a_notebook_that_shows_an_open_answer_is_a_problem() -> None:
    problems = staging.release_problems({"02", "05"}, still_open={"02", "05"})
    assert any("05_the_head.ipynb shows answers" in p for p in problems)
    assert staging.release_problems({"02", "05"}, still_open={"05"}) == []


@pytest.mark.parametrize("count", range(1, len(ORDER) + 1))
def test_every_staged_release_ships_what_its_notebooks_import(count: int) -> None:
    released = set(ORDER[:count])
    assert staging.release_problems(released) == []
    shipped = set(staging.shippable_helpers(released))
    for notebook in released:
        assert helpers_imported(notebook) <= shipped
