"""Wrong and alternative answers for every answer cell.

Each notebook's module `nbNN.py` here (and `predictions.py`, for the prediction cells) lists
- WRITERS: answers written from scratch, each a function of `choose` (a draw among options,
  made by hypothesis), that either make one catalog mistake or none;
- MUTATIONS and ALTERNATIVES: one answer per (cell, mistake) and a few correct ones, taken
  from the writers in their plainest form (`exported`), for the tests that grade a whole
  notebook: they replace the answer cell's source, so they never depend on the solutions'
  text.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from autograder.model.contract import CONTRACT
from autograder.model.course import load_masters
from autograder.model.notebook_io import exec_cell, read, setup_sources, solution_answers
from autograder.model.paths import SOLUTIONS


@dataclass(frozen=True)
class Mutation:
    notebook: str
    grade_id: str
    mistake: str  # the catalog id the grader must name
    replace: tuple[tuple[str, str], ...] = ()  # (old, new) pairs applied to the answer
    label: str = ""
    source: str = ""  # a whole answer written from scratch: replaces the answer when set

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


def exported(
    notebook: str,
    writers: list[Writer],
    alternatives_per_cell: int = 2,
    only: frozenset[str] | None = None,
) -> tuple[list[Mutation], list[Alternative]]:
    """The first writer of each (cell, mistake) as a Mutation (of the mistakes in `only`, when
    given), the first correct writers of each cell as Alternatives, all in their plainest form.
    Writers that redefine a name of the notebook's setup (label 'own-head') stay out: a whole
    notebook runs after them."""
    mutations: dict[tuple[str, str], Mutation] = {}
    alternatives: list[Alternative] = []
    for w in writers:
        if w.label == "own-head":
            continue
        source = w.write(first_choice)
        if w.mistake is None:
            if sum(a.grade_id == w.grade_id for a in alternatives) < alternatives_per_cell:
                alternatives.append(Alternative(notebook, w.grade_id, w.label, source))
        elif (w.grade_id, w.mistake) not in mutations and (only is None or w.mistake in only):
            mutations[(w.grade_id, w.mistake)] = Mutation(
                notebook, w.grade_id, w.mistake, label=w.label, source=source
            )
    return list(mutations.values()), alternatives


def extra_sizes(grade_id: str, choose: Choose) -> dict[str, tuple[int, ...]] | None:
    """Three more sizes to check a cell on: B == T == hs (2..6), T = 1 and any (1..6 each),
    so that every answer meets both edges.

    Each tuple is what the cell's spec takes (see `CellSpec.resized`); None for cells of
    constants, which have no sizes.
    """
    n = choose("n", range(2, 7))
    a, b, c, d = (choose(f"n{i}", range(1, 7)) for i in range(4))
    kinds = {"edge_BTH": (n, n, n), "edge_T1": (a, 1, c), "drawn": (a, b, c)}  # (B, T, hs)
    sizes = {key: _cell_sizes(grade_id, B, T, hs, d) for key, (B, T, hs) in kinds.items()}
    return None if None in sizes.values() else sizes  # type: ignore[return-value]


def _cell_sizes(grade_id: str, B: int, T: int, hs: int, d: int) -> tuple[int, ...] | None:
    """The size tuple of a cell's spec for batch B, length T, head size hs (C drawn as d)."""
    if grade_id.startswith("average-"):
        return (B, T, hs)
    if grade_id in ("affinities", "attend"):
        return (B, T, d + 1, hs)
    if grade_id == "mask-then-softmax":
        return (B, T, T)
    if grade_id == "head":
        return (d + 1, hs, T + d, B, T)  # n_embd, head_size, block_size >= T, B, T
    if grade_id in ("capture-attention", "unmasked-head", "value-ablation"):
        return (B, T, d, hs, T + d)  # B, T, C, head_size, block_size
    if grade_id == "sdpa-forward":
        return (B, T)
    return None


def setup_namespace() -> dict[str, Any]:
    """What the notebooks' setup cells give an answer: torch, nn, F, math and a Head."""
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from autograder.probe.modules import CourseHead

    return {"torch": torch, "nn": nn, "F": F, "math": math, "Head": CourseHead}


def grade_written(writer: Writer, choose: Choose, seed: int) -> tuple[str, Any]:
    """Write an answer with `choose`, run it beside the setup names, grade it in-process on
    the extra sizes (B == T == hs, T = 1 and one drawn with `choose` too) and tensors from
    `seed`."""
    from autograder.checks import run_in_process, spec_for

    source = writer.write(choose)
    spec = spec_for(writer.grade_id).resized(extra_sizes(writer.grade_id, choose) or {}, seed=seed)
    ns = setup_namespace()
    try:
        exec_cell(source, ns, f"<answer {writer.grade_id}>")
    except Exception:  # noqa: S110 - the spec reports the missing names
        pass
    return source, run_in_process(spec, ns)


def draws(writer: Writer) -> bool:
    """Does the answer or the cell's sizes depend on a draw (else one example says it all)?"""
    made: list[str] = []

    def recording(name: str, options: Sequence[Any]) -> Any:
        made.append(name)
        return options[0]

    writer.write(recording)
    return bool(made) or extra_sizes(writer.grade_id, first_choice) is not None


@dataclass
class Tally:
    """Per catalog id: [wrong answers, lost points, named]; per answer cell: [correct answers,
    full marks with nothing named]. `add` says whether the answer was graded as it should be."""

    wrong: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    right: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

    def add(self, writer: Writer, result: Any) -> bool:
        lost = result.score < result.max_score
        if writer.mistake is None:
            clean = not lost and not result.mistakes
            self.right[writer.grade_id][0] += 1
            self.right[writer.grade_id][1] += clean
            return clean
        named = lost and writer.mistake in result.mistakes
        counts = self.wrong[writer.mistake]
        counts[0] += 1
        counts[1] += lost
        counts[2] += named
        return named

    def table(self) -> str:
        lines = [f"{'catalog id':22s} {'answers':>8s} {'lost pts':>9s} {'named':>7s} {'rate':>7s}"]
        for mistake in sorted(self.wrong):
            n, lost, named = self.wrong[mistake]
            lines.append(f"{mistake:22s} {n:8d} {lost:9d} {named:7d} {100 * named / n:6.1f}%")
        lines += ["", f"{'answer cell (correct)':22s} {'answers':>8s} {'full, unnamed':>14s}"]
        for gid in sorted(self.right):
            n, clean = self.right[gid]
            lines.append(f"{gid:22s} {n:8d} {clean:14d} {100 * clean / n:6.1f}%")
        return "\n".join(lines)


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
    extra = ("tests.corpus.predictions", "tests.corpus.context")
    return [*mods, *(importlib.import_module(name) for name in extra)]


def mutations() -> list[Mutation]:
    return [m for mod in _modules() for m in getattr(mod, "MUTATIONS", [])]


def alternatives() -> list[Alternative]:
    return [a for mod in _modules() for a in getattr(mod, "ALTERNATIVES", [])]


def apply(source: str, mutation: Mutation) -> str:
    if mutation.source:
        return mutation.source
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
    """Run the notebook's setup cells and the given answers, each after the master's cells
    above it that define names it reads, as the grader's sandbox does."""
    ns: dict[str, Any] = {}
    master = load_masters(notebooks=(notebook,))[notebook]
    for i, src in enumerate(setup_sources(master.nb)):
        exec_cell(src, ns, f"<setup {i}>")
    order = [g for g in master.code_answers if g in answers]
    steps = master.context.plan([(g, answers[g]) for g in order], order[-1]).steps if order else []
    steps += [("answer", g, src) for g, src in answers.items() if g not in order]
    for kind, name, src in steps:
        try:
            exec_cell(src, ns, name if kind == "context" else f"<answer {name}>")
        except Exception:
            pass  # the spec reports the missing names
    return ns
