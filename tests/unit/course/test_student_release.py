"""The student release: only what students may have, for several assignment sets.

Trees are built from one fresh nbgrader release of solutions/ for several (assignments,
graded) sets. Every tree that is written is scanned for every solution body, written answer
and hidden test of the notebooks not yet graded and for every grader reference (normalised:
comments, whitespace and variable names do not hide them), and checked file by file against
what a student tree may hold. The scanner itself is shown to catch disguised copies of each
kind of secret, and a release that would give answers away is refused without writing.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import cli
from autograder.course import colab, helpers, leaks
from autograder.course import student_release as sr
from autograder.course.release import release_into
from autograder.course.stubs import is_named_stub_cell
from autograder.model.contract import CONTRACT
from autograder.model.notebook_io import is_answer, is_setup, source
from autograder.model.paths import ROOT, SOLUTIONS

# slow: nbgrader releases solutions/ in a module fixture, a tree's notebook runs (pytest-timeout:
# setup counts)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

NBS = list(CONTRACT)
REPO = colab.CourseRepo("teacher/attention-students", "main")
# (assignments, graded): a first week, a later week, and most of the term.
SETS = [
    (NBS[:1], set()),
    (NBS[:2], set(NBS[:1])),
    (NBS[:5], set(NBS[:4])),
    (NBS, set(NBS[:6])),
]
ALLOWED_TOP = {
    "README.md",
    "Makefile",
    "requirements.txt",
    "pyproject.toml",
    ".gitignore",
    ".course",
    "notebooks",
    "attention_course",
}


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("nbgrader-release")
    release_into(target)
    return target


@pytest.fixture(scope="module")
def secrets() -> list[leaks.Secret]:
    found = leaks.solution_secrets(SOLUTIONS) + leaks.reference_secrets(
        ROOT / "autograder" / "checks"
    )
    kinds = {s.label.split(" ")[0] for s in found}
    assert {"solution", "hidden", "written", "grader"} <= kinds, kinds
    return found


@pytest.fixture(scope="module")
def trees(release_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Index into SETS -> the tree written for it (every set is a proper staged release)."""
    built = {}
    for i, (assignments, graded) in enumerate(SETS):
        dest = tmp_path_factory.mktemp("student") / "tree"
        sr.build(assignments, graded, dest, REPO, release_dir)
        built[i] = dest
    return built


@pytest.mark.parametrize("index", range(len(SETS)))
def test_tree_holds_no_answer_of_a_notebook_not_graded(
    index: int, trees: dict[int, Path], secrets: list[leaks.Secret]
) -> None:
    assignments, graded = SETS[index]
    found = leaks.scan_tree(trees[index], leaks.Scanner(secrets, allowed=graded))
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize("index", range(len(SETS)))
def test_tree_has_only_student_files(index: int, trees: dict[int, Path]) -> None:
    tree = trees[index]
    assignments, _ = SETS[index]
    assert {p.name for p in tree.iterdir()} <= ALLOWED_TOP
    assert sorted(p.name for p in (tree / "notebooks").iterdir()) == sorted(assignments)
    shipped = {p.relative_to(tree / "attention_course").as_posix() for p in tree.rglob("*.py")}
    assert shipped <= {p.relative_to(sr.PACKAGE).as_posix() for p in sr.PACKAGE.rglob("*.py")}
    needed = helpers.needed(
        [
            source(c)
            for nb in assignments
            for c in nbformat.read(str(tree / "notebooks" / nb), as_version=4).cells
            if c.cell_type == "code"
        ],
        sr.PACKAGE,
    )
    assert shipped == needed, "the tree ships exactly the helpers its notebooks import"
    for path in tree.rglob("*"):
        text = path.read_text(errors="replace") if path.is_file() else ""
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text, path
        assert "import autograder" not in text and "from autograder" not in text, path
    assert "nbgrader" not in (tree / "requirements.txt").read_text()


@pytest.mark.parametrize("index", range(len(SETS)))
def test_answer_cells_are_stubs_and_colab_points_at_the_release(
    index: int, trees: dict[int, Path]
) -> None:
    for path in sorted((trees[index] / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        for cell in (c for c in nb.cells if is_answer(c) and c.cell_type == "code"):
            named = is_named_stub_cell(source(cell).split("\n"))  # a prediction: NAME = ...
            assert named or "raise NotImplementedError" in source(cell), (path.name, source(cell))
        urls = [u for c in nb.cells for u in colab.badge_urls(source(c))]
        assert urls == [REPO.badge_url(path.name)], urls
        setup = next(c for c in nb.cells if is_setup(c))
        (install,) = colab.colab_install(source(setup)).in_colab
        assert colab.pip_packages(install)[1] == [REPO.pip_url]
    readme = (trees[index] / "README.md").read_text()
    assert "make lab" in readme and "Open in Colab" in readme
    assert all(REPO.badge_url(nb) in readme for nb in SETS[index][0])


def test_refused_sets_name_their_reasons(release_dir: Path, tmp_path: Path) -> None:
    """All seven with nothing graded: later notebooks carry earlier answers, so: refused."""
    dest = tmp_path / "tree"
    with pytest.raises(sr.ReleaseRefused) as refused:
        sr.build(NBS, set(), dest, REPO, release_dir)
    assert refused.value.lines
    for line in refused.value.lines:  # each reason names a notebook whose answer it gives away
        assert any(nb in line for nb in NBS), line
    assert not dest.exists(), "a refused release must not write anything"


def test_a_notebook_showing_an_open_answer_is_refused_with_what_and_where(
    release_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """05's own cells compute 02's answer: 02 and 05 together, nothing graded: refused."""
    dest = tmp_path / "tree"
    argv = ["--assignments", "02,05", "--dest", str(dest), "--release-dir", str(release_dir)]
    assert cli.main(["student-release", *argv, "--allow-placeholder"]) == 1
    err = capsys.readouterr().err
    assert "05_the_head.ipynb shows answers of notebooks up to 02_queries_and_keys.ipynb" in err
    where = "notebooks/05_the_head.ipynb cell 3: `wei = q @ k.transpose(-2, -1) * head_size**-0.5`"
    assert where in err and "(an answer of 02_queries_and_keys.ipynb)" in err, err
    assert not dest.exists(), "a refused release must not write anything"
    sr.build(NBS[:2] + [NBS[4]], set(NBS[:4]), dest, REPO, release_dir)  # 02 graded: it ships
    assert (dest / "notebooks" / NBS[4]).is_file()


def test_the_placeholder_repository_is_refused_before_anything_is_written(
    release_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README, Instructors 1: "While `repository` is still the shipped placeholder, `make
    badges` and `student-release` refuse": exit 2, the fix on stderr, DEST not made;
    `--allow-placeholder` (a trial) writes it."""
    dest = tmp_path / "tree"
    argv = ["--assignments", "01", "--dest", str(dest), "--release-dir", str(release_dir)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(colab, "settings", lambda *a: colab.CourseRepo(colab.PLACEHOLDER))
        assert cli.main(["student-release", *argv]) == 2
        err = capsys.readouterr().err
        assert f"still the placeholder {colab.PLACEHOLDER!r}" in err, err
        assert not dest.exists(), "a refused release must not write anything"
        assert cli.main(["student-release", *argv, "--allow-placeholder"]) == 0
    assert (dest / "notebooks" / NBS[0]).is_file()


def test_a_release_beside_the_instructors_files_leaves_them_alone(
    release_dir: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "students"
    (dest / ".venv" / "bin").mkdir(parents=True)
    (dest / ".venv" / "bin" / "python").write_text("#!/bin/sh\n")
    (dest / "NOTES.md").write_text("keep me")
    sr.build(NBS[:1], set(), dest, REPO, release_dir)
    assert (dest / "NOTES.md").read_text() == "keep me"
    assert (dest / ".venv" / "bin" / "python").read_text() == "#!/bin/sh\n"
    listed = sr.manifest(dest)
    assert f"notebooks/{NBS[0]}" in listed and "README.md" in listed
    assert not {"NOTES.md", ".venv/bin/python"} & set(listed), "only the release's own files"
    for rel, digest in listed.items():
        assert hashlib.sha256((dest / rel).read_bytes()).hexdigest() == digest, rel


def test_a_release_that_would_overwrite_the_instructors_files_is_refused_with_the_list(
    release_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "students"
    dest.mkdir()
    (dest / "README.md").write_text("my own readme")
    argv = ["--assignments", "01", "--dest", str(dest), "--release-dir", str(release_dir)]
    assert cli.main(["student-release", *argv, "--allow-placeholder"]) == 1
    err = capsys.readouterr().err
    assert "refused: it would overwrite or remove files it did not write" in err
    assert "README.md: not written by a student release" in err
    assert [p.name for p in dest.iterdir()] == ["README.md"], "nothing was written"
    assert (dest / "README.md").read_text() == "my own readme"


def test_next_release_replaces_only_its_own_files(release_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "tree"
    sr.build(NBS[:2], set(NBS[:1]), dest, REPO, release_dir)
    (dest / ".git").mkdir()
    (dest / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (dest / "notebooks" / "scratch.ipynb").write_text("{}")  # the instructor's own
    (dest / ".venv").mkdir()
    sr.build(NBS[:1], set(), dest, REPO, release_dir)  # 02 is no longer handed out
    assert (dest / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (dest / ".venv").is_dir()
    assert sorted(p.name for p in (dest / "notebooks").iterdir()) == [NBS[0], "scratch.ipynb"]
    marker = json.loads((dest / sr.MARKER).read_text())
    assert marker["assignments"] == NBS[:1] and marker["repository"] == REPO.repository
    assert f"notebooks/{NBS[1]}" not in marker["files"]
    with zipfile.ZipFile(sr.make_zip(dest)) as zf:
        zipped = {Path(n).relative_to(dest.name).as_posix() for n in zf.namelist()}
    assert zipped == {*marker["files"], sr.MARKER}, "the zip holds the release, not DEST"

    edited = dest / "notebooks" / NBS[0]
    edited.write_text(edited.read_text() + "\n")  # the instructor touched up the notebook
    with pytest.raises(sr.WouldOverwrite) as refused:
        sr.build(NBS[:2], set(NBS[:1]), dest, REPO, release_dir)
    assert f"notebooks/{NBS[0]}: changed since the last release" in refused.value.lines
    assert edited.read_text().endswith("\n\n") and not (dest / "notebooks" / NBS[1]).exists()


# ---- the scanner catches disguised secrets --------------------------------------------------


def _solution_region(notebook: str, grade_id: str) -> str:
    nb = nbformat.read(str(SOLUTIONS / notebook), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return source(cell)


def _disguise(src: str) -> str:
    """Rename every local variable, drop comments, change the layout."""
    tree = ast.parse(src)
    names = sorted(
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            node.id = f"renamed_{names.index(node.id)}"
    return ast.unparse(tree).replace("\n", "\n\n")


@pytest.fixture
def clean_tree(trees: dict[int, Path], tmp_path: Path) -> Path:
    copy = tmp_path / "tree"
    shutil.copytree(trees[1], copy)
    return copy


def _first_region(notebook: str) -> tuple[str, str]:
    nb = nbformat.read(str(SOLUTIONS / notebook), as_version=4)
    for cell in nb.cells:
        found = leaks._REGION["solution"].search(source(cell))
        if cell.cell_type != "code" or not found:
            continue
        body = ast.parse(textwrap.dedent(found[1])).body
        if leaks.size(body) >= leaks.MIN_RENAMED:  # large enough for renamed copies to count
            return cell.metadata["nbgrader"]["grade_id"], found[1]
    raise AssertionError(f"{notebook} has no solution region large enough to scan renamed")


@pytest.mark.parametrize("notebook", NBS[2:])
def test_scanner_finds_a_renamed_solution_in_a_helper(
    notebook: str, clean_tree: Path, secrets: list[leaks.Secret]
) -> None:
    gid, region = _first_region(notebook)
    body = textwrap.dedent(region)
    helper = clean_tree / "attention_course" / "innocent.py"
    helper.write_text(
        f"def innocent(x, key, query, value, self=None):\n{_indent(_disguise(body))}\n"
    )
    found = leaks.scan_tree(clean_tree, leaks.Scanner(secrets, allowed=set(NBS[:2])))
    assert any(f.notebook == notebook and f.path.endswith("innocent.py") for f in found), (
        f"{notebook}/{gid} disguised in a helper was not found:\n{_disguise(body)}"
    )
    allowed = leaks.scan_tree(clean_tree, leaks.Scanner(secrets, allowed=set(NBS)))
    assert not [f for f in allowed if f.path.endswith("innocent.py") and f.notebook]


def _indent(code: str) -> str:
    return "\n".join("    " + ln if ln.strip() else ln for ln in code.splitlines())


def test_scanner_finds_prose_hidden_tests_references_and_definitions(
    clean_tree: Path, secrets: list[leaks.Secret]
) -> None:
    written = next(s for s in secrets if s.label.startswith("written answer"))
    nb02 = nbformat.read(str(SOLUTIONS / written.notebook), as_version=4)
    answer = next(source(c) for c in nb02.cells if c.cell_type == "markdown" and is_answer(c))
    (clean_tree / "NOTES.md").write_text("Hint:\n" + "   ".join(answer.upper().split()) + "\n")
    hidden = next(s for s in secrets if s.label.startswith("hidden test"))
    hidden_nb = nbformat.read(str(SOLUTIONS / hidden.notebook), as_version=4)
    hidden_src = next(
        leaks._REGION["hidden test"].search(source(c))[1]
        for c in hidden_nb.cells
        if leaks._REGION["hidden test"].search(source(c))
    )
    nb_path = clean_tree / "notebooks" / NBS[0]
    nb = nbformat.read(str(nb_path), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(hidden_src))
    nbformat.write(nb, str(nb_path))
    reference = next(s for s in secrets if s.label.startswith("grader reference") and s.notebook)
    module, function = reference.label.split(" ")[-1].split(":")
    ref_tree = ast.parse((ROOT / "autograder" / "checks" / module).read_text())
    ref_def = next(
        n for n in ast.walk(ref_tree) if isinstance(n, ast.FunctionDef) and n.name == function
    )
    ref_def.name = "helper_function"
    (clean_tree / "attention_course" / "extra.py").write_text(
        ast.unparse(ref_def) + "\n\n\nclass Head:\n    scale = 0.5\n"
    )
    found = {
        (f.path, f.what.split(" ")[0]) for f in leaks.scan_tree(clean_tree, leaks.Scanner(secrets))
    }
    assert ("NOTES.md", "written") in found, found
    assert (f"notebooks/{NBS[0]}", "hidden") in found, found
    assert ("attention_course/extra.py", "grader") in found, found
    assert ("attention_course/extra.py", "a") in found, "a definition of Head in a helper"


# ---- Colab: the helpers alone, from the tree's own packaging; a failing install in one line ----


@pytest.mark.slow
def test_packaging_installs_the_helpers_alone(trees: dict[int, Path], tmp_path: Path) -> None:
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(trees[1])],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    top = {p.name.split("-")[0] for p in target.iterdir() if not p.name.startswith("__")}
    assert top == {"attention_course", "self_attention_course_helpers"}, top
    probe = "import attention_course.plots, sys; print(attention_course.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0 and str(target) in out.stdout, out.stderr[-2000:]


@pytest.mark.slow
def test_setup_cell_that_cannot_install_says_so_in_one_line(tmp_path: Path) -> None:
    setup = next(
        c for c in nbformat.read(str(SOLUTIONS / NBS[0]), as_version=4).cells if is_setup(c)
    )
    src = colab.rewrite_setup(source(setup), REPO).replace(REPO.github, "file:///nonexistent/x")
    fake_colab = "import sys, types\nsys.modules['google.colab'] = types.ModuleType('google.colab')"
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(fake_colab), nbformat.v4.new_code_cell(src)]
    )
    NotebookClient(nb, timeout=300, allow_errors=True, kernel_name="python3").execute(
        cwd=str(tmp_path)
    )
    errors = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert len(errors) == 1, nb.cells[1].outputs
    lines = [ln for entry in errors[0]["traceback"] for ln in entry.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("Could not install the course helpers from file:///nonexistent/x")
    assert "Fix:" in lines[0] and "CalledProcessError" not in lines[0]
    streams = "".join(o.get("text", "") for o in nb.cells[1].outputs if o.output_type == "stream")
    assert not streams.strip(), streams
