"""The time estimate at the top of every notebook is the timed read-through of
benchmarks/read_through.py: it agrees with the script within a few minutes, names the machine,
torch version and date of its run times, every code cell's run time is measured, and no notebook
asks more than the course's 75 minutes of a student."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.model.contract import NOTEBOOKS as ORDER
from autograder.model.notebook_io import read, source
from autograder.model.paths import ROOT, SOLUTIONS

MARGIN = 3  # minutes: run times measured on a shared machine move a little between runs
LIMIT = 75  # minutes a notebook may ask of a student (the course's budget)


def _load():
    path = ROOT / "benchmarks" / "read_through.py"
    spec = importlib.util.spec_from_file_location("read_through", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("read_through", module)
    spec.loader.exec_module(module)
    return module


rt = _load()
RECORD = rt.load_record()
HEADER = re.compile(
    r"\*\*Time:\*\* about (\d+) minutes: (\d+) of reading and running, (\d+) for [^.]+\."
    r"(?: The exercises at the end add (\d+) minutes\.)?"
)


def _header(notebook: str) -> str:
    return " ".join(source(read(SOLUTIONS / notebook).cells[0]).split())


@pytest.mark.parametrize("notebook", ORDER)
def test_every_code_cell_has_a_measured_run_time(notebook: str) -> None:
    e = rt.estimate(notebook, RECORD)
    assert not e.unmeasured, (
        f"{notebook}: cells {e.unmeasured[:5]} have no measured run time: run "
        f"`.venv/bin/python benchmarks/read_through.py --execute {notebook[:2]} --headers "
        f"{notebook[:2]}`, then `python -m autograder release`"
    )


@pytest.mark.parametrize("notebook", ORDER)
def test_header_agrees_with_the_read_through(notebook: str) -> None:
    e = rt.estimate(notebook, RECORD)
    found = HEADER.search(_header(notebook))
    assert found, f"{notebook}: no '**Time:** about N minutes: a of reading and running, b for'"
    total, first, second = (int(g) for g in found.groups()[:3])
    assert first + second == total
    want_total, want_first, want_second = rt.header_numbers(e)
    fix = f"run `.venv/bin/python benchmarks/read_through.py --headers {notebook[:2]}`"
    measured = f"{notebook}: {total} min, measured {e.total:.1f}; {fix}"
    assert abs(total - want_total) <= MARGIN, measured
    assert abs(first - want_first) <= MARGIN, f"{notebook}: reading {first}, measured {want_first}"
    assert abs(second - want_second) <= MARGIN, f"{notebook}: answers {second}, not {want_second}"
    assert int(found.group(4) or 0) == e.exercise_minutes, f"{notebook}: exercise minutes; {fix}"


@pytest.mark.parametrize("notebook", ORDER)
def test_header_names_hardware_torch_and_date_of_its_run_times(notebook: str) -> None:
    text = _header(notebook)
    m = RECORD["machine"]
    for fact in (f"{m['cores']}-core {rt.processor(m)} CPU", f"torch {m['torch']}", m["date"]):
        assert fact in text, f"{notebook}: the header does not say {fact!r}"
    assert "benchmarks/read_through.py" in text


@pytest.mark.parametrize("notebook", ORDER)
def test_no_notebook_asks_more_than_75_minutes(notebook: str) -> None:
    e = rt.estimate(notebook, RECORD)
    total = int(HEADER.search(_header(notebook)).group(1))
    assert total <= LIMIT and e.total <= LIMIT + 1, f"{notebook}: {e.total:.1f} minutes"


def test_the_counts_follow_the_stated_rules() -> None:
    assert rt.words("Read [the docs](https://example.org/a-b) now, `q @ k`.") == 6
    region = "def f(x):\n    ### BEGIN SOLUTION\n    # a comment\n    y = x\n\n    return y\n"
    assert rt.solution_lines(region + "    ### END SOLUTION\n") == 2
    assert rt.prediction_names("A = ...  # a number\nB, C = 1, 2\nlower = 3\n") == ["A", "B", "C"]
    assert rt.code_lines("a = 1\n\n   \nb = 2\n") == 2
    assert rt.shows_code("x = 1\nsource(CharModel.forward)") and not rt.shows_code("resource(1)")


def test_header_text_is_what_the_script_writes(tmp_path: Path) -> None:
    """`--headers` rewrites only the Time paragraph, and the result parses as the test reads it."""
    notebook = ORDER[-1]
    e = rt.estimate(notebook, RECORD)
    text = rt.header(e, RECORD["machine"])
    found = HEADER.search(" ".join(text.split()))
    assert found and tuple(int(g) for g in found.groups()[:3]) == rt.header_numbers(e)
    cell = nbformat.v4.new_markdown_cell(
        "# Title\n\nIntro.\n\n**Time:** about 1 minutes: x.\n\nEnd."
    )
    new = rt.TIME_PARAGRAPH.sub(lambda _: text, cell.source, count=1)
    assert new.startswith("# Title\n\nIntro.\n\n**Time:** about ") and new.endswith("\n\nEnd.")
