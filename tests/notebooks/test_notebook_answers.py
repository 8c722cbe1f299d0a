"""No graded answer is on the page before it is asked for, in its notebook or an earlier one.

An answer counts as displayed when its solution, compared as operations (`tests.answer_ops`:
local names, whitespace, comments and statement boundaries do not matter), occurs in the code
cells or fenced code blocks that a student sees before the answer cell: in its own release
notebook, or anywhere in an earlier notebook. A later notebook may show an earlier notebook's
answers only where staging knows it: it imports a helper that gives them away
(`autograder.course.staging.NEEDS`) or declares them (`SHOWS`), so that a staged release holds it
back
until that notebook is graded.

Nor can an answer be put together from what the page provides: no expression built from the
callables above an answer cell (what the setup cells define, what other cells import from the
course helpers or define), the answer's own arguments and `@` computes the answer's result
(`tests.answer_ops.compositions`). And a graded number is not written in the prose above its cell.
"""

from __future__ import annotations

import ast
import re
import zlib
from functools import cache
from typing import Any

import nbformat
import pytest
import torch
import torch.nn as nn

from attention_course.references import nb05
from autograder.checks import run_in_process, spec_for
from autograder.course import staging
from autograder.model.contract import NOTEBOOKS as ORDER
from autograder.model.notebook_io import (
    exec_cell,
    grade_id,
    is_answer,
    is_setup,
    is_test,
    python_source,
    read,
    solution_answers,
    source,
)
from autograder.model.paths import NOTEBOOKS, ROOT, SOLUTIONS
from tests.answer_ops import (
    Term,
    attempt,
    compositions,
    contains,
    fenced_code,
    operations,
    page_callables,
    page_namespace,
    same,
)


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


@cache  # read by several tests and parameters; nobody changes what it returns
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


# ---- no answer is a composition of what the page provides ---------------------------------


def answer_index(nb: nbformat.NotebookNode, gid: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if is_answer(c) and grade_id(c) == gid)


def page_before(nb: nbformat.NotebookNode, gid: str) -> dict[str, Any]:
    """What a student's answer to `gid` can call without writing it (see tests.answer_ops)."""
    cells = nb.cells[: answer_index(nb, gid)]
    return page_namespace(cells, is_setup, lambda c: is_answer(c) or is_test(c))


def definitions(notebook: str) -> list[tuple[str, str, str]]:
    """(grade_id, name, "def" or "class") for every function and class an answer defines."""
    found = []
    for gid, src in solution_answers(read(SOLUTIONS / notebook)).items():
        for node in ast.parse(python_source(src)).body:
            if isinstance(node, ast.FunctionDef):
                found.append((gid, node.name, "def"))
            elif isinstance(node, ast.ClassDef):
                found.append((gid, node.name, "class"))
    return found


def solution_of(notebook: str, gid: str, name: str, page: dict[str, Any]) -> Any:
    """The instructor's definition of `name`, run after the notebook's earlier solutions."""
    ns = dict(page)
    for answer_id, src in solution_answers(read(SOLUTIONS / notebook)).items():
        exec_cell(src, ns, f"<solution {answer_id}>")
        if answer_id == gid:
            return ns[name]
    raise KeyError(gid)


SIZES = [(3, 5, 12, 7), (2, 6, 10, 4)]  # (B, T, C, hs): two draws, every size different


def sample(name: str, draw: int) -> Any:
    """A sample value for an answer's parameter, by its name (the contract's names)."""
    B, T, C, hs = SIZES[draw]
    g = torch.Generator().manual_seed(100 + draw)
    # a seed per name that is the same in every process (str's hash() is salted per process:
    # key and query drew the same weights in about one run in 97, and the search then found
    # only one of the two compositions)
    torch.manual_seed(200 + draw + zlib.crc32(name.encode()) % 97)
    values = {
        "x": lambda: torch.randn(B, T, C, generator=g),  # (B,T,C)
        "scores": lambda: 2 * torch.randn(B, T, T, generator=g),  # (B,T,T)
        "key": lambda: nn.Linear(C, hs, bias=False),
        "query": lambda: nn.Linear(C, hs, bias=False),
        "value": lambda: nn.Linear(C, hs, bias=False),
        "head": lambda: nb05.Head(C, hs, 8).eval(),
        "B": lambda: B,
        "T": lambda: T,
    }
    assert name in values, f"no sample for an answer's parameter {name!r}: add one to sample()"
    return values[name]()


def sample_args(fn: Any, draw: int) -> dict[str, Any]:
    import inspect

    params = inspect.signature(fn).parameters.values()
    return {p.name: sample(p.name, draw) for p in params if p.default is p.empty}


def composed_answers(solution: Any, page: dict[str, Any]) -> list[str]:
    """Expressions over the page's callables that compute `solution`'s result on two draws."""
    callables = page_callables(page)
    args = sample_args(solution, 0)
    expected = attempt(solution, list(args.values()))
    assert not isinstance(expected, type(attempt)) and expected is not None
    terms: list[Term] = compositions(args, callables)
    hits = [t.text for t in terms if t.calls_page and same(t.value, expected)]
    confirmed = []
    for text in hits:
        again = sample_args(solution, 1)
        value = attempt(lambda text=text, again=again: eval(text, {**page, **again}), [])  # noqa: S307
        if same(value, attempt(solution, list(again.values()))):
            confirmed.append(text)
    return confirmed


def graded_score(gid: str, name: str, solution: Any, text: str, page: dict[str, Any]) -> str:
    """How the grader scores the answer `def name(...): return text`."""
    import inspect

    ns = dict(page)
    params = ", ".join(inspect.signature(solution).parameters)
    exec_cell(f"def {name}({params}):\n    return {text}\n", ns, "<composed answer>")
    result = run_in_process(spec_for(gid), ns)
    return f"{result.score:g}/{result.max_score:g}"


FUNCTIONS = [
    (nb, gid, name) for nb in ORDER for gid, name, kind in definitions(nb) if kind == "def"
]
CLASSES = [
    (nb, gid, name) for nb in ORDER for gid, name, kind in definitions(nb) if kind == "class"
]


@pytest.mark.parametrize(("notebook", "gid", "name"), FUNCTIONS)
def test_no_function_answer_is_a_composition_of_what_the_page_provides(
    notebook: str, gid: str, name: str
) -> None:
    page = page_before(read(NOTEBOOKS / notebook), gid)
    solution = solution_of(notebook, gid, name, page)
    found = composed_answers(solution, page)
    scores = [f"{text} (graded {graded_score(gid, name, solution, text, page)})" for text in found]
    assert not found, f"{notebook} {gid}: {name} can be answered from the page: {scores}"


CLASS_ARGS = {"n_embd": 12, "head_size": 5, "block_size": 8, "n_head": 3}


def same_class(solution: type, candidate: type) -> bool:
    """Does `candidate`, built with the answer's arguments and its weights, compute the same?"""
    import inspect

    params = list(inspect.signature(solution).parameters.values())
    args = [CLASS_ARGS[p.name] for p in params if p.default is p.empty]
    torch.manual_seed(0)
    answer = solution(*args).eval()
    built = attempt(candidate, args)
    if not isinstance(built, nn.Module):
        return False
    try:
        built.load_state_dict(answer.state_dict(), strict=True)
    except RuntimeError:
        return False
    x = torch.randn(3, 6, CLASS_ARGS["n_embd"], generator=torch.Generator().manual_seed(1))
    return same(attempt(built.eval(), [x]), attempt(answer, [x]))


def same_classes(solution: type, page: dict[str, Any]) -> list[str]:
    callables = page_callables(page)
    return [
        name
        for name, value in callables.items()
        if isinstance(value, type) and issubclass(value, nn.Module) and same_class(solution, value)
    ]


@pytest.mark.parametrize(("notebook", "gid", "name"), CLASSES)
def test_no_class_answer_is_a_class_the_page_provides(notebook: str, gid: str, name: str) -> None:
    page = page_before(read(NOTEBOOKS / notebook), gid)
    found = same_classes(solution_of(notebook, gid, name, page), page)
    assert not found, f"{notebook} {gid}: the page provides {found}, which computes {name}"


NB04 = "04_value_aggregation.ipynb"
COMPOSED_ATTEND = "mask_then_softmax(affinities(x, key, query)) @ value(x)"


def with_setup_cell(notebook: str, code: str) -> nbformat.NotebookNode:
    """The release notebook with one more setup cell after its first one."""
    nb = read(NOTEBOOKS / notebook)
    planted = nbformat.v4.new_code_cell(code)
    planted.metadata["tags"] = ["setup"]
    nb.cells.insert(2, planted)
    return nb


def test_earlier_answers_imported_above_attend_are_found_and_would_pass() -> None:
    """The search finds the composition that the earlier layout of notebook 04 allowed, and the
    grader gives it full marks: the test above can fail."""
    nb = with_setup_cell(
        NB04,
        "from attention_course.references.nb02 import affinities\n"
        "from attention_course.references.nb03 import mask_then_softmax",
    )
    page = page_before(nb, "attend")
    solution = solution_of(NB04, "attend", "attend", page)
    found = composed_answers(solution, page)
    assert COMPOSED_ATTEND in found, found
    assert graded_score("attend", "attend", solution, COMPOSED_ATTEND, page) == "5/5"


def test_a_class_answer_imported_above_its_cell_is_found() -> None:
    nb = with_setup_cell(
        "05_the_head.ipynb", "from attention_course.references.nb05 import Head as Given"
    )
    page = page_before(nb, "head")
    assert same_classes(solution_of("05_the_head.ipynb", "head", "Head", page), page) == ["Given"]


# ---- no graded number in the prose above its cell -----------------------------------------


def numeric_answers(notebook: str) -> dict[str, dict[str, float]]:
    """grade_id -> {name: value} for the numbers (10 or more) an answer cell assigns."""
    nb = read(SOLUTIONS / notebook)
    ns: dict[str, Any] = {}
    for i, cell in enumerate(c for c in nb.cells if is_setup(c)):
        exec_cell(source(cell), ns, f"<setup {i}>")
    found: dict[str, dict[str, float]] = {}
    for gid, src in solution_answers(nb).items():
        exec_cell(src, ns, f"<solution {gid}>")
        names = [
            t.id
            for node in ast.parse(python_source(src)).body
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        ]
        numbers = {
            n: ns[n]
            for n in names
            if isinstance(ns[n], int | float) and not isinstance(ns[n], bool) and abs(ns[n]) >= 10
        }
        if numbers:
            found[gid] = numbers
    return found


def written(value: float) -> re.Pattern:
    """The ways prose writes a number: 1536, 1,536, 1 536, 1536.0."""
    if float(value).is_integer():
        n = int(value)
        forms = {str(n), f"{n:,}", f"{n:,}".replace(",", " "), f"{n:,}".replace(",", "\u202f")}
    else:
        forms = {repr(value), f"{value:g}"}
    alternatives = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
    return re.compile(rf"(?<![\w.,])(?:{alternatives})(?![\w]|[.,]\d)")


# answers whose number the question itself has to state, with the reason
STATED_BY_THE_QUESTION = {
    "SCORE_VARIANCE_64": "the question sets head_size = 64, and the variance is head_size",
}


def numbers_in_prose_before(nb: nbformat.NotebookNode, notebook: str) -> list[str]:
    shown = []
    for gid, numbers in numeric_answers(notebook).items():
        above = nb.cells[: answer_index(nb, gid)]
        prose = "\n".join(source(c) for c in above if c.cell_type == "markdown")
        shown += [
            f"{gid}: {name} = {v}"
            for name, v in numbers.items()
            if name not in STATED_BY_THE_QUESTION and written(v).search(prose)
        ]
    return shown


@pytest.mark.parametrize("notebook", ORDER)
def test_no_graded_number_is_written_above_its_cell(notebook: str) -> None:
    shown = numbers_in_prose_before(read(NOTEBOOKS / notebook), notebook)
    assert not shown, f"{notebook}: graded numbers in the prose above their cells: {shown}"


def test_a_count_given_away_in_the_title_is_caught() -> None:
    nb = read(NOTEBOOKS / "03_mask_then_softmax.ipynb")
    nb.cells[0].source += "\n- count the weights that survive the mask: 36 of 64."
    assert numbers_in_prose_before(nb, "03_mask_then_softmax.ipynb") == [
        "nonzero-count: NONZERO = 36"
    ]
    assert written(1536).search("3 x 32 x 16 = 1,536 weights")
    assert not written(36).search("0.36, 136, 36.5 and 3,600")


# ---- nor in the source of a helper the release ships ----------------------------------------
#
# A student can read every course helper a release ships (`inspect.getsource`). A staged release
# of notebooks 01..N, with N open, ships `staging.shippable_helpers`: no helper of it may hold an
# answer of N or a later notebook. Literally (the operations above), and by its core: the steps
# that make an answer (products, transposes, masks, softmaxes, sums, device checks) in order,
# with their arguments and the bookkeeping between them left out, all of them or all but the
# last (an answer "minus one line" is given away as well). The reference modules are checked
# literally only: they are the earlier answers that staging ships on purpose, and a later
# exercise may build on them by design (notebook 06's NoValueHead edits notebook 05's Head).

CORE_STEPS = {
    ".mT": "T",
    ".T": "T",
    ".transpose": "T",
    "torch.transpose": "T",
    "torch.matmul": "@",
    "torch.bmm": "@",
    "torch.einsum": "@",
    ".masked_fill": "mask",
    ".masked_fill_": "mask",
    "torch.where": "mask",
    "torch.masked_fill": "mask",
    "softmax": "softmax",
    ".exp": "exp",
    "torch.exp": "exp",
    ".sum": "sum",
    "torch.sum": "sum",
    ".mean": "mean",
    ".cumsum": "cumsum",
    "torch.cuda.is_available": "cuda?",
    "torch.backends.mps.is_available": "mps?",
    "torch.device": "device",
    "scaled_dot_product_attention": "sdpa",
    "torch.cat": "cat",
    ".register_forward_hook": "hook",
    ".element_size": "bytes",
}


def core(ops: list[str]) -> list[str]:
    """The answer-making steps of a list of operations, in order."""
    steps = []
    for op in ops:
        if " MatMult " in f" {op} ":
            steps.append("@")
        elif " Div " in f" {op} ":
            steps.append("div")
        elif (step := CORE_STEPS.get(op.split("(")[0])) is not None:
            steps.append(step)
    return steps


def gives_away(source_ops: list[str], answer_ops: list[str]) -> bool:
    """Does code with `source_ops` hold the core of an answer, or all of it but its last step?"""
    steps, answer = core(source_ops), core(answer_ops)
    if len(answer) < 2:
        return False
    return contains(steps, answer) or (len(answer) >= 4 and contains(steps, answer[:-1]))


def shipped_helpers(notebook: str) -> list[str]:
    """The helper files of a staged release of the notebooks up to `notebook`, which is open."""
    return staging.shippable_helpers(set(ORDER[: ORDER.index(notebook) + 1]))


@cache  # each helper parsed once, not once per answer it is compared with
def helper_ops(module: str) -> list[str]:
    return operations((ROOT / module).read_text(encoding="utf-8"))


def open_answers(notebook: str) -> list[tuple[str, str, list[str]]]:
    """(notebook, grade_id, operations) for every answer of `notebook` and the later ones."""
    later = ORDER[ORDER.index(notebook) :]
    return [(nb, gid, ops) for nb in later for gid, ops in answers(nb).items()]


@pytest.mark.parametrize("notebook", ORDER)
def test_no_helper_a_release_ships_holds_an_open_answer(notebook: str) -> None:
    found = [
        (module, nb, gid)
        for module in shipped_helpers(notebook)
        for nb, gid, ops in open_answers(notebook)
        if contains(helper_ops(module), ops)
        or (not module.startswith(REFERENCES) and gives_away(helper_ops(module), ops))
    ]
    assert not found, f"a release with {notebook} open ships helpers holding answers: {found}"


REFERENCES = "attention_course/references/"

# Two helpers as they once were: each held an answer a student could read in its release.
OLD_EXPLORER = """
def attention_weights(scores, recipe, correct=None):
    s = scores.detach().float() * recipe.scale
    if recipe.is_correct:
        return correct(s)
    T = s.shape[-1]
    later = torch.ones(T, T, dtype=torch.bool).triu(1)
    fill = FILLS[recipe.fill]
    if recipe.mask_first:
        return torch.softmax(s.masked_fill(later, fill), dim=recipe.dim)
    return torch.softmax(s, dim=recipe.dim).masked_fill(later, fill)
"""
OLD_GPU = """
def require_gpu():
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    raise NoGPU("no GPU")
"""


def test_the_core_comparison_finds_what_a_literal_one_misses() -> None:
    """The old explorer held notebook 03's recipe with its settings as parameters, and the old
    require_gpu was notebook 07's pick_device minus its last line: neither is a literal copy,
    both are caught by their core, and a helper that computes a wrong recipe is not."""
    mask_then_softmax = answers("03_mask_then_softmax.ipynb")["mask-then-softmax"]
    pick_device = answers("07_head_on_gpu.ipynb")["pick-device"]
    assert not contains(operations(OLD_EXPLORER), mask_then_softmax)
    assert gives_away(operations(OLD_EXPLORER), mask_then_softmax)
    assert gives_away(
        operations(OLD_GPU.replace("mps.is_available", "torch.backends.mps.is_available")),
        pick_device,
    )
    wrong_only = (
        "def after(s, later):\n    return torch.softmax(s, dim=-1).masked_fill(later, 0.0)\n"
    )
    assert not gives_away(operations(wrong_only), mask_then_softmax)
