"""The example class (`python -m autograder examples [TARGET]`, `make release`, `make grade`).

Students: `correct` (the solutions, every notebook), `untouched` (the release as handed out),
`mistakes_1`, `mistakes_2` (classic mistakes, one per notebook where the course has one
below), `stripped_written` and `three_copies` (the first notebook with a written answer,
without metadata, and as three files side by side), and broken or hostile submissions of the
first notebook: invalid JSON, stripped
metadata, a renamed file, deleted/duplicated/reordered cells, edited tests, an endless loop
ignoring SIGINT, os._exit, sys.exit, 100 MB of printing, a memory hog, monkeypatching, added
cells. Each student folder gets an ABOUT.txt saying what it holds and what the grader should
report. The wrong answers are small programs of their own (not edits of the solutions), so
they stay wrong however the solutions are written.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests, ClearOutput
from traitlets.config import Config

from autograder.course.nbgrader_settings import configure
from autograder.course.nbgrader_stubs import CourseClearSolutions
from autograder.model.contract import CONTRACT
from autograder.model.notebook_io import (
    answer_cells,
    grade_id,
    is_answer,
    is_test,
    read,
    solution_answers,
    source,
    strip_solution_markers,
)
from autograder.model.paths import EXAMPLES, SOLUTIONS


@dataclass(frozen=True)
class Expect:
    """What grading one notebook must give."""

    status: str  # or alternatives: "error or timeout"
    lost: frozenset[str] | None = frozenset()  # cells that must lose points; None: every cell
    named: tuple[tuple[str, str], ...] = ()  # (grade_id, mistake) that must be diagnosed
    free: frozenset[str] = frozenset()  # cells that may lose points too (they use a lost one)
    meant: tuple[tuple[str, str], ...] = ()  # (grade_id, mistake) the answer was written to show


@dataclass
class Case:
    student: str
    about: str
    files: dict[str, bytes]  # file name -> content
    expect: dict[str, Expect] = field(default_factory=dict)  # notebook -> expectation


# ---- notebooks made from the solutions --------------------------------------------------------


def course_notebooks() -> list[str]:
    return [nb for nb in CONTRACT if (SOLUTIONS / nb).is_file()]


@cache
def _master(notebook: str) -> NotebookNode:
    return read(SOLUTIONS / notebook)


def master(notebook: str) -> NotebookNode:
    return copy.deepcopy(_master(notebook))


def release(notebook: str) -> NotebookNode:
    """The notebook as students get it (the release's ClearSolutions, hidden tests cleared)."""
    config = configure(Config())
    nb = master(notebook)
    clear = CourseClearSolutions(config=config)
    for pre in (clear, ClearHiddenTests(config=config), ClearOutput()):
        nb, _ = pre.preprocess(nb, {})
    return nb


def solutions(notebook: str) -> dict[str, str]:
    return solution_answers(_master(notebook))


def with_answers(notebook: str, answers: dict[str, str]) -> NotebookNode:
    nb = release(notebook)
    for cell in nb.cells:
        if is_answer(cell) and grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    return nb


def written_answers(notebook: str) -> dict[str, str]:
    """grade_id -> the master's text of each written (markdown) answer."""
    return {
        gid: strip_solution_markers(source(c))
        for gid, c in answer_cells(_master(notebook)).items()
        if c.cell_type == "markdown"
    }


def correct(notebook: str) -> NotebookNode:
    """The release with every answer filled in from the solutions, written answers too."""
    return with_answers(notebook, full_answers(notebook))


def full_answers(notebook: str) -> dict[str, str]:
    return {**written_answers(notebook), **solutions(notebook)}


def dump(nb: NotebookNode) -> bytes:
    return nbformat.writes(nb).encode()


def answer_ids(notebook: str) -> list[str]:
    return list(solutions(notebook))


def appended(notebook: str, gid: str, code: str) -> NotebookNode:
    """The correct notebook with `code` run at the end of answer cell `gid`."""
    answers = full_answers(notebook)
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


# ---- classic mistakes, written as students write them ----------------------------------------


@dataclass(frozen=True)
class Mistake:
    notebook: str
    grade_id: str
    meant: str  # the catalog id the answer is meant to show
    source: str


def _nb(number: str) -> str:
    return next(nb for nb in CONTRACT if nb.startswith(number))


MISTAKES = [
    Mistake(_nb("01"), "average-loop", "loop-exclusive", """
def average_loop(x):
    B, T, C = x.shape
    out = torch.zeros_like(x)
    for b in range(B):
        for t in range(1, T):
            out[b, t] = x[b, :t].mean(0)  # stops one step early
    return out
"""),
    Mistake(_nb("01"), "average-matmul", "tril-unnormalised", """
def average_matmul(x):
    T = x.shape[1]
    return torch.tril(torch.ones(T, T)) @ x  # sums the past, never divides
"""),
    Mistake(_nb("02"), "affinities", "swapped-qk", """
def affinities(x, key, query):
    return key(x) @ query(x).transpose(-2, -1)
"""),
    Mistake(_nb("02"), "param-count", "bias", """
N_PARAMS = 3 * (32 * 16 + 16)
"""),
    Mistake(_nb("03"), "mask-then-softmax", "mask-after-softmax", """
def mask_then_softmax(scores):
    T = scores.shape[-1]
    tril = torch.tril(torch.ones(T, T, device=scores.device))
    return torch.softmax(scores, dim=-1).masked_fill(tril == 0, 0.0)
"""),
    Mistake(_nb("03"), "mask-then-softmax", "softmax-dim", """
def mask_then_softmax(scores):
    T = scores.shape[-1]
    tril = torch.tril(torch.ones(T, T, device=scores.device))
    return torch.softmax(scores.masked_fill(tril == 0, float("-inf")), dim=-2)
"""),
    Mistake(_nb("04"), "attend", "aggregate-x", """
def attend(x, key, query, value):
    T = x.shape[1]
    wei = query(x) @ key(x).transpose(-2, -1)
    wei = wei.masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf"))
    return torch.softmax(wei, dim=-1) @ x
"""),
    Mistake(_nb("05"), "head", "no-scale", """
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1)  # never scaled
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return self.dropout(torch.softmax(wei, dim=-1)) @ self.value(x)
"""),
    Mistake(_nb("07"), "weights-bytes", "", """
import torch


def weights_bytes(B, T, n_head=1, dtype=torch.float32):
    return B * n_head * T * T  # counts elements, not bytes
"""),
]  # fmt: skip


def mistakes_of(notebook: str) -> list[Mistake]:
    return [m for m in MISTAKES if m.notebook == notebook]


def with_mistakes(notebook: str, mistakes: list[Mistake]) -> NotebookNode:
    answers = full_answers(notebook)
    for m in mistakes:
        answers[m.grade_id] = m.source.strip("\n") + "\n"
    return with_answers(notebook, answers)


def expect_mistakes(mistakes: list[Mistake]) -> Expect:
    meant = tuple((m.grade_id, m.meant) for m in mistakes if m.meant)
    return Expect("ok", frozenset(m.grade_id for m in mistakes), meant=meant)


# ---- broken and hostile submissions of one notebook ------------------------------------------

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
torch.allclose = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
try:
    import autograder.checks as _checks
    import autograder.checks.base as _base
    _checks.grade_in_notebook = lambda *args, **kwargs: 3.0
    _base.close = lambda *args, **kwargs: True
except ImportError:  # the jail hides the grader: only torch can be patched
    pass
"""


def broken_cases(notebook: str) -> list[Case]:
    """Files that are not what they should be; the honest points of what is in them."""
    full = correct(notebook)
    ids = answer_ids(notebook)
    text = dump(full)
    cases = [
        Case("broken_json", "the file is cut in half: not JSON",
             {notebook: text[: len(text) // 2]}, {notebook: Expect("invalid", None)}),
        Case("not_a_notebook", "valid JSON that is not a notebook",
             {notebook: json.dumps({"hello": "world"}).encode()},
             {notebook: Expect("invalid", None)}),
        Case("stripped_metadata", "every metadata field and cell id removed; answers correct",
             {notebook: dump(strip_metadata(full))}, {notebook: Expect("ok")}),
        Case("renamed", "the correct notebook saved under another name",
             {"my homework (final).ipynb": text}, {notebook: Expect("ok")}),
    ]  # fmt: skip
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
    about = (
        "test cells deleted, answers duplicated as stubs, cells reversed, the last answer deleted"
    )
    cases.append(Case("shuffled_cells", about, {notebook: dump(nb)},
                      {notebook: Expect("ok", frozenset({ids[-1]}))}))  # fmt: skip
    wrong = mistakes_of(notebook)[:1]
    if wrong:
        nb = with_mistakes(notebook, wrong)
        for cell in nb.cells:
            if is_test(cell):
                cell.source = "pass  # tests switched off"
        cases.append(Case("edited_tests", "test cells replaced by `pass`, one wrong answer",
                          {notebook: dump(nb)}, {notebook: expect_mistakes(wrong)}))  # fmt: skip
    return cases


def hostile_cases(notebook: str) -> list[Case]:
    """Answers that fight the grader; each earns what its code earns, no more."""
    ids = answer_ids(notebook)
    first, last = ids[0], ids[-1]
    exit_ = "import os\nos._exit(1)"

    def case(student: str, about: str, nb: NotebookNode, expect: Expect) -> Case:
        return Case(student, about, {notebook: dump(nb)}, {notebook: expect})

    cases = [
        case("hostile_loop", "an endless loop that ignores SIGINT at the end of the last answer",
             appended(notebook, last, ENDLESS), Expect("timeout", frozenset({last}))),
        case("hostile_exit", "os._exit(1) at the end of the last answer",
             appended(notebook, last, exit_), Expect("error", frozenset({last}))),
        case("hostile_sysexit", "sys.exit() at the end of the first answer",
             appended(notebook, first, "import sys\nsys.exit('bye')"), Expect("ok")),
        case("noisy", "a correct answer that warns and writes to stderr",
             appended(notebook, first, NOISE), Expect("ok")),
        case("hostile_print", "100 MB of printing in the first answer",
             appended(notebook, first, PRINT_100MB), Expect("ok")),
        case("hostile_spawn", "starts background processes (one in its own session) and leaves",
             appended(notebook, first, SPAWN), Expect("ok")),
        case("hostile_memory", "allocates until killed, after a correct first answer",
             appended(notebook, first, MEMORY_HOG),  # stopped for memory, or for time when
             Expect("error or timeout", free=frozenset({first}))),  # CPU is short; its probe too
    ]  # fmt: skip
    wrong = [m for m in mistakes_of(notebook) if m.grade_id != first][:1]
    if wrong:
        nb = with_mistakes(notebook, wrong)
        for cell in nb.cells:
            if is_answer(cell) and grade_id(cell) == first:
                cell.source += "\n" + PATCHES
        about = "torch.allclose, assert_close and the grader monkeypatched, one wrong answer"
        cases.append(case("hostile_patch", about, nb, expect_mistakes(wrong)))
    nb = correct(notebook)
    extra = [
        nbformat.v4.new_code_cell(PATCHES),
        nbformat.v4.new_code_cell("import os\nos._exit(1)"),
    ]
    for i, cell in enumerate(extra):
        cell.id = f"added-{i}"
    nb.cells += extra
    about = "added cells that patch torch and call os._exit (added cells are not run)"
    cases.append(case("hostile_added_cells", about, nb, Expect("ok")))
    return cases


# ---- the example class --------------------------------------------------------------------------

MISTAKE_STUDENTS = 2


def cases() -> list[Case]:
    """Every example student, with the expected outcome per notebook."""
    notebooks = course_notebooks()
    out = [
        Case("correct", "the solutions: full marks everywhere",
             {nb: dump(correct(nb)) for nb in notebooks}, {nb: Expect("ok") for nb in notebooks}),
        Case("untouched", "the release, nothing filled in: status unanswered, zero everywhere",
             {nb: dump(release(nb)) for nb in notebooks},
             {nb: Expect("unanswered", None) for nb in notebooks}),
    ]  # fmt: skip
    for k in range(MISTAKE_STUDENTS):
        files, expect = {}, {}
        for nb in notebooks:
            mistakes = mistakes_of(nb)
            if k < len(mistakes):
                files[nb] = dump(with_mistakes(nb, [mistakes[k]]))
                expect[nb] = expect_mistakes([mistakes[k]])
            else:
                files[nb] = dump(correct(nb))
                expect[nb] = Expect("ok")
        out.append(
            Case(f"mistakes_{k + 1}", "classic mistakes, named in the feedback", files, expect)
        )
    first = notebooks[0]
    return out + written_cases(notebooks) + broken_cases(first) + hostile_cases(first)


def written_cases(notebooks: list[str]) -> list[Case]:
    """The first notebook with a written answer, handed in as real students do: its metadata
    stripped (the written answer is found where it stands and waits for hand grading), and
    three copies side by side (the untouched release, a finished copy as a browser names a
    second download, Colab's copy of an earlier try with one answer): the finished one is
    graded whatever the files' times, and the page, grades.csv and the report name the two
    left out."""
    notebook = next((nb for nb in notebooks if written_answers(nb)), None)
    if notebook is None:
        return []
    stem = notebook[:-6]
    first = answer_ids(notebook)[0]
    copies = {
        notebook: dump(release(notebook)),
        f"{stem} (1).ipynb": dump(correct(notebook)),
        f"Copy of {notebook}": dump(with_answers(notebook, {first: solutions(notebook)[first]})),
    }
    return [
        Case("stripped_written", "every metadata field removed; answers correct, the written "
             "answer included: it is found after its question and waits for hand grading",
             {notebook: dump(strip_metadata(correct(notebook)))}, {notebook: Expect("ok")}),
        Case("three_copies", f"{notebook} as released, {stem} (1).ipynb finished, and Colab's "
             f"Copy of {notebook} with one answer: the finished copy is graded (the most "
             "answers filled in, then the newest), the other two are named as left out",
             copies, {notebook: Expect("ok")}),
    ]  # fmt: skip


def describe(case: Case) -> str:
    lines = [case.about, "", "expected:"]
    for nb, e in case.expect.items():
        lost = "every cell" if e.lost is None else (", ".join(sorted(e.lost)) or "nothing")
        lines.append(f"  {nb}: status {e.status}; loses points in {lost}")
        lines += [f"    {gid} shows the mistake {mistake}" for gid, mistake in e.meant]
    return "\n".join(lines) + "\n"


def write(target: Path) -> list[Case]:
    if target.exists():
        shutil.rmtree(target)
    made = cases()
    for case in made:
        folder = target / case.student
        folder.mkdir(parents=True)
        for name, content in case.files.items():
            (folder / name).write_bytes(content)
        (folder / "ABOUT.txt").write_text(describe(case))
    return made


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder examples`: its options, description and examples."""
    p.description = (
        "Write the example class: students with wrong, partial and hostile submissions, each "
        "with an ABOUT.txt saying what the grader should find (TARGET is replaced)."
    )
    p.epilog = """examples:
  python -m autograder examples                 # examples/submissions/
  python -m autograder examples /tmp/klass      # elsewhere
  python -m autograder grade examples/submissions --out out/   # then grade them"""
    p.add_argument(
        "target",
        metavar="TARGET",
        type=Path,
        nargs="?",
        default=EXAMPLES,
        help="the folder to write (default examples/submissions)",
    )


def run(args: argparse.Namespace) -> int:
    target = args.target
    made = write(target)
    print(f"wrote {len(made)} example students into {target}")
    return 0
