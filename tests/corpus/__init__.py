"""Wrong and alternative answers for every answer cell.

Each notebook's module `nbNN.py` here lists
- MUTATIONS: a catalog mistake put into the solution's answer by string replacement (the
  replacement must apply, so the corpus follows the notebooks as they change);
- ALTERNATIVES: complete answers written differently that must earn full marks;
- WRITERS: answers written from scratch, each a function of `choose` (a draw among options,
  made by hypothesis), that either make one catalog mistake or none.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from autograder.contract import CONTRACT
from autograder.notebook_io import exec_cell, read, setup_sources, solution_answers
from autograder.paths import SOLUTIONS


@dataclass(frozen=True)
class Mutation:
    notebook: str
    grade_id: str
    mistake: str  # the catalog id the grader must name
    replace: tuple[tuple[str, str], ...]  # (old, new) pairs applied to the solution's answer
    label: str = ""

    @property
    def id(self) -> str:
        return f"{self.grade_id}:{self.mistake}" + (f":{self.label}" if self.label else "")


@dataclass(frozen=True)
class Alternative:
    notebook: str
    grade_id: str
    label: str
    source: str  # a complete correct answer written another way

    @property
    def id(self) -> str:
        return f"{self.grade_id}:{self.label}"


Choose = Callable[[str, Sequence[Any]], Any]  # choose(name, options) -> one of the options


@dataclass(frozen=True)
class Writer:
    """One way to write an answer cell from scratch, with a catalog mistake or none."""

    grade_id: str
    mistake: str | None  # None: a correct alternative
    label: str  # the way it is written: writers of one id differ in kind, not in spelling
    write: Callable[[Choose], str]

    @property
    def id(self) -> str:
        return f"{self.grade_id}:{self.mistake or 'correct'}:{self.label}"


def writers() -> list[Writer]:
    return [w for mod in _modules() for w in getattr(mod, "WRITERS", [])]


def fixing(write: Callable[[Choose], str], slot: str, index: int) -> Callable[[Choose], str]:
    """`write` with the option of one slot fixed (the other slots still drawn)."""

    def fixed(choose: Choose) -> str:
        return write(
            lambda name, options: options[index] if name == slot else choose(name, options)
        )

    return fixed


def variants(grade_id: str, label: str, write: Callable[[Choose], str], slot: str, n: int) -> list:
    """One correct Writer per option of `slot`: n ways that differ in that part."""
    return [Writer(grade_id, None, f"{label}-{i}", fixing(write, slot, i)) for i in range(n)]


def first_choice(name: str, options: Sequence[Any]) -> Any:
    """The `choose` that always takes the first option (a writer's plainest form)."""
    return options[0]


@pytest.fixture(scope="module")
def one_thread() -> Any:
    """Tiny tensors: one torch thread is faster than two, far faster on a busy machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _modules() -> list[Any]:
    mods = []
    for notebook in CONTRACT:
        name = f"tests.corpus.nb{notebook[:2]}"
        try:
            mods.append(importlib.import_module(name))
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
    return mods


def mutations() -> list[Mutation]:
    return [m for mod in _modules() for m in getattr(mod, "MUTATIONS", [])]


def alternatives() -> list[Alternative]:
    return [a for mod in _modules() for a in getattr(mod, "ALTERNATIVES", [])]


def apply(source: str, mutation: Mutation) -> str:
    for old, new in mutation.replace:
        if old not in source:
            raise AssertionError(
                f"{mutation.id}: {old!r} no longer occurs in the solution of {mutation.grade_id}"
            )
        source = source.replace(old, new)
    return source


def answers_with(notebook: str, grade_id: str, new_source: str) -> dict[str, str]:
    """The solution's answers of `notebook`, with `grade_id` replaced by `new_source`."""
    answers = solution_answers(read(SOLUTIONS / notebook))
    assert grade_id in answers, f"{notebook} has no answer cell {grade_id}"
    answers[grade_id] = new_source
    return answers


def solution_answers_of(notebook: str) -> dict[str, str]:
    return solution_answers(read(SOLUTIONS / notebook))


def mutated_answers(mutation: Mutation) -> dict[str, str]:
    original = solution_answers(read(SOLUTIONS / mutation.notebook))[mutation.grade_id]
    return answers_with(mutation.notebook, mutation.grade_id, apply(original, mutation))


def namespace(notebook: str, answers: dict[str, str]) -> dict[str, Any]:
    """Run the notebook's setup cells and the given answers, as the grader's sandbox does."""
    ns: dict[str, Any] = {}
    for i, src in enumerate(setup_sources(read(SOLUTIONS / notebook))):
        exec_cell(src, ns, f"<setup {i}>")
    for gid, src in answers.items():
        try:
            exec_cell(src, ns, f"<answer {gid}>")
        except Exception:
            pass  # the spec reports the missing names
    return ns
