"""An answer that imports its graded names scores 0 with `imported-answer`; one that defines
them (however it is written) keeps its points."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from autograder.jail.jail import Jail
from autograder.model.course import load_masters
from autograder.probe.child import answer_label, exec_cell, origins
from autograder.worker.judge import score_answers
from autograder.worker.provenance import recorded_imports, revealing_imports, screen, static_imports
from autograder.worker.rebuild import defined_names
from autograder.worker.sandbox import ProbeJob, Sandbox
from tests.corpus import hostile

NAMES = ["average_loop", "N_PARAMS", "Head"]


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ("from attention_course.answers import average_loop", ["average_loop"]),
        ("from attention_course.answers import loop as average_loop", ["average_loop"]),
        ("import attention_course.answers as Head", ["Head"]),
        ("import helpers\nHead = helpers.reference.Head", ["Head"]),
        ("import helpers\nN_PARAMS: int = helpers.N_PARAMS", ["N_PARAMS"]),
        ("average_loop = F.softmax", ["average_loop"]),  # F comes from the setup cell
        ("from torch import cumsum as average_loop\nN_PARAMS = 3 * 32 * 16", ["average_loop"]),
        ("from torch import cumsum as c\naverage_loop = c", ["average_loop"]),
        # made at run time: every graded name of the cell
        ("exec('def average_loop(x):\\n    return x')", NAMES),
        (
            "import importlib\naverage_loop = getattr(importlib.import_module('json'), 'loads')",
            NAMES,
        ),
        ("def average_loop(x):\n    return x\nglobals()['average_loop'] = print", NAMES),
        ("import sys\ndef Head(): ...\nHead = sys.modules['json'].JSONDecoder", NAMES),
        ("def average_loop(x):\n    return x\naverage_loop.__code__ = len.__code__", NAMES),
        # built from a module the cell imports (not the plain libraries)
        ("import json\nclass Head(json.JSONDecoder):\n    pass", ["Head"]),
        (
            "import json, torch.nn as nn\n"
            "Head = type('Head', (nn.Module,), dict(vars(json.JSONEncoder)))",
            NAMES,
        ),
        ("import json\nHead = type('Head', (json.JSONEncoder,), {})", ["Head"]),
        (
            "from attention_course import answers\n@answers.swap\ndef average_loop(x): ...",
            ["average_loop"],
        ),
        ("from attention_course.answers import *", NAMES),
    ],
)
def test_imported_graded_names_are_found_in_the_source(source: str, flagged: list[str]) -> None:
    setup = ["import torch\nfrom torch.nn import functional as F"]
    assert static_imports(source, NAMES, setup) == flagged


@pytest.mark.parametrize(
    "source",
    [
        "def average_loop(x):\n    return x.cumsum(1)",
        "average_loop = lambda x: x",
        "N_PARAMS = 3 * 32 * 16",
        "import torch\nN_PARAMS = torch.ones(3, 32, 16).numel()",
        "import torch.nn as nn\nclass Head(nn.Module):\n    pass",
        "from torch import cumsum\nimport math",  # imports, but of names that are not graded
        "%%time\ndef average_loop(x):\n    return x",
        "this is not python (",
        "import functools\n@functools.lru_cache\ndef average_loop(x):\n    return x",
        "import torch.nn as nn\nclass Head(nn.Module):\n    def forward(self, x):\n"
        "        return -x",
        "import math\nN_PARAMS = math.prod((3, 32, 16))",
        "import torch\naverage_loop = lambda x: torch.cumsum(x, 1)",
        "def average_loop(x):\n    return getattr(x, 'cumsum')(1)",  # getattr on a value
        "def Head(x):\n    return [m for m in x.modules()]",  # nn.Module.modules, not sys's
    ],
)
def test_answers_that_define_their_names_are_not_flagged(source: str) -> None:
    assert static_imports(source, NAMES, ["import torch"]) == []


def _namespace(setup: str, answer: str, gid: str = "head") -> dict:
    ns: dict = {}
    exec_cell(setup, ns, "<setup 0>")
    exec_cell(answer, ns, answer_label(gid))
    return ns


SETUP = """
import functools, json
import torch.nn as nn
class Head(nn.Module):
    def forward(self, x):
        return x
"""


@pytest.mark.parametrize(
    ("answer", "flagged"),
    [
        ("def average_loop(x):\n    return x", False),
        ("@functools.lru_cache\ndef average_loop(x):\n    return x", False),
        (
            "def _wrap(f):\n    @functools.wraps(f)\n    def g(x):\n        return f(x)\n"
            "    return g\n@_wrap\ndef average_loop(x):\n    return x",
            False,
        ),
        ("class UnmaskedHead(Head):\n    def forward(self, x):\n        return -x", False),
        ("class UnmaskedHead(Head):\n    pass", False),  # wrong, but not imported
        ("average_loop = json.dumps", True),
        (
            "import importlib\naverage_loop = getattr(importlib.import_module('json'), 'loads')",
            True,
        ),
        ("exec('def average_loop(x):\\n    return x')", True),
        ("class UnmaskedHead(json.JSONDecoder):\n    pass", True),
        ("UnmaskedHead = json.JSONEncoder", True),
        ("UnmaskedHead = type('UnmaskedHead', (nn.Module,), dict(vars(json.JSONEncoder)))", True),
    ],
)
def test_the_childs_record_checked_by_the_grader_finds_names_not_written_in_a_cell(
    answer: str, flagged: bool
) -> None:
    ns = _namespace(SETUP, answer)
    names = [n for n in ("average_loop", "UnmaskedHead") if n in ns]
    assert names, "the answer defines no graded name"
    record = json.loads(json.dumps(origins(ns, names)))  # as it travels, plain data
    found = recorded_imports(record, names, {"head": answer}, ["<setup 0>"])
    assert bool(found) == flagged, found


def test_an_erased_or_forged_record_does_not_hide_an_import() -> None:
    """Student code may replace what the child writes: a missing record counts as imported,
    and a record naming a line of the cell where nothing is defined does too."""
    answer = "import json\naverage_loop = json.loads\n"
    assert recorded_imports({}, ["average_loop"], {"head": answer}) == {
        "average_loop": "no record of where it was made"
    }
    forged = {"average_loop": {"kind": "function", "file": "<answer head>", "line": 2}}
    assert (
        "no definition"
        in recorded_imports(forged, ["average_loop"], {"head": answer})["average_loop"]
    )
    honest = "def average_loop(x):\n    return x\n"
    record = {"average_loop": {"kind": "function", "file": "<answer head>", "line": 1}}
    assert recorded_imports(record, ["average_loop"], {"head": honest}) == {}
    elsewhere = {"average_loop": {"kind": "function", "file": "<answer other>", "line": 1}}
    assert recorded_imports(elsewhere, ["average_loop"], {"head": honest}) != {}


def test_screen_keeps_missing_answers_and_flags_either_witness() -> None:
    ok = {"a": 1}
    assert screen(ok, "def average_loop(x): ...", NAMES) == ok
    assert screen({"!missing": ["Head"]}, "import Head", NAMES) == {"!missing": ["Head"]}
    assert screen(ok, "import json", NAMES, {"Head": "json"}) == {"!imported": ["Head"]}
    assert screen(ok, "import Head", NAMES) == {"!imported": ["Head"]}


# ---- end to end, jailed: an imported answer that is correct still scores 0 -----------------

NOTEBOOK = hostile.course_notebooks()[0]
MASTER = load_masters()[NOTEBOOK]


@pytest.fixture(scope="module")
def helper_jail(tmp_path_factory: pytest.TempPathFactory) -> Jail:
    """The course helpers plus a module holding the correct answers of notebook 01."""
    course = tmp_path_factory.mktemp("helpers") / "attention_course"
    shutil.copytree(Path(Jail.from_settings().course), course)
    sources = hostile.solutions(NOTEBOOK).values()
    (course / "answers.py").write_text("import torch\n\n" + "\n\n".join(sources))
    return dataclasses.replace(Jail.from_settings(), course=course)


@pytest.mark.slow  # a real jail
def test_an_imported_correct_answer_scores_zero_with_the_reason(
    helper_jail: Jail, tmp_path: Path
) -> None:
    box = Sandbox(cell_timeout=10, memory_bytes=512 * 2**20, scratch=tmp_path, jail=helper_jail)
    gids = list(MASTER.graded)
    names = {g: next(iter(defined_names(hostile.solutions(NOTEBOOK)[g]))) for g in gids}
    imported = {gids[0]: f"from attention_course.answers import {names[gids[0]]}"}
    imported[gids[1]] = (  # invisible to the source check: the child's record, checked, sees it
        f"def _get():\n    from attention_course.answers import {names[gids[1]]} as f\n"
        f"    return f\n{names[gids[1]]} = _get()\n"
    )
    imported[gids[2]] = (  # the record erased as well (and the source check sees that)
        "import __main__\n__main__.origins = lambda *args, **kwargs: {}\n" + imported[gids[1]]
    ).replace(names[gids[1]], names[gids[2]])
    answers = {**hostile.solutions(NOTEBOOK), **imported}
    try:
        results, _ = score_answers(MASTER, answers, box)
    finally:
        box.close()
    for gid in imported:
        assert results[gid].score == 0, results[gid].render()
        assert results[gid].mistakes == ["imported-answer"]
    assert set(imported) == set(gids)


@pytest.mark.slow  # a real jail
def test_the_same_imports_would_earn_full_marks_without_the_check(
    helper_jail: Jail, tmp_path: Path
) -> None:
    """What the check takes away: the imported answer computes correct outputs."""
    from autograder.checks import spec_for

    box = Sandbox(cell_timeout=10, memory_bytes=512 * 2**20, scratch=tmp_path, jail=helper_jail)
    gid = list(MASTER.graded)[0]
    name = next(iter(defined_names(hostile.solutions(NOTEBOOK)[gid])))
    spec = spec_for(gid)
    cases = spec.cases()
    answer = f"from attention_course.answers import {name}"
    try:
        outcome = box.probe(ProbeJob(gid, MASTER.spec_module, MASTER.setup, [(gid, answer)]), cases)
    finally:
        box.close()
    assert spec.evaluate(cases, outcome.observed).score == MASTER.graded[gid]
    assert outcome.imported == {name: "/jail/lib/attention_course/answers.py"}


# ---- an answer composed from earlier answers that its notebook does not hand out -----------

NB04 = "04_value_aggregation.ipynb"
COMPOSED = {
    "static": (
        "from attention_course.references.nb02 import affinities\n"
        "from attention_course.references.nb03 import mask_then_softmax\n\n"
        "def attend(x, key, query, value):\n"
        "    return mask_then_softmax(affinities(x, key, query)) @ value(x)\n"
    ),
    "dynamic": (  # no import statement for the source check: only the probe's jail stops it
        "import importlib\n\n"
        "def attend(x, key, query, value):\n"
        "    nb02 = importlib.import_module('attention_course.references.nb02')\n"
        "    nb03 = importlib.import_module('attention_course.references.nb03')\n"
        "    return nb03.mask_then_softmax(nb02.affinities(x, key, query)) @ value(x)\n"
    ),
}


def test_revealing_imports_are_those_the_setup_does_not_hand_out() -> None:
    nb03 = "from attention_course.references.nb03 import mask_then_softmax"
    assert revealing_imports(nb03) == ["attention_course.references.nb03"]
    assert revealing_imports("import attention_course.references.nb02 as r") == [
        "attention_course.references.nb02"
    ]
    assert revealing_imports("from attention_course.references import nb05") == [
        "attention_course.references.nb05"
    ]
    assert revealing_imports(nb03, [f"import torch\n{nb03}"]) == []
    assert revealing_imports("from attention_course import plots\nimport torch") == []
    flagged = screen({"!missing": ["attend"]}, COMPOSED["static"], ["attend"])
    assert flagged == {"!imported": ["attend"]}


@pytest.mark.slow  # a real jail
@pytest.mark.parametrize("how", sorted(COMPOSED))
def test_an_answer_composed_from_earlier_references_scores_zero(how: str, tmp_path: Path) -> None:
    """04 hands out neither `affinities` nor `mask_then_softmax`: composing them from the
    references (which compute the right output) earns nothing, jailed, whichever way they are
    imported."""
    master = load_masters(notebooks=(NB04,))[NB04]
    box = Sandbox(
        cell_timeout=10, memory_bytes=512 * 2**20, scratch=tmp_path, jail=Jail.from_settings()
    )
    answers = {**hostile.solutions(NB04), "attend": COMPOSED[how]}
    try:
        results, _ = score_answers(master, answers, box)
    finally:
        box.close()
    assert results["attend"].score == 0, results["attend"].render()
    if how == "static":
        assert results["attend"].mistakes == ["imported-answer"]
