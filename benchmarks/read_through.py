"""How long a student spends on each notebook: a timed read-through, and the header it backs.

    .venv/bin/python benchmarks/read_through.py                # estimates, from the recorded times
    .venv/bin/python benchmarks/read_through.py --execute 06   # run 06 in full first, record it
    .venv/bin/python benchmarks/read_through.py --execute all  # every notebook (a few minutes)
    .venv/bin/python benchmarks/read_through.py --headers      # write the estimates into solutions/

A notebook's estimate is reading + running + answering, counted on what a student has in front
of them (the release in notebooks/) and timed on the instructor's notebook (solutions/, where
every answer is written, so that every cell runs as it does for a student who has answered):

- reading: the prose (markdown outside the answer cells; link targets and markup left out) at
  150 words a minute, about two thirds of the 238 words a minute adults read non-fiction
  silently (Brysbaert, 2019), since this is study reading of technical text; the code outside
  the setup and answer cells at 15 non-empty lines a minute (4 s a line), the code a cell shows
  as its output (`source(...)` of a course helper, counted when it runs) at the same rate, and
  the self-check cells at 30 (read closely only when they fail);
- running: the wall time of every code cell in a full run (the training lengths a student
  gets, not the short ones of an unattended run), measured by `--execute` and recorded in
  read_through.json beside this file with the machine, the torch version and the date;
- answering: 2 minutes for each predicted value, 8 for a written answer, and for a code answer
  3 minutes plus half a minute for every line the student writes (the lines of the model
  solution's region, which the release replaces with its stub).

The exercises at the end are not part of the estimate: the header adds their stated minutes
("(15 min)"), leaving out the optional ones. `--headers` rewrites the "**Time:**" paragraph at the
top of every notebook in solutions/ (then run `python -m autograder release`), and
tests/notebooks/test_read_through.py holds each header to this estimate; the measured run times go
stale
when a code cell changes, and that test names the cells that need `--execute` again.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.model.contract import NOTEBOOKS as ORDER  # noqa: E402
from autograder.model.notebook_io import (  # noqa: E402
    grade_id,
    is_answer,
    is_setup,
    is_test,
    read,
    source,
)
from autograder.model.paths import NOTEBOOKS, SOLUTIONS  # noqa: E402

RECORD = Path(__file__).with_name("read_through.json")

WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 15
CHECK_LINES_PER_MINUTE = 30
MINUTES_PER_PREDICTION = 2.0
MINUTES_PER_WRITTEN_ANSWER = 8.0
CODE_ANSWER_MINUTES = 3.0
CODE_ANSWER_MINUTES_PER_LINE = 0.5

_LINK = re.compile(r"\]\([^)]*\)")
_TAG = re.compile(r"<[^>\n]+>")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_'’.\-]*")
_EXERCISE = re.compile(r"^\d\. \*\*[^*]+\*\* \((\d+) min\)", re.MULTILINE)


def words(markdown: str) -> int:
    """Words a reader reads: link targets, HTML tags, markup and lone symbols left out."""
    return len(_WORD.findall(_TAG.sub(" ", _LINK.sub("]", markdown))))


def code_lines(src: str) -> int:
    return sum(1 for line in src.splitlines() if line.strip())


def solution_lines(src: str) -> int:
    """Lines a student writes: those of the model solution's region (the release keeps the
    rest of the cell), blank lines and comments left out."""
    inside, count = False, 0
    for line in src.splitlines():
        if "### BEGIN SOLUTION" in line:
            inside = True
        elif "### END SOLUTION" in line:
            inside = False
        elif inside and line.strip() and not line.strip().startswith("#"):
            count += 1
    return count


def prediction_names(src: str) -> list[str]:
    """The upper-case names a prediction cell assigns."""
    import ast

    from autograder.model.notebook_io import python_source

    names = []
    for node in ast.parse(python_source(src)).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name) and leaf.id.isupper() and leaf.id not in names:
                        names.append(leaf.id)
    return names


@dataclass
class Estimate:
    """Minutes a student spends on one notebook, by part."""

    notebook: str
    prose_words: int
    code_lines: int
    check_lines: int
    run_seconds: float
    predictions: int
    written: int
    code_answers: dict[str, int]  # grade_id -> lines of the model solution
    shown_lines: int  # lines of code that cells display as their output
    exercise_minutes: int
    unmeasured: list[str]  # code cells of solutions/ with no recorded run time

    @property
    def reading(self) -> float:
        return (
            self.prose_words / WORDS_PER_MINUTE
            + (self.code_lines + self.shown_lines) / CODE_LINES_PER_MINUTE
            + self.check_lines / CHECK_LINES_PER_MINUTE
        )

    @property
    def running(self) -> float:
        return self.run_seconds / 60

    @property
    def answering(self) -> float:
        code = sum(
            CODE_ANSWER_MINUTES + CODE_ANSWER_MINUTES_PER_LINE * n
            for n in self.code_answers.values()
        )
        return (
            self.predictions * MINUTES_PER_PREDICTION
            + self.written * MINUTES_PER_WRITTEN_ANSWER
            + code
        )

    @property
    def total(self) -> float:
        return self.reading + self.running + self.answering


def load_record() -> dict:
    if RECORD.exists():
        return json.loads(RECORD.read_text(encoding="utf-8"))
    return {"machine": {}, "seconds": {}}


def estimate(notebook: str, record: dict | None = None) -> Estimate:
    """The read-through estimate of one notebook, from its release and the recorded times."""
    record = load_record() if record is None else record
    released, solved = read(NOTEBOOKS / notebook), read(SOLUTIONS / notebook)
    solutions = {grade_id(c): source(c) for c in solved.cells if is_answer(c)}
    prose = code = checks = predictions = written = 0
    code_answers: dict[str, int] = {}
    exercises = 0
    for cell in released.cells:
        text = source(cell)
        if cell.cell_type == "markdown":
            if is_answer(cell):
                written += 1
                continue
            prose += words(text)
            if "\n## Exercises\n" in "\n" + text:
                after = ("\n" + text).split("\n## Exercises\n", 1)[1]
                exercises += sum(
                    int(m.group(1))
                    for m in _EXERCISE.finditer(after)
                    if "optional" not in m.group(0)
                )
        elif is_setup(cell):
            continue
        elif is_answer(cell):
            gid = grade_id(cell) or ""
            names = prediction_names(solutions.get(gid, ""))
            if gid.startswith("predict-"):
                predictions += len(names)
            else:
                code_answers[gid] = solution_lines(solutions.get(gid, ""))
        elif is_test(cell):
            checks += code_lines(text)
        else:
            code += code_lines(text)
    times = record.get("seconds", {}).get(notebook, {})
    shown = record.get("shown_lines", {}).get(notebook, {})
    run_cells = [c for c in solved.cells if c.cell_type == "code" and c.get("id")]
    unmeasured = [c["id"] for c in run_cells if c["id"] not in times]
    run_seconds = sum(times.get(c["id"], 0.0) for c in run_cells)
    return Estimate(
        notebook,
        prose,
        code,
        checks,
        run_seconds,
        predictions,
        written,
        code_answers,
        sum(shown.values()),
        exercises,
        unmeasured,
    )


def machine() -> dict[str, str | int]:
    """What the run times were measured on: processor, cores, torch, date."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count() or 1,
        "torch": torch.__version__.split("+")[0],
        "date": datetime.date.today().isoformat(),
    }


def shows_code(src: str) -> bool:
    """A cell that displays the source of a course helper (attention_course.source)."""
    return bool(re.search(r"^source\(", src, re.MULTILINE))


def displayed_lines(cell) -> int:  # noqa: ANN001 - an executed notebook cell
    """Non-empty lines of the plain text a cell displayed."""
    text = ""
    for out in cell.get("outputs", []):
        if out.get("output_type") in ("execute_result", "display_data"):
            text += out.get("data", {}).get("text/plain", "")
    return code_lines(text)


def execute(notebook: str, timeout: int = 1200) -> tuple[dict[str, float], dict[str, int]]:
    """Run solutions/<notebook> in full in a fresh kernel: seconds per code cell id, and the
    lines of code shown by the cells that display a helper's source."""
    import nbformat
    from nbclient import NotebookClient

    env_before = {k: os.environ.pop(k, None) for k in ("NBGRADER_EXECUTION", "COURSE_SHORT_RUNS")}
    os.environ["MPLBACKEND"] = "Agg"
    try:
        nb = nbformat.read(str(SOLUTIONS / notebook), as_version=4)
        seconds: dict[str, float] = {}
        shown: dict[str, int] = {}
        client = NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
        )
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                start = time.perf_counter()
                client.execute_cell(cell, index)
                seconds[cell["id"]] = round(time.perf_counter() - start, 2)
                if shows_code(cell.source):
                    shown[cell["id"]] = displayed_lines(cell)
        return seconds, shown
    finally:
        for key, value in env_before.items():
            if value is not None:
                os.environ[key] = value


def header_numbers(e: Estimate) -> tuple[int, int, int]:
    """(total, reading and running, answering) in whole minutes, as the header states them."""
    first = round(e.reading + e.running)
    second = round(e.answering)
    return first + second, first, second


TIME_PARAGRAPH = re.compile(r"^\*\*Time:\*\*.*?(?=\n\n|\Z)", re.S | re.M)
_NUMBERS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def _count(n: int, thing: str) -> str:
    word = _NUMBERS[n] if n < len(_NUMBERS) else str(n)
    if n == 1:
        return ("an " if thing[0] in "aeiou" else "a ") + thing
    return f"{word} {thing}s"


def answers_in_words(e: Estimate) -> str:
    """ "three answers, two predictions and a written answer" for what the notebook asks."""
    parts = [
        _count(n, thing)
        for n, thing in (
            (len(e.code_answers), "code answer"),
            (e.predictions, "prediction"),
            (e.written, "written answer"),
        )
        if n
    ]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def processor(m: dict) -> str:
    """The processor of the record, readable: 'Intel(R) Xeon(R) Processor' -> 'Intel Xeon'."""
    name = re.sub(r"\((R|TM|tm)\)|\bProcessor\b|\bCPU\b", "", str(m.get("cpu", "")))
    return " ".join(name.split()) or "unknown"


def header(e: Estimate, m: dict) -> str:
    """The "**Time:**" paragraph of a notebook: the estimate and how it was made."""
    total, first, second = header_numbers(e)
    exercises = (
        f" The exercises at the end add {e.exercise_minutes} minutes." if e.exercise_minutes else ""
    )
    text = (
        f"**Time:** about {total} minutes: {first} of reading and running, {second} for "
        f"{answers_in_words(e)}.{exercises} These figures come from a timed read-through: prose "
        f"at {WORDS_PER_MINUTE} words a minute, code at {CODE_LINES_PER_MINUTE} lines a minute, "
        "a few minutes per answer, and each cell's run time measured on a "
        f"{m.get('cores', '?')}-core {processor(m)} CPU with torch {m.get('torch', '?')} on "
        f"{m.get('date', '?')} (`benchmarks/read_through.py` in the course repository)."
    )
    return textwrap.fill(text, width=100, break_on_hyphens=False)


def write_headers(record: dict, notebooks: list[str]) -> list[str]:
    """Rewrite the "**Time:**" paragraph of each notebook in solutions/; the ones changed."""
    import nbformat

    changed = []
    for nb_name in notebooks:
        path = SOLUTIONS / nb_name
        nb = nbformat.read(str(path), as_version=4)
        first = nb.cells[0]
        text = header(estimate(nb_name, record), record.get("machine", {}))
        if not TIME_PARAGRAPH.search(first.source):
            raise SystemExit(f"{nb_name}: no '**Time:**' paragraph in its first cell")
        new = TIME_PARAGRAPH.sub(lambda _, text=text: text, first.source, count=1)
        if new != first.source:
            first.source = new
            nbformat.write(nb, str(path))
            changed.append(nb_name)
    return changed


def _chosen(keys: list[str]) -> list[str]:
    """The notebooks named by their numbers ("05"), or all of them for "all"."""
    if "all" in keys:
        return list(ORDER)
    return [nb for nb in ORDER if any(nb.startswith(k) for k in keys)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--execute",
        nargs="*",
        metavar="NN",
        help="run these notebooks in full first and record their cells' times ('all': every one)",
    )
    p.add_argument(
        "--headers",
        nargs="*",
        metavar="NN",
        help="write the estimates into the '**Time:**' paragraphs of solutions/ (these notebooks, "
        "or every one without NN), then run `python -m autograder release`",
    )
    args = p.parse_args(argv)
    record = load_record()
    if args.execute:
        for nb in _chosen(args.execute):
            print(f"running {nb} in full ...", flush=True)
            seconds, shown = execute(nb)
            record.setdefault("seconds", {})[nb] = seconds
            record.setdefault("shown_lines", {})[nb] = shown
        record["machine"] = machine()
        RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    m = record.get("machine", {})
    print(
        f"run times: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
        f"torch {m.get('torch', '?')}, {m.get('date', '?')}"
    )
    print(
        f"{'notebook':<28}{'words':>6}{'code':>6}{'check':>6}{'read':>6}{'run':>6}{'answer':>7}"
        f"{'total':>7}{'exerc.':>7}"
    )
    for nb in ORDER:
        e = estimate(nb, record)
        flag = f"  ({len(e.unmeasured)} cells not timed)" if e.unmeasured else ""
        print(
            f"{nb:<28}{e.prose_words:>6}{e.code_lines:>6}{e.check_lines:>6}{e.reading:>6.1f}"
            f"{e.running:>6.1f}{e.answering:>7.1f}{e.total:>7.1f}{e.exercise_minutes:>7}{flag}"
        )
    if args.headers is not None:
        for nb in write_headers(record, _chosen(args.headers or ["all"])):
            print(f"header rewritten: solutions/{nb}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
