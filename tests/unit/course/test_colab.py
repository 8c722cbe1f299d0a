"""Colab readiness, read statically: badges and setup cells follow `[tool.course]`.

Every student notebook has one "Open in Colab" badge, at the top, pointing at itself on the
configured repository and branch; its setup cell installs, in Colab only, the course helpers
from that repository with --no-deps, and nothing anywhere else in the notebook installs
anything (Colab already has torch, numpy, matplotlib, ipywidgets and tqdm).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder import cli
from autograder.course import colab
from autograder.model.notebook_io import is_setup, read, source
from autograder.model.paths import NOTEBOOKS, SOLUTIONS

RELEASED = sorted(NOTEBOOKS.glob("*.ipynb"))
REPO = colab.settings()


def test_there_are_student_notebooks() -> None:
    assert RELEASED, f"no notebooks in {NOTEBOOKS}"


@pytest.mark.parametrize("path", RELEASED, ids=lambda p: p.name)
def test_one_badge_at_the_top_pointing_at_this_notebook(path: Path) -> None:
    nb = read(path)
    found = [
        (i, url)
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "markdown"
        for url in colab.badge_urls(source(cell))
    ]
    assert [url for _, url in found] == [REPO.badge_url(path.name)], (
        f"{path.name}: badges {found}, expected exactly one to {REPO.badge_url(path.name)} "
        "(run `make badges`, then `make release`)"
    )
    first_markdown = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown")
    assert found[0][0] == first_markdown, "the badge belongs in the title cell"


@pytest.mark.parametrize("path", RELEASED, ids=lambda p: p.name)
def test_setup_cell_installs_only_the_helpers_in_colab(path: Path) -> None:
    nb = read(path)
    setups = [c for c in nb.cells if is_setup(c)]
    assert setups, f"{path.name} has no setup cell"
    first = colab.colab_install(source(setups[0]))
    assert first.has_colab_branch, 'the first setup cell must test `"google.colab" in sys.modules`'
    installs = [colab.pip_packages(cmd) for cmd in first.in_colab]
    assert installs and all(installs), f"Colab branch runs {first.in_colab}, expected one pip"
    assert len(installs) == 1, f"one pip install in Colab, got {first.in_colab}"
    options, packages = installs[0]
    assert packages == [REPO.pip_url], f"installs {packages}, expected only {REPO.pip_url}"
    assert "--no-deps" in options, "Colab's own torch, numpy, ... must stay: pass --no-deps"


@pytest.mark.parametrize("path", RELEASED, ids=lambda p: p.name)
def test_nothing_else_installs_anything(path: Path) -> None:
    nb = read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        found = colab.colab_install(source(cell))
        outside = [cmd for cmd in found.everywhere if "install" in cmd]
        assert not outside, f"code cell {i} installs outside Colab's branch: {outside}"
        if not is_setup(cell) or cell is not next(c for c in code if is_setup(c)):
            assert not found.in_colab, f"code cell {i} runs {found.in_colab} in Colab"


def test_settings_drive_badge_and_pip_url(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.course]\nrepository = "someone/fork"\nbranch = "fall"\n')
    repo = colab.settings(pyproject)
    assert repo.badge_url("03_x.ipynb") == (
        "https://colab.research.google.com/github/someone/fork/blob/fall/notebooks/03_x.ipynb"
    )
    assert repo.pip_url == "git+https://github.com/someone/fork@fall"
    pyproject.write_text('[tool.course]\nrepository = "https://github.com/x"\n')
    with pytest.raises(ValueError, match="owner/name"):
        colab.settings(pyproject)


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.ipynb"))[:1], ids=lambda p: p.name)
def test_rewrite_follows_the_setting(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    fork = colab.CourseRepo("someone/fork", "fall")
    assert colab.rewrite_notebook(copy, fork)
    nb = nbformat.read(str(copy), as_version=4)
    urls = [u for c in nb.cells if c.cell_type == "markdown" for u in colab.badge_urls(source(c))]
    assert urls == [fork.badge_url(path.name)]
    setup = next(c for c in nb.cells if is_setup(c))
    (install,) = colab.colab_install(source(setup)).in_colab
    assert colab.pip_packages(install)[1] == [fork.pip_url]
    assert not colab.rewrite_notebook(copy, fork), "a second rewrite must change nothing"


def test_reader_sees_installs_in_every_form() -> None:
    src = (
        "import subprocess, sys\n"
        "%pip install -q torch\n"
        "if 'google.colab' in sys.modules:\n"
        "    !pip install --no-deps helpers\n"
        "else:\n"
        "    subprocess.run([sys.executable, '-m', 'pip', 'install', 'nbgrader'])\n"
    )
    found = colab.colab_install(src)
    assert found.has_colab_branch
    assert found.in_colab == [["pip", "install", "--no-deps", "helpers"]]
    assert found.everywhere == [
        ["pip", "install", "-q", "torch"],
        ["python", "-m", "pip", "install", "nbgrader"],
    ]


PLACEHOLDER = colab.CourseRepo(colab.PLACEHOLDER, "main")
SET = colab.CourseRepo("your-org/attention-students", "main")


def test_make_badges_refuses_the_placeholder_repository(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README, Instructors 1: "While `repository` is still the shipped placeholder, `make
    badges` and `student-release` refuse" (the badges half: student-release's is in
    test_student_release.py). The refusal exits non-zero before any notebook is read, with
    the fix in the message, so make stops before its `release` step; a set address goes on."""
    rewritten: list[Path] = []
    monkeypatch.setattr(colab, "rewrite_notebook", lambda path, *a, **k: rewritten.append(path))
    monkeypatch.setattr(colab, "settings", lambda *a: PLACEHOLDER)
    assert cli.main(["badges"]) == 2
    err = capsys.readouterr().err
    assert f"still the placeholder {colab.PLACEHOLDER!r}" in err and "README, Instructors" in err
    assert not rewritten, "the placeholder refusal must come before any notebook is rewritten"
    recipe = make_recipe("badges")
    assert recipe[0].endswith("-m autograder badges"), recipe  # the refusal stops `make badges`
    assert not any("allow-placeholder" in line for line in recipe), recipe

    monkeypatch.setattr(colab, "settings", lambda *a: SET)
    assert cli.main(["badges"]) == 0
    assert "placeholder" not in capsys.readouterr().err
    assert rewritten == sorted(SOLUTIONS.glob("*.ipynb")), "a set address rewrites every notebook"


def test_the_placeholder_is_recognised_whatever_its_case(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f'[tool.course]\nrepository = "{colab.PLACEHOLDER.upper()}/"\n')
    assert colab.settings(pyproject).is_placeholder
    assert colab.placeholder_problem(colab.settings(pyproject))
    assert not SET.is_placeholder and colab.placeholder_problem(SET) == ""


def make_recipe(target: str) -> list[str]:
    """The command lines of one Makefile target, in order."""
    lines = (SOLUTIONS.parent / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe
