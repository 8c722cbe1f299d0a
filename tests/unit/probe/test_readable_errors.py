"""Things that are not the student's fault read as one line in a kernel, not a traceback.

The cells run in a real IPython kernel (nbclient), where `CourseError._render_traceback_`
decides what the student sees: a missing data set and a missing GPU. And the grader's words
for answers that raised: a cell calling an earlier stub names that stub, and the feedback's
status says how many answer cells raised or are not answered yet.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from autograder.checks.base import CellResult, Check
from autograder.model.enums import CellState, Reason, Status
from autograder.model.grades import CellGrade, NotebookGrade
from autograder.probe.child import answer_label
from autograder.probe.plain import error_text
from autograder.publish.wording import status_words

ROOT = Path(__file__).resolve().parents[3]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FRAME = re.compile(r'Traceback|File "|---->|Cell In\[|line \d+|site-packages')


def run_cell(code: str, cwd: Path) -> list[dict]:
    """Execute one cell in a fresh python3 kernel started in `cwd`; return its outputs."""
    nb = new_notebook(cells=[new_code_cell(code)])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return [dict(o) for o in nb.cells[0].outputs]


def the_error(outputs: list[dict]) -> tuple[str, list[str]]:
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert len(errors) == 1, f"expected one error output, got {outputs}"
    lines = [ANSI.sub("", line) for entry in errors[0]["traceback"] for line in entry.split("\n")]
    return errors[0]["ename"], [line for line in lines if line.strip()]


def assert_one_line(lines: list[str], ename: str, words: str) -> None:
    assert len(lines) == 1, "expected a one-line message, got:\n" + "\n".join(lines)
    assert lines[0].startswith(f"{ename}: "), lines[0]
    assert words in lines[0], lines[0]
    assert not FRAME.search(lines[0]), lines[0]


@pytest.fixture
def helpers_outside_checkout(tmp_path: Path) -> Path:
    """A working directory holding an unmodified copy of the helpers, as Colab's install has.

    The kernel imports this copy (its working directory comes first on sys.path), so the data
    set is looked for in this directory's data/, which does not exist: nothing of the
    project's own data/ is touched or consulted.
    """
    shutil.copytree(
        ROOT / "attention_course",
        tmp_path / "attention_course",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return tmp_path


def test_missing_data_is_one_line(helpers_outside_checkout: Path, monkeypatch) -> None:
    monkeypatch.delenv("TINYSHAKESPEARE", raising=False)
    cwd = helpers_outside_checkout
    assert not (cwd / "data").exists()
    outputs = run_cell(
        "import attention_course\n"
        f"assert attention_course.__file__.startswith({str(cwd)!r}), attention_course.__file__\n"
        "from attention_course.data import load_text\n"
        "load_text(download=False)",
        cwd,
    )
    ename, lines = the_error(outputs)
    assert ename == "DataUnavailable"
    assert_one_line(lines, ename, "tinyshakespeare.txt")
    assert "TINYSHAKESPEARE" in lines[0], "the message says how to point at the file"
    assert not (cwd / "data").exists(), "download=False must not create data/"


def test_missing_gpu_is_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    outputs = run_cell(
        "import torch\n"
        "torch.backends.mps.is_available = lambda: False  # a Mac's GPU must not count here\n"
        "from attention_course.gpu import require_gpu\n"
        "require_gpu(torch.device('cpu'))",
        tmp_path,
    )
    ename, lines = the_error(outputs)
    assert ename == "NoGPU"
    assert_one_line(lines, ename, "Runtime > Change runtime type")


def test_a_students_own_error_keeps_its_traceback(tmp_path: Path) -> None:
    """The one-line rendering is for CourseError only: a bug in student code shows where."""
    outputs = run_cell("def f(x):\n    return x[5]\n\nf([1, 2])", tmp_path)
    ename, lines = the_error(outputs)
    assert ename == "IndexError"
    assert len(lines) > 1 and any("x[5]" in line for line in lines), lines


# ---- the grader's words for answer cells that raised -----------------------------------------


def _raised_by(cells: dict[str, str], call: str) -> BaseException:
    """Run answer cells as the probe does (compiled under their labels), then `call`."""
    ns: dict = {}
    try:
        for gid, src in cells.items():
            exec(compile(src, answer_label(gid), "exec"), ns)  # noqa: S102
        exec(compile(call, "<probe>", "exec"), ns)  # noqa: S102
    except Exception as err:  # noqa: BLE001 - the error is what is tested
        return err
    raise AssertionError(f"{call} did not raise")


def test_an_earlier_stub_is_named_not_an_empty_message() -> None:
    stub = "def affinities(x, key, query):\n    raise NotImplementedError()"
    caller = "def attend(x):\n    return affinities(x, None, None).softmax(-1)"
    text = error_text(_raised_by({"affinities": stub, "attend": caller}, "attend(1)"))
    assert text == (
        "NotImplementedError from `affinities` of answer cell affinities: not answered yet "
        "(the stub)"
    ), text
    module_stub = error_text(_raised_by({"masked": "raise NotImplementedError"}, "pass"))
    assert module_stub == "NotImplementedError in answer cell masked: not answered yet (the stub)"
    assert error_text(NotImplementedError("use a mask")) == "NotImplementedError: use a mask"
    assert error_text(KeyError()) == "KeyError", "no colon with nothing after it"


def _cell(gid: str, problem: str = "", reason: Reason | None = None) -> CellGrade:
    result = CellResult(gid, [Check("c", 1.0, 0.0 if problem else 1.0)], [], problem, reason)
    return CellGrade.judged(result, 1.0, gid)


def test_status_ok_says_which_answer_cells_raised_or_are_not_answered() -> None:
    cells = [
        _cell("a"),
        _cell("b", "NotImplementedError from `f` of answer cell a: ...", Reason.RAISED),
        _cell("c", "ValueError: bad shape", Reason.RAISED),
        _cell("d", "the cell still holds `raise NotImplementedError()`", Reason.UNANSWERED),
        CellGrade("why", 1.0, 0.0, None, "why", True, CellState.UNANSWERED),
    ]
    grade = NotebookGrade("ann", "02_queries_and_keys.ipynb", Status.OK, cells=cells)
    assert status_words(grade) == (
        "Your notebook ran to the end, but 2 answer cells raised an error and 2 answer cells "
        "are not answered yet (see below)."
    )
    grade.cells = [_cell("a"), cells[1]]
    assert (
        status_words(grade) == "Your notebook ran to the end, but 1 answer cell raised an error "
        "(see below)."
    )
    grade.cells = [_cell("a")]
    assert status_words(grade) == "Your notebook ran to the end."


def test_the_status_words_count_reasons_not_sentences() -> None:
    """A problem that reads like "raised" or "not answered yet" but has another reason (or
    none: a judged answer) is not counted; the words of each reason are the pages' own."""
    cells = [
        _cell("a", "the answer cell raised a question of style", Reason.GRADER_ERROR),
        _cell("b", "not answered yet, says the checks' detail"),
        _cell("c", "", Reason.OUT_OF_TIME),
    ]
    grade = NotebookGrade("ann", "02_queries_and_keys.ipynb", Status.OK, cells=cells)
    assert status_words(grade) == "Your notebook ran to the end."
    grade.cells.append(_cell("d", "the cell still holds its stub", Reason.UNANSWERED))
    assert status_words(grade) == (
        "Your notebook ran to the end, but 1 answer cell is not answered yet (see below)."
    )
