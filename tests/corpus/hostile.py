"""Whole submission notebooks built from the solutions by code, with what the grader must say.

- `release(nb)`: the notebook as students get it (nbgrader's ClearSolutions, hidden tests
  cleared, no outputs); `with_answers`, `correct`: the release with answers filled in.
- `rounds(nb)`: the corpus mutations grouped so one submission carries several of them, one
  per answer cell, in cells that do not use each other's names.
- `broken_cases()`, `hostile_cases()`: invalid JSON, stripped metadata, renamed files,
  deleted/duplicated/reordered cells, edited tests, endless loops, os._exit, 100 MB of output,
  memory hogs and monkeypatching, each with its expected status and points (`Expect`).

The examples (examples/make_examples.py) and the grader's tests both build from here.
"""

from __future__ import annotations

import copy
import csv
import html
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.notebook_io import grade_id, is_answer, is_test, read, solution_answers, source
from autograder.paths import SOLUTIONS
from autograder.rebuild import defined_names
from tests import corpus


@dataclass(frozen=True)
class Expect:
    """What grading one notebook must give."""

    status: str
    lost: frozenset[str] | None = frozenset()  # cells that must lose points; None: every cell
    named: tuple[tuple[str, str], ...] = ()  # (grade_id, mistake) that must be diagnosed
    free: frozenset[str] = frozenset()  # cells that use a lost cell's names: either is honest


@dataclass
class Case:
    student: str
    about: str
    files: dict[str, bytes]  # file name -> content
    expect: dict[str, Expect] = field(default_factory=dict)  # notebook -> expectation


def course_notebooks() -> list[str]:
    from autograder.contract import CONTRACT

    return [nb for nb in CONTRACT if (SOLUTIONS / nb).is_file()]


@cache
def master(notebook: str) -> NotebookNode:
    return read(SOLUTIONS / notebook)


def release(notebook: str) -> NotebookNode:
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions
    from traitlets.config import Config

    from autograder.nbgrader_settings import configure

    config = configure(Config())
    nb = copy.deepcopy(master(notebook))
    for pre in (ClearSolutions(config=config), ClearHiddenTests(config=config), ClearOutput()):
        nb, _ = pre.preprocess(nb, {})
    return nb


def with_answers(notebook: str, answers: dict[str, str]) -> NotebookNode:
    nb = release(notebook)
    for cell in nb.cells:
        if is_answer(cell) and grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    return nb


def solutions(notebook: str) -> dict[str, str]:
    return solution_answers(master(notebook))


def correct(notebook: str) -> NotebookNode:
    return with_answers(notebook, solutions(notebook))


def dump(nb: NotebookNode) -> bytes:
    return nbformat.writes(nb).encode()


def _uses(src: str, names: set[str]) -> bool:
    import ast

    try:
        tree = ast.parse(src)
    except SyntaxError:
        return True
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(tree))


def group(notebook: str, items: list) -> list[list]:
    """`items` (mutations or alternatives of one notebook) in as few submissions as possible:
    at most one per answer cell, never in two cells where one uses names the other defines."""
    sols = solutions(notebook)
    pending = list(items)
    out: list[list] = []
    while pending:
        chosen: list = []
        for item in list(pending):
            if any(c.grade_id == item.grade_id for c in chosen):
                continue
            mine = defined_names(sols[item.grade_id])
            clash = any(
                _uses(sols[c.grade_id], mine)
                or _uses(sols[item.grade_id], defined_names(sols[c.grade_id]))
                for c in chosen
            )
            if not clash:
                chosen.append(item)
                pending.remove(item)
        out.append(chosen)
    return out


def rounds(notebook: str) -> list[list[corpus.Mutation]]:
    """The notebook's corpus mutations, several per submission (see `group`)."""
    return group(notebook, [m for m in corpus.mutations() if m.notebook == notebook])


def alternative_rounds(notebook: str) -> list[list[corpus.Alternative]]:
    return group(notebook, [a for a in corpus.alternatives() if a.notebook == notebook])


def with_alternatives(notebook: str, alternatives: list[corpus.Alternative]) -> NotebookNode:
    answers = solutions(notebook)
    for a in alternatives:
        answers[a.grade_id] = a.source
    return with_answers(notebook, answers)


def mutated(notebook: str, mutations: list[corpus.Mutation]) -> NotebookNode:
    answers = solutions(notebook)
    for m in mutations:
        answers[m.grade_id] = corpus.apply(answers[m.grade_id], m)
    return with_answers(notebook, answers)


def dependents(notebook: str, grade_ids: set[str]) -> frozenset[str]:
    """Answer cells whose solution uses names defined by `grade_ids` (directly or not)."""
    sols = solutions(notebook)
    found: set[str] = set()
    frontier = set(grade_ids)
    while frontier:
        names = set().union(*(defined_names(sols[g]) for g in frontier))
        frontier = {
            g for g, src in sols.items() if g not in found | grade_ids and _uses(src, names)
        }
        found |= frontier
    return frozenset(found)


def expect_mutations(mutations: list[corpus.Mutation]) -> Expect:
    lost = frozenset(m.grade_id for m in mutations)
    notebook = mutations[0].notebook if mutations else ""
    return Expect(
        "ok",
        lost,
        tuple((m.grade_id, m.mistake) for m in mutations),
        dependents(notebook, set(lost)) if mutations else frozenset(),
    )


# ---- grading a class and reading what the grader wrote -----------------------------------


def write_class(folder: Path, cases: list[Case]) -> None:
    for case in cases:
        for name, content in case.files.items():
            path = folder / case.student / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)


def grade_command(submissions: Path, out: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(submissions),
        "--out",
        str(out),
        *options,
    ]


def grade(
    submissions: Path, out: Path, *options: str, env: dict | None = None, timeout: float = 1800
) -> subprocess.CompletedProcess:
    """`python -m autograder grade` in a subprocess, as an instructor runs it."""
    cmd = grade_command(submissions, out, "--quiet", *options)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def page_text(path: Path) -> str:
    """The text a reader sees on a page (tags dropped, entities decoded)."""
    text = re.sub(r"<style.*?</style>|<script.*?</script>", " ", path.read_text(), flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def hidden_test_lines() -> set[str]:
    """Every non-trivial line of every hidden test block of the masters."""
    lines = set()
    for notebook in course_notebooks():
        for cell in master(notebook).cells:
            src = source(cell)
            for block in re.findall(r"BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", src, re.S):
                lines |= {ln.strip() for ln in block.splitlines() if len(ln.strip()) > 12}
    return lines


def check(out: Path, cases: list[Case]) -> list[str]:
    """Every way the grader's outputs in `out` disagree with the cases' expectations."""
    from autograder.catalog import describe
    from autograder.grade import feedback_path

    grades = {(r["student"], r["notebook"]): r for r in read_csv(out / "grades.csv")}
    cells = {(r["student"], r["notebook"], r["grade_id"]): r for r in read_csv(out / "cells.csv")}
    named = {
        (r["student"], r["notebook"], r["grade_id"], r["mistake"])
        for r in read_csv(out / "diagnoses.csv")
    }
    problems = []
    for case in cases:
        for notebook, expect in case.expect.items():
            key = (case.student, notebook)
            row = grades.get(key)
            if row is None:
                problems.append(f"{key}: no row in grades.csv")
                continue
            if row["status"] != expect.status:
                problems.append(f"{key}: status {row['status']}, expected {expect.status}")
            for (student, nb, gid), c in cells.items():
                if (student, nb) != key:
                    continue
                lost = float(c["score"]) < float(c["max_score"])
                should = expect.lost is None or gid in expect.lost
                if gid in expect.free and not should:
                    continue
                if lost != should:
                    problems.append(
                        f"{key} {gid}: {c['score']}/{c['max_score']}, expected "
                        f"{'to lose points' if should else 'full marks'}"
                    )
            text = page_text(feedback_path(out, case.student, notebook))
            for gid, mistake in expect.named:
                if (case.student, notebook, gid, mistake) not in named:
                    problems.append(f"{key} {gid}: {mistake} not in diagnoses.csv")
                if describe(mistake) not in text:
                    problems.append(f"{key} {gid}: the words for {mistake} are not in the feedback")
    return problems


# ---- broken and hostile submissions of one notebook -------------------------------------


def _answer_ids(notebook: str) -> list[str]:
    return [g for g in solutions(notebook)]


def _append(notebook: str, gid: str, code: str) -> NotebookNode:
    answers = solutions(notebook)
    answers[gid] += "\n" + code.strip("\n") + "\n"
    return with_answers(notebook, answers)


def strip_metadata(nb: NotebookNode) -> NotebookNode:
    nb = copy.deepcopy(nb)
    nb.metadata = {}
    nb.nbformat_minor = 4  # cell ids are optional before 4.5: drop them too
    for cell in nb.cells:
        cell.metadata = {}
        cell.pop("id", None)
    return nb


def broken_cases(notebook: str) -> list[Case]:
    full = correct(notebook)
    ids = _answer_ids(notebook)
    text = dump(full)
    cases = [
        Case(
            "broken_json",
            "the file is cut in half: not JSON",
            {notebook: text[: len(text) // 2]},
            {notebook: Expect("invalid", None)},
        ),
        Case(
            "not_a_notebook",
            "valid JSON that is not a notebook",
            {notebook: json.dumps({"hello": "world"}).encode()},
            {notebook: Expect("invalid", None)},
        ),
        Case(
            "stripped_metadata",
            "every metadata field and cell id removed; answers correct",
            {notebook: dump(strip_metadata(full))},
            {notebook: Expect("ok")},
        ),
        Case(
            "renamed",
            "the correct notebook saved under another name",
            {"my homework (final).ipynb": text},
            {notebook: Expect("ok")},
        ),
    ]
    # Deleted, duplicated and reordered cells: test cells deleted, every answer cell
    # duplicated as an untouched stub, the cells in reverse order, the last answer deleted.
    nb = copy.deepcopy(full)
    stubs = {grade_id(c): copy.deepcopy(c) for c in release(notebook).cells if is_answer(c)}
    cells = []
    for cell in nb.cells:
        if is_test(cell) or (is_answer(cell) and grade_id(cell) == ids[-1]):
            continue
        cells.append(cell)
        if is_answer(cell):
            dup = stubs[grade_id(cell)]
            dup.id = f"{cell.id}-copy"
            cells.append(dup)
    nb.cells = cells[::-1]
    cases.append(
        Case(
            "shuffled_cells",
            "test cells deleted, answers duplicated as stubs, cells "
            "reversed, the last answer deleted",
            {notebook: dump(nb)},
            {notebook: Expect("ok", frozenset({ids[-1]}))},
        )
    )
    # Edited and neutralised test cells around a wrong answer.
    first = next(iter(r for r in rounds(notebook) if r), [])[:1]
    if first:
        nb = mutated(notebook, first)
        for cell in nb.cells:
            if is_test(cell):
                cell.source = "pass  # tests switched off"
        cases.append(
            Case(
                "edited_tests",
                "test cells replaced by `pass`, one wrong answer",
                {notebook: dump(nb)},
                {notebook: expect_mutations(first)},
            )
        )
    return cases


ENDLESS = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
"""
NOISE = """
import sys
import warnings
warnings.warn("this answer is noisy")
print("a line on stderr", file=sys.stderr)
"""
PRINT_100MB = """
for _ in range(100):
    print("x" * 1_000_000)
"""
MEMORY_HOG = """
import torch
_hog = []
while True:
    _hog.append(torch.ones(2**26))  # 256 MiB a step, written so it is resident
"""
SPAWN = """
import subprocess
_helpers = [
    subprocess.Popen(["sleep", "600"]),
    subprocess.Popen(["sleep", "600"], start_new_session=True),
]
"""
PATCHES = """
import torch
import torch.testing
import autograder.checks as _checks
import autograder.checks.base as _base
import autograder.checks.diagnostics as _diagnostics
torch.allclose = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
_checks.grade_in_notebook = lambda *args, **kwargs: 3.0
_base.close = lambda *args, **kwargs: True
_diagnostics.match_mistakes = lambda *args, **kwargs: []
"""


def hostile_cases(notebook: str) -> list[Case]:
    ids = _answer_ids(notebook)
    first, last = ids[0], ids[-1]
    cases = [
        Case(
            "hostile_loop",
            "an endless loop that ignores SIGINT at the end of the last answer",
            {notebook: dump(_append(notebook, last, ENDLESS))},
            {notebook: Expect("timeout", frozenset({last}))},
        ),
        Case(
            "hostile_exit",
            "os._exit(1) at the end of the last answer",
            {notebook: dump(_append(notebook, last, "import os\nos._exit(1)"))},
            {notebook: Expect("error", frozenset({last}))},
        ),
        Case(
            "hostile_sysexit",
            "sys.exit() at the end of the first answer",
            {notebook: dump(_append(notebook, first, "import sys\nsys.exit('bye')"))},
            {notebook: Expect("ok")},
        ),
        Case(
            "noisy",
            "a correct answer that warns and writes to stderr",
            {notebook: dump(_append(notebook, first, NOISE))},
            {notebook: Expect("ok")},
        ),
        Case(
            "hostile_print",
            "100 MB of printing in the first answer",
            {notebook: dump(_append(notebook, first, PRINT_100MB))},
            {notebook: Expect("ok")},
        ),
        Case(
            "hostile_spawn",
            "starts background processes (one in its own session) and leaves",
            {notebook: dump(_append(notebook, first, SPAWN))},
            {notebook: Expect("ok")},
        ),
        Case(
            "hostile_memory",
            "allocates until killed, after a correct first answer",
            {notebook: dump(_append(notebook, first, MEMORY_HOG))},
            {notebook: Expect("error")},
        ),
    ]
    wrong = next((r for r in rounds(notebook) if r and r[-1].grade_id != first), None)
    if wrong:
        m = wrong[-1:]
        nb = mutated(notebook, m)
        for cell in nb.cells:
            if is_answer(cell) and grade_id(cell) == first:
                cell.source += "\n" + PATCHES
        cases.append(
            Case(
                "hostile_patch",
                "torch.allclose, assert_close and the grader's own "
                "functions monkeypatched from an answer cell, one wrong answer",
                {notebook: dump(nb)},
                {notebook: expect_mutations(m)},
            )
        )
    nb = correct(notebook)
    extra = [
        nbformat.v4.new_code_cell(PATCHES),
        nbformat.v4.new_code_cell("import os\nos._exit(1)"),
    ]
    for i, cell in enumerate(extra):
        cell.id = f"added-{i}"
    nb.cells += extra
    cases.append(
        Case(
            "hostile_added_cells",
            "added cells that patch torch and call os._exit (added cells are not run)",
            {notebook: dump(nb)},
            {notebook: Expect("ok")},
        )
    )
    return cases
