"""Things that are not the student's fault read as one line in a kernel, not a traceback.

The cells run in a real IPython kernel (nbclient), where `CourseError._render_traceback_`
decides what the student sees: a missing data set and a missing GPU.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
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
        "require_gpu()",
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
