"""Broken and hostile submissions, end to end through the command line, with the jail on.

One class (the first notebook only) graded once with tight limits: every attack class of the
threat model (tests/corpus/hostile.py `attacks`), the broken and hostile examples (invalid
JSON, stripped metadata, endless loops, os._exit, 100 MB of output, a memory hog,
monkeypatching, ...), symbolic links and a FIFO, and honest bystanders. Each case must get the
points its own code earns; no file outside OUT may change (the project, the venv, the run's
TMPDIR, and /tmp itself: its entries' sizes and times); no process may outlive the run. A
second, small class comes as a .zip with a zip bomb.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.model.paths import ROOT
from autograder.publish.feedback import CSP, active_content
from autograder.publish.outdir import feedback_path
from examples.build import MISTAKES, with_mistakes
from tests.beside import wait_for_beside_run
from tests.corpus import hostile

# pytest-timeout: the hostile class is graded in the first test (setup counts); after_beside:
# it waits for make test's beside run, so it runs last (conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200), pytest.mark.after_beside]
NOTEBOOK = hostile.course_notebooks()[0]
TIMEOUT = 40  # seconds per notebook, kernel, probes and page: tight, so the bounds show
LIMITS = ("--jobs", "2", "--timeout", str(TIMEOUT), "--cell-timeout", "8", "--memory-mb", "1536")


@dataclass
class Graded:
    root: Path
    out: Path
    cases: list[hostile.Case]
    stderr: str
    seconds: float
    changed: list[str]
    survivors: list[str]
    csv_after: bytes
    csv_later: bytes


def bystanders() -> list[hostile.Case]:
    wrong = [m for m in MISTAKES if m.notebook == NOTEBOOK][:1]
    return [
        hostile.Case("bystander", "correct", {NOTEBOOK: hostile.dump(hostile.correct(NOTEBOOK))},
                     {NOTEBOOK: hostile.Expect("ok")}),
        hostile.Case("bystander_wrong", "one classic mistake",
                     {NOTEBOOK: hostile.dump(with_mistakes(NOTEBOOK, wrong))},
                     {NOTEBOOK: hostile.Expect("ok", frozenset(m.grade_id for m in wrong))}),
        hostile.Case("untouched", "the release",
                     {NOTEBOOK: hostile.dump(hostile.release(NOTEBOOK))},
                     {NOTEBOOK: hostile.Expect("unanswered", None)}),
        hostile.Case("nothing", "no notebook at all", {"notes.txt": b"sorry"},
                     {NOTEBOOK: hostile.Expect("missing", None)}),
    ]  # fmt: skip


def special_files(klass: Path) -> list[hostile.Case]:
    """Symbolic links to solutions/ and to another student, a FIFO, a linked student folder."""
    invalid = {NOTEBOOK: hostile.Expect("invalid", None)}
    cases = []
    for student, target in hostile.link_cases(NOTEBOOK, ROOT):
        (klass / student).mkdir(parents=True)
        (klass / student / NOTEBOOK).symlink_to(target)
        cases.append(hostile.Case(student, f"a link to {target}", {}, invalid))
    (klass / "fifo").mkdir()
    os.mkfifo(klass / "fifo" / NOTEBOOK)
    (klass / "linked_folder").symlink_to("bystander")
    return cases + [
        hostile.Case("fifo", "a FIFO named like the notebook", {}, invalid),
        hostile.Case("linked_folder", "a link to another student's folder", {}, invalid),
    ]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    wait_for_beside_run()  # nothing else may be writing files or starting processes meanwhile
    root = tmp_path_factory.mktemp("hostile")
    klass, out, scratch = root / "class", root / "out", root / "tmp"
    scratch.mkdir()
    paths = {
        "project": ROOT,
        "out": out,
        "klass": klass,
        "site": Path(sysconfig.get_paths()["purelib"]),
    }
    cases = [
        *bystanders(),
        *hostile.broken_cases(NOTEBOOK),
        *hostile.hostile_cases(NOTEBOOK),
        *hostile.attacks(NOTEBOOK, paths),
    ]
    hostile.write_class(klass, cases)
    cases += special_files(klass)
    # Contents of the project's own files; size, time and inode of the large trees (the venv,
    # and build/ with the test suite's Colab venv: digesting it took over a minute).
    bulky = [Path(sys.prefix), ROOT / "build"]
    watched = hostile.Fingerprint([ROOT, scratch], exclude=[out, root, *bulky])
    venv = hostile.Fingerprint([p for p in bulky if p.is_dir()], exclude=[], contents=False)
    temp = hostile.TempListing(Path("/tmp"))
    env = {**os.environ, "TMPDIR": str(scratch), "GRADER_SECRET": hostile.SECRET}
    since, start = time.time(), time.monotonic()
    result = hostile.grade(klass, out, *LIMITS, "--notebooks", NOTEBOOK[:2], env=env)
    seconds = time.monotonic() - start
    csv_after = (out / "grades.csv").read_bytes() if (out / "grades.csv").exists() else b""
    time.sleep(2)  # a daemon left behind would rewrite grades.csv by now
    csv_later = (out / "grades.csv").read_bytes() if (out / "grades.csv").exists() else b""
    return Graded(
        root, out, cases, result.stderr, seconds,
        watched.changes() + venv.changes() + temp.changes(),
        hostile.survivors(since, str(root)), csv_after, csv_later,
    )  # fmt: skip


def test_the_run_completes(graded: Graded) -> None:
    assert (graded.out / "grades.csv").is_file(), graded.stderr
    # each notebook is bounded by TIMEOUT, so the class on two workers takes less than all of
    # them timing out one after another (with room for the masters' proof and the outputs)
    bound = len(graded.cases) * TIMEOUT / 2 + 120
    assert graded.seconds < bound, f"the hostile class took {graded.seconds:.0f} s"
    report = (graded.out / "report.html").read_text()
    assert "Graded without the jail" not in report
    # where jails have cgroups, the report and stderr say nothing of unbounded memory
    assert ("Memory was not bounded per jail" in report) == (not hostile._cgroups())
    assert ("memory is not bounded per jail" in graded.stderr) == (not hostile._cgroups())


def test_memory_held_outside_every_process_stops_the_jail(graded: Graded) -> None:
    """memfd files in the kernel, a probe that forks: each jail is stopped at 1536 MiB in all
    (graded `error`, the last cell's probe with the reason); the bystanders kept full marks
    (test_each_case_gets_the_points_its_own_code_earns)."""
    if not hostile._cgroups():
        pytest.skip("no cgroup on this machine: memfd_create is refused in the jail instead")
    shown = " ".join(hostile.page_text(feedback_path(graded.out, "atk_memory", NOTEBOOK)).split())
    assert "its jail used more than 1536 MiB of memory" in shown, shown[:2000]
    rows = {r["student"]: r for r in hostile.read_csv(graded.out / "grades.csv")}
    assert rows["atk_memory"]["status"] == "error"
    # a probe's jail alone over its bound: the notebook is `error` too, and the page says why
    assert rows["atk_probe_memory"]["status"] == "error"
    shown = hostile.page_text(feedback_path(graded.out, "atk_probe_memory", NOTEBOOK))
    assert "used more than 1536 MiB of memory and was stopped" in " ".join(shown.split())


def test_a_decompression_bomb_is_refused_unread(graded: Graded) -> None:
    shown = " ".join(hostile.page_text(feedback_path(graded.out, "atk_bomb", NOTEBOOK)).split())
    assert "its results could not be read (observed.npz has a compressed member" in shown


def test_autograded_notebooks_hold_nothing_active(graded: Graded) -> None:
    """What formgrader, JupyterLab and nbconvert open: no metadata but an image's numeric
    size, no script, SVG or active HTML; the image itself is still there."""
    import nbformat

    from autograder.publish.feedback import exporter
    from autograder.publish.outdir import autograded_path
    from autograder.publish.sanitise import IMAGES, KEPT, needs_cleaning

    notebooks = sorted((graded.out / "autograded").rglob("*.ipynb"))
    assert len(notebooks) >= 20
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        for output in (o for c in nb.cells for o in c.get("outputs", [])):
            for mime, sizes in output.get("metadata", {}).items():
                assert mime in IMAGES and set(sizes) <= {"width", "height"}, (path, mime)
                assert all(isinstance(v, (int, float)) for v in sizes.values()), (path, sizes)
            assert set(output.get("data", {})) <= KEPT, (path, output.get("data", {}).keys())
            assert not needs_cleaning(output.get("data", {}).get("text/html", "")), path
        body, _ = exporter().from_notebook_node(nb)  # nbconvert, no template script
        assert not active_content(body), (path, active_content(body))
    attacker = nbformat.read(autograded_path(graded.out, "atk_kill_grader", NOTEBOOK), 4)
    outputs = [o for c in attacker.cells for o in c.get("outputs", [])]
    image = next(o for o in outputs if o.get("data", {}).get("text/plain") == "an image")
    assert "image/png" in image["data"] and image["metadata"] == {}  # shown, at its own size
    assert "/etc/passwd" not in str(outputs) and "alert" not in str(outputs)


def test_each_case_gets_the_points_its_own_code_earns(graded: Graded) -> None:
    problems = hostile.check(graded.out, graded.cases)
    assert not problems, "\n".join(problems)


def test_statuses_cover_the_contract(graded: Graded) -> None:
    statuses = {r["status"] for r in hostile.read_csv(graded.out / "grades.csv")}
    assert statuses == {"ok", "missing", "unanswered", "invalid", "timeout", "error"}


def test_no_file_outside_out_changed(graded: Graded) -> None:
    assert not graded.changed, graded.changed[:10]
    for where in (Path("/tmp"), Path.home()):
        assert not (where / "filler.bin").exists()


def test_no_process_survives(graded: Graded) -> None:
    assert not graded.survivors, graded.survivors
    assert graded.csv_after == graded.csv_later, "grades.csv changed after the run"
    assert b"mallory" not in graded.csv_later


def test_the_grader_was_not_killed_and_states_are_its_own(graded: Graded) -> None:
    rows = {r["student"]: r for r in hostile.read_csv(graded.out / "grades.csv")}
    assert rows["atk_kill_grader"]["status"] == "ok"
    assert float(rows["bystander"]["score"]) == float(rows["bystander"]["max_score"])
    assert "grader.log" in os.listdir(graded.out) and "mallory" not in str(rows)


def test_pages_carry_no_active_content_secrets_or_hidden_tests(graded: Graded) -> None:
    hidden = hostile.hidden_test_lines()
    pages = sorted(graded.out.rglob("*.html"))
    assert len(pages) >= len(graded.cases)
    for page in pages:
        text = page.read_text()
        assert not active_content(text), (page, active_content(text))
        assert CSP in text.replace("&#39;", "'"), page
        assert hostile.SECRET not in text, page
        shown = hostile.page_text(page)
        assert "HIDDEN TESTS" not in shown, page
        assert not [line for line in hidden if line in shown], page
    for path in graded.out.rglob("*"):
        if path.is_file() and path.suffix in (".csv", ".json", ".ipynb", ".log"):
            assert hostile.SECRET.encode() not in path.read_bytes(), path
    # the active HTML was sanitised away, not the notebook dropped for holding it
    shown = hostile.page_text(feedback_path(graded.out, hostile.FORMULA_STUDENT, NOTEBOOK))
    assert "held active content" not in shown and "ENVIRONMENT" in shown


def test_formulas_are_neutralised_in_the_csvs(graded: Graded) -> None:
    text = (graded.out / "grades.csv").read_text()
    student = hostile.FORMULA_STUDENT
    assert "\n'" + student.replace('"', '""') in text or f"\n\"'{student}" in text.replace(
        '""', '"'
    )
    for line in text.splitlines()[1:]:
        assert not line.startswith(("=", "+", "-", "@")), line


def test_token_soup_earns_full_marks_unless_its_cell_runs_out_of_time(graded: Graded) -> None:
    status, lost, first = hostile.soup_points(graded.out, NOTEBOOK)
    # a timeout stops the kernel; the probes may still judge the cell (then nothing is lost)
    assert (status, lost) in {("ok", 0.0), ("timeout", 0.0), ("timeout", first)}, (status, lost)


def test_bounds_hold_for_token_soup_and_slow_cells(graded: Graded) -> None:
    soup = hostile.page_text(feedback_path(graded.out, "atk_token_soup", NOTEBOOK))
    assert "source cut by the grader" in soup
    assert feedback_path(graded.out, "atk_token_soup", NOTEBOOK).stat().st_size < 3 * 2**20
    log = (graded.out / "grader.log").read_text()
    for student in ("atk_slow_cells", "atk_token_soup"):
        line = next(ln for ln in log.splitlines() if f"graded {student}/" in ln)
        seconds = float(line.rsplit(" in ", 1)[1].split()[0])
        assert seconds <= TIMEOUT + 5, line


def test_matching_crashes_cost_only_the_extra_files(graded: Graded) -> None:
    log = (graded.out / "grader.log").read_text()
    assert "atk_crash_matching: files not graded: deep.ipynb, scratch.ipynb" in log
    rows = {r["student"]: r for r in hostile.read_csv(graded.out / "grades.csv")}
    assert rows["atk_crash_named"]["status"] == "invalid"  # named like the notebook: counted


@pytest.fixture(scope="module")
def zipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("zipbomb")
    archive = root / "class.zip"
    correct = hostile.dump(hostile.correct(NOTEBOOK))
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"class/bystander/{NOTEBOOK}", correct)
        zf.writestr(f"class/bomb/{NOTEBOOK}", b" " * (60 * 2**20))  # ~1000x
        zf.writestr("../escaped.ipynb", "{}")
    # graded as where no cgroup can be had: the grader says so once, and so does the report
    env = {**os.environ, "AUTOGRADER_CGROUPS": "off"}
    result = hostile.grade(archive, root / "out", *LIMITS, "--notebooks", NOTEBOOK[:2], env=env)
    assert result.returncode == 0, result.stderr
    return root, result.stderr


def test_a_zip_bomb_is_refused_and_the_class_graded(zipped: tuple[Path, str]) -> None:
    root, stderr = zipped
    rows = {r["student"]: r for r in hostile.read_csv(root / "out" / "grades.csv")}
    assert rows["bomb"]["status"] == "invalid" and "zip bomb" in stderr
    assert rows["bystander"]["status"] == "ok"
    assert float(rows["bystander"]["score"]) == float(rows["bystander"]["max_score"])
    assert "unsafe path" in stderr and not (root / "escaped.ipynb").exists()
    assert not (root / "out" / ".submissions").exists()


def test_without_cgroups_the_grader_says_so_once_and_the_report_too(
    zipped: tuple[Path, str],
) -> None:
    root, stderr = zipped
    lines = [line for line in stderr.splitlines() if "memory is not bounded per jail" in line]
    assert len(lines) == 1 and "AUTOGRADER_CGROUPS=off" in lines[0], stderr
    report = " ".join((root / "out" / "report.html").read_text().split())
    assert "Memory was not bounded per jail" in report and "AUTOGRADER_CGROUPS=off" in report


def test_the_banner_outlives_a_refresh(zipped: tuple[Path, str]) -> None:
    from autograder.cli import main

    root, _ = zipped
    assert main(["refresh", str(root / "out")]) == 0
    report = " ".join((root / "out" / "report.html").read_text().split())
    assert "Memory was not bounded per jail" in report  # the record keeps what the run said
