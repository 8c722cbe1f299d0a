"""Staged release: which course helper gives away which notebook's answers, and when it ships.

Later notebooks build on earlier answers through reference modules in
`attention_course/references/`, never through a student's own earlier answer. Such a module
gives the answers of its notebook away, so:

- the grader hides it from the jail while probing that notebook or a later one
  (`hidden_helpers`): a module that reveals notebook N reveals every answer up to N that it
  holds, and no notebook imports a module revealing itself or a later notebook; a probe of
  its answer cells sees only the revealing modules its setup cells import
  (`probe_hidden_helpers`), so an answer cannot be composed from earlier answers that the
  notebook hands out only after it;
- a student release contains it only once its notebook is no longer open (`shippable_helpers`).

Paths are relative to the project root, in POSIX form; notebooks are named by their file name
(`"05_the_head.ipynb"`), and "05" or a path to the notebook are accepted as well.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from autograder.model.contract import NOTEBOOKS, notebook_named
from autograder.model.paths import ROOT

HELPERS = "attention_course"

# helper module -> the last notebook (in course order) whose graded answers it gives away
REVEALS: dict[str, str] = {
    "attention_course/references/nb02.py": "02_queries_and_keys.ipynb",
    "attention_course/references/nb03.py": "03_mask_then_softmax.ipynb",
    "attention_course/references/nb05.py": "05_the_head.ipynb",
    "attention_course/references/nb06.py": "06_experiments.ipynb",
}

# notebook -> the revealing helpers its cells import (a test reads the imports and agrees)
NEEDS: dict[str, tuple[str, ...]] = {
    "03_mask_then_softmax.ipynb": ("attention_course/references/nb02.py",),
    "04_value_aggregation.ipynb": (
        "attention_course/references/nb02.py",
        "attention_course/references/nb03.py",
    ),
    "06_experiments.ipynb": ("attention_course/references/nb05.py",),
    "07_head_on_gpu.ipynb": (
        "attention_course/references/nb05.py",
        "attention_course/references/nb06.py",
    ),
}


# notebook -> the revealing helpers its setup cells import: the only ones a probe of its answer
# cells may see (the demonstrations after an answer may import more; a test reads the setups)
SETUP_NEEDS: dict[str, tuple[str, ...]] = {
    "03_mask_then_softmax.ipynb": ("attention_course/references/nb02.py",),
    "06_experiments.ipynb": ("attention_course/references/nb05.py",),
    "07_head_on_gpu.ipynb": (
        "attention_course/references/nb05.py",
        "attention_course/references/nb06.py",
    ),
}


# notebook -> the last earlier notebook whose answers its own cells show as code (the lecture's
# lines that later notebooks repeat); releasing it gives those answers away as a helper would
SHOWS: dict[str, str] = {
    "05_the_head.ipynb": "02_queries_and_keys.ipynb",
}


def notebook_name(notebook: str | Path) -> str:
    """The contract file name of a notebook given as "05", "05_the_head.ipynb" or a path."""
    known = notebook_named(notebook)
    if known is not None:
        return known
    raise ValueError(f"unknown notebook {notebook!r}: expected one of {', '.join(NOTEBOOKS)}")


def _order(notebook: str | Path) -> int:
    return NOTEBOOKS.index(notebook_name(notebook))


def hidden_helpers(notebook: str | Path) -> list[str]:
    """Helper modules the jail hides while probing `notebook`'s answers.

    Every module that reveals `notebook` or a later one: what it holds answers this notebook's
    graded cells (a Head answers 02-05 in substance). Modules revealing only earlier notebooks
    stay visible, since this notebook may import them.
    """
    at = _order(notebook)
    return sorted(module for module, last in REVEALS.items() if _order(last) >= at)


def probe_hidden_helpers(notebook: str | Path) -> list[str]:
    """Helper modules hidden from the probes of `notebook`'s answer cells: every revealing
    module its setup cells do not import. An answer composed from earlier answers that the
    page does not hand out (04's setup gives no `affinities`) cannot import them there."""
    given = SETUP_NEEDS.get(notebook_name(notebook), ())
    return sorted(module for module in REVEALS if module not in given)


def module_name(module: str) -> str:
    """The import name of a helper file: "attention_course/references/nb02.py" ->
    "attention_course.references.nb02"."""
    return module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def helper_modules(root: Path = ROOT) -> list[str]:
    """Every Python file of the course helpers, relative to `root`."""
    folder = root / HELPERS
    return sorted(
        p.relative_to(root).as_posix() for p in folder.rglob("*.py") if "__pycache__" not in p.parts
    )


def open_notebooks(released: Iterable[str], still_open: Iterable[str] | None = None) -> set[str]:
    """The released notebooks that are still open assignments (not yet graded).

    Default: a staged release, where only the newest released notebook is open and every
    earlier one has been graded. Pass `still_open` when several are open at once.
    """
    names = {notebook_name(n) for n in released}
    if still_open is not None:
        return {notebook_name(n) for n in still_open}
    return {max(names, key=_order)} if names else set()


def shippable_helpers(released: set[str], still_open: Iterable[str] | None = None) -> list[str]:
    """Helper modules a student release of the notebooks `released` may contain.

    A module that reveals nothing always ships. One that reveals notebook N ships only when
    no open notebook comes at or before N: its answers are then all graded (see
    `open_notebooks` for which notebooks count as open).
    """
    first_open = min((_order(n) for n in open_notebooks(released, still_open)), default=None)
    return [
        module
        for module in helper_modules()
        if module not in REVEALS or first_open is None or _order(REVEALS[module]) < first_open
    ]


def shows_open_answers(
    released: set[str], still_open: Iterable[str] | None = None
) -> dict[str, str]:
    """Released notebook -> the earlier notebook whose answers its own cells show (SHOWS), for
    each one where that earlier notebook (or one before it) is still open."""
    first_open = min((_order(n) for n in open_notebooks(released, still_open)), default=None)
    return {
        name: shown
        for name in sorted({notebook_name(n) for n in released}, key=_order)
        if (shown := SHOWS.get(name)) and first_open is not None and _order(shown) >= first_open
    }


def release_problems(released: set[str], still_open: Iterable[str] | None = None) -> list[str]:
    """One line for each released notebook that would give an open notebook's answers away.

    Through a helper it needs that the release may not ship, or through its own cells (SHOWS).
    """
    allowed = set(shippable_helpers(released, still_open))
    shows = shows_open_answers(released, still_open)
    problems = []
    for notebook in sorted({notebook_name(n) for n in released}, key=_order):
        for module in NEEDS.get(notebook, ()):
            if module not in allowed:
                problems.append(
                    f"{notebook} needs {module}, which gives away the answers of "
                    f"{REVEALS[module]}: release {notebook} once {REVEALS[module]} is graded"
                )
        if notebook in shows:
            problems.append(
                f"{notebook} shows answers of notebooks up to {shows[notebook]} in its cells: "
                f"release it once those are graded"
            )
    return problems
