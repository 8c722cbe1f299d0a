"""`python -m autograder student-release`: the course as students get it, in its own tree.

    python -m autograder student-release --assignments 01,02,03 --dest DIR [--graded 01,02]

DIR receives the released notebooks (nbgrader's release of solutions/, with Colab badges and
setup cells pointing at `[tool.course] repository`), the course helpers those notebooks
import and may carry, a packaging file that installs the helpers alone (what Colab's setup
cell pip-installs), a student README and Makefile (JupyterLab without nbgrader), and
`.course/release.json`. Nothing of the grader, the solutions or the hidden tests.

`--graded` names the notebooks already graded: only their answers may appear (a later
notebook's read-only reference of an earlier answer, a helper holding it). The staging table
(autograder.course.staging: which helpers and which notebooks' own cells show whose answers) is
checked first; then the tree is built in a scratch folder and scanned (autograder.course.leaks).
Either refuses the release with what and where, and DIR is left as it was. DIR may be empty,
new, an earlier student release or any folder: the release writes its files there and lists
them with their sha256 in `.course/release.json` (the manifest). A later release into the same
DIR replaces and removes only the files the manifest lists, as the release wrote them; it
refuses, with the list, when anything else would be overwritten or removed (a file of the
instructor's where the release writes, a released file edited since). Everything else in DIR
(.git, a virtual environment, notes) is left alone, so a release is a commit on the student
repository.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import nbformat

from autograder.course import colab, helpers, leaks, staging
from autograder.course.pins import pins as course_pins
from autograder.course.release import LAB_OVERRIDES
from autograder.model import options
from autograder.model.contract import CONTRACT
from autograder.model.notebook_io import source
from autograder.model.paths import ROOT, SOLUTIONS

TEMPLATES = ROOT / "student"
PACKAGE = ROOT / helpers.PACKAGE
MARKER = ".course/release.json"
# Packages of the course's pins a student needs: Colab's set plus JupyterLab, never nbgrader.
STUDENT_PACKAGES = (
    "torch", "numpy", "jupyterlab", "jupyterlab_server", "ipywidgets", "matplotlib", "tqdm",
)  # fmt: skip


class ReleaseRefused(Exception):
    """The release would hand out answers, or cannot be written: the lines say why."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class WouldOverwrite(ReleaseRefused):
    """DEST holds files the release did not write (or that changed since) where it writes."""


@dataclass
class Plan:
    """What one student release holds."""

    assignments: list[str]
    graded: set[str]
    repo: colab.CourseRepo
    notebooks: dict[str, nbformat.NotebookNode] = field(default_factory=dict)
    helpers: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # helpers it needs but may not carry
    notes: list[str] = field(default_factory=list)  # what the instructor should know


def parse_notebooks(spec: str) -> list[str]:
    """'01,02,03' (or names, or 'all') -> notebook files in course order."""
    if spec.strip().lower() == "all":
        return list(CONTRACT)
    chosen = {helpers.notebook_of(part) for part in spec.split(",") if part.strip()}
    return [nb for nb in CONTRACT if nb in chosen]


def released(
    notebooks: list[str], release_dir: Path | None = None
) -> dict[str, nbformat.NotebookNode]:
    """The nbgrader release of the chosen notebooks (made now unless `release_dir` has it)."""
    if release_dir is None:
        from autograder.course.release import generate

        with tempfile.TemporaryDirectory() as tmp:
            source_dir = Path(tmp) / "solutions"
            source_dir.mkdir()
            for nb in notebooks:
                shutil.copy2(SOLUTIONS / nb, source_dir / nb)
            out = generate(Path(tmp) / "course", source_dir)
            return {nb: nbformat.read(str(out / nb), as_version=4) for nb in notebooks}
    missing = [nb for nb in notebooks if not (release_dir / nb).is_file()]
    if missing:
        raise ReleaseRefused([f"{release_dir} has no {', '.join(missing)}"])
    return {nb: nbformat.read(str(release_dir / nb), as_version=4) for nb in notebooks}


def plan(
    assignments: list[str],
    graded: set[str],
    repo: colab.CourseRepo,
    release_dir: Path | None = None,
) -> Plan:
    """Released notebooks pointed at `repo`, and the helpers they need, or ReleaseRefused."""
    result = Plan(assignments, graded, repo, released(assignments, release_dir))
    for name, nb in result.notebooks.items():
        try:
            colab.rewrite_cells(nb, name, repo)
        except ValueError as err:
            raise ReleaseRefused([str(err)]) from None
        for cell in (c for c in nb.cells if c.cell_type == "code"):
            cell.update(outputs=[], execution_count=None)
    needed: dict[str, list[str]] = {}
    for name, nb in result.notebooks.items():
        code = [source(c) for c in nb.cells if c.cell_type == "code"]
        for rel in helpers.needed(code, PACKAGE):
            needed.setdefault(rel, []).append(name)
    result.refused = staging_problems(result, needed)
    result.helpers = sorted(needed)
    return result


def staging_problems(p: Plan, needed: dict[str, list[str]]) -> list[str]:
    """What the staging table (autograder.course.staging) refuses, with the lines a notebook shows,
    and
    each helper the notebooks import that holds answers of a notebook not graded yet."""
    still_open = set(CONTRACT) - p.graded
    problems = staging.release_problems(set(p.assignments), still_open)
    for name, shown in staging.shows_open_answers(set(p.assignments), still_open).items():
        where = leaks.answer_expressions(SOLUTIONS, shown)
        found = leaks.shown_answers(p.notebooks[name], f"notebooks/{name}", where, shown)
        problems += [str(leak) for leak in found]
    allowed = helpers.shippable(p.graded, PACKAGE)
    table = helpers.reveals()
    problems += [
        f"{helpers.PACKAGE}/{rel} (needed by {', '.join(users)}) holds answers of "
        f"{table.get(rel, 'a notebook not yet graded')}: release it once that one is graded"
        for rel, users in sorted(needed.items())
        if rel not in allowed and not any(f"{helpers.PACKAGE}/{rel}" in line for line in problems)
    ]
    return problems


# ---- writing the tree -----------------------------------------------------------------------


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def student_requirements() -> str:
    """The student's pins: the course's own (requirements.in, requirements-torch.txt), for the
    packages a student needs; a package the course does not pin (jupyterlab_server, JupyterLab's
    settings and overrides) at the version the instructor's environment runs."""
    pins = course_pins()
    lines = ["# What `make lab` installs into .venv/ (Colab has all of it already)."]
    for package in STUDENT_PACKAGES:
        if _normal(package) not in pins:
            try:
                pins[_normal(package)] = f"{package}=={metadata.version(package)}"
            except metadata.PackageNotFoundError:
                pins[_normal(package)] = package
        lines.append(pins[_normal(package)])
    return "\n".join(lines) + "\n"


def _title(nb: nbformat.NotebookNode, name: str) -> str:
    first = next((source(c) for c in nb.cells if c.cell_type == "markdown"), "")
    heading = next((ln.lstrip("# ").strip() for ln in first.splitlines() if ln.startswith("#")), "")
    return heading.split("·", 1)[-1].strip() or name


def readme(p: Plan) -> str:
    """The student README: the two ways to start, the notebooks released, the data."""
    rows = [
        f"| {name[:2]} | [`{name}`](notebooks/{name}): {_title(nb, name)} | {p.repo.badge(name)} |"
        for name, nb in p.notebooks.items()
    ]
    data = ""
    if "data.py" in p.helpers:
        data = (TEMPLATES / "data-section.md").read_text(encoding="utf-8")
    text = (TEMPLATES / "README.md").read_text(encoding="utf-8")
    return text.replace("@@NOTEBOOK_TABLE@@", "\n".join(rows)).replace("@@DATA_SECTION@@", data)


def _version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "version"
    ]


def write_tree(p: Plan, root: Path) -> None:
    """Every file of the student release under `root` (which must not exist yet)."""
    (root / "notebooks").mkdir(parents=True)
    for name, nb in p.notebooks.items():
        nbformat.write(nb, str(root / "notebooks" / name))
    for rel in p.helpers:
        target = root / helpers.PACKAGE / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGE / rel, target)
    files = {
        "README.md": readme(p),
        "Makefile": (TEMPLATES / "Makefile").read_text(encoding="utf-8"),
        ".gitignore": (TEMPLATES / "gitignore").read_text(encoding="utf-8"),
        "requirements.txt": student_requirements(),
        "pyproject.toml": (TEMPLATES / "pyproject.toml")
        .read_text(encoding="utf-8")
        .replace("@@VERSION@@", _version()),
        ".course/jupyterlab-overrides.json": json.dumps(LAB_OVERRIDES, indent=2) + "\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    marker = {
        "assignments": p.assignments,
        "graded": sorted(p.graded),
        "repository": p.repo.repository,
        "branch": p.repo.branch,
        "helpers": p.helpers,
        "files": {rel: _digest(root / rel) for rel in _files(root)},  # the manifest
    }
    (root / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def _files(root: Path) -> list[str]:
    """Every file below `root` (POSIX paths), the marker and .git excepted."""
    return sorted(
        rel
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink()
        and (rel := path.relative_to(root).as_posix()) != MARKER
        and not rel.startswith(".git/")
    )  # fmt: skip


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.cache
def _secrets() -> tuple[leaks.Secret, ...]:
    checks = ROOT / "autograder" / "checks"
    return (*leaks.solution_secrets(SOLUTIONS), *leaks.reference_secrets(checks))


def scanner(graded: set[str]) -> leaks.Scanner:
    """Every answer, hidden test and grader reference, less those of the graded notebooks."""
    return leaks.Scanner(list(_secrets()), allowed=graded)


def manifest(dest: Path) -> dict[str, str] | None:
    """The files the last release wrote into `dest` (path -> sha256); {} for a release made
    before manifests were kept; None when `dest` holds no student release."""
    try:
        marker = json.loads((dest / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = marker.get("files", {}) if isinstance(marker, dict) else {}
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def _install(dest: Path, built: Path) -> list[str]:
    """Put the built tree into `dest`, replacing only what the last release wrote there and the
    instructor has not changed since; refuse with the list when anything else would be
    overwritten or removed. Returns notes for the instructor."""
    if dest.exists() and not dest.is_dir():
        raise WouldOverwrite([f"{dest} is a file, not a folder"])
    old = manifest(dest) if dest.exists() else {}
    legacy = old == {} and (dest / MARKER).is_file()
    new = _files(built)
    problems = []
    if old is None and ((dest / MARKER).exists() or (dest / MARKER).is_symlink()):
        problems.append(f"{MARKER}: not a student release's marker")
    for rel in new:
        problem = _overwrite_problem(dest, rel, old)
        if problem:
            problems.append(f"{rel}: {problem}")
    stale = [rel for rel in (old or {}) if rel not in new and (dest / rel).is_file()]
    for rel in stale:
        if (dest / rel).is_symlink() or _digest(dest / rel) != (old or {})[rel]:
            problems.append(f"{rel}: changed since the last release, which this one would remove")
    if problems:
        raise WouldOverwrite(
            [f"{dest} holds files that are not the last release's as it wrote them:"]
            + problems
            + ["move them away (or back to what the release wrote), or choose another --dest"]
        )
    for rel in stale:
        (dest / rel).unlink()
        _prune(dest, (dest / rel).parent)
    dest.mkdir(parents=True, exist_ok=True)
    for rel in [*new, MARKER]:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(built / rel, target)
    if legacy:
        return [
            f"{dest} was released before releases listed their files: files of that release "
            "that this one does not write were left in place (see `git status` there)"
        ]
    return []


def _overwrite_problem(dest: Path, rel: str, old: dict[str, str] | None) -> str:
    """Why writing `rel` into `dest` would lose something of the instructor's ("" if nothing)."""
    target = dest / rel
    for parent in target.relative_to(dest).parents:
        folder = dest / parent
        if folder != dest and (folder.is_symlink() or (folder.exists() and not folder.is_dir())):
            return f"{parent.as_posix()} is not a folder the release can write into"
    if not target.exists() and not target.is_symlink():
        return ""
    if target.is_symlink() or not target.is_file():
        return "not a file the release wrote"
    if old is None or (old and rel not in old):
        return "not written by a student release"
    if old and _digest(target) != old[rel]:
        return "changed since the last release"
    return ""


def _prune(dest: Path, folder: Path) -> None:
    """Remove `folder` and its parents below `dest` while they are empty."""
    while folder != dest and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def make_zip(dest: Path) -> Path:
    """DEST.zip beside DEST: the files the release wrote, nothing else of DEST (no .git, none
    of the instructor's own files), for a learning platform's file area."""
    target = dest.with_name(dest.name + ".zip")
    files = sorted([*(manifest(dest) or {}), MARKER])
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in files:
            if (dest / rel).is_file():
                zf.write(dest / rel, Path(dest.name) / rel)
    return target


def build(
    assignments: list[str],
    graded: set[str],
    dest: Path,
    repo: colab.CourseRepo | None = None,
    release_dir: Path | None = None,
) -> Plan:
    """Plan, write into a scratch folder, scan, then put in place; ReleaseRefused on a leak."""
    repo = repo or colab.settings()
    p = plan(assignments, graded, repo, release_dir)
    dest = dest.resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}.") as tmp:
        built = Path(tmp) / "tree"
        write_tree(p, built)
        found = [str(leak) for leak in leaks.scan_tree(built, scanner(graded))]
        if p.refused or found:
            raise ReleaseRefused(p.refused + found)
        p.notes = _install(dest, built)
    return p


# ---- command line ---------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m autograder student-release`: its options, description and examples."""
    p.description = (
        "Write the course as students get it: released notebooks, the helpers they need, a "
        "student README and Makefile; no solutions, tests or grader."
    )
    p.epilog = """examples:
  python -m autograder student-release --notebooks 01,02 --dest ../students
  python -m autograder student-release --notebooks 01,02,03 --graded 01,02 --dest students --zip"""
    options.notebooks(p, required=True, what="the notebooks to ship")
    p.add_argument("--dest", required=True, type=Path, metavar="DIR", help="the student tree")
    p.add_argument(
        "--graded",
        default="",
        metavar="LIST",
        help="notebooks already graded: their answers may appear in later notebooks' "
        "references and helpers (default: none)",
    )
    p.add_argument("--zip", action="store_true", help="also write DIR.zip (without .git)")
    p.add_argument(
        "--release-dir",
        type=Path,
        metavar="DIR",
        help="take the notebooks from this nbgrader release instead of releasing solutions/ now",
    )
    options.allow_placeholder(p, "write the tree")


def publish_hint(dest: Path, p: Plan) -> str:
    numbers = ", ".join(nb[:2] for nb in p.assignments)
    return (
        f"Publish it as its own repository, the one Colab installs from ({p.repo.github}):\n"
        f"  cd {dest}\n"
        f"  git init -b {p.repo.branch}   # first release only\n"
        f'  git add -A && git commit -m "Release notebooks {numbers}"\n'
        f"  git remote add origin {p.repo.github}.git   # first release only\n"
        f"  git push -u origin {p.repo.branch}\n"
        "Later releases: the same command with the same --dest (its .git is kept), then commit "
        "and push."
    )


def run(args: argparse.Namespace) -> int:
    try:
        assignments = parse_notebooks(args.notebooks)
        graded = {helpers.notebook_of(g) for g in args.graded.split(",") if g.strip()}
        repo = colab.settings()
    except ValueError as err:
        print(f"student-release: {err}", file=sys.stderr)
        return 2
    problem = colab.placeholder_problem(repo)
    if problem and not args.allow_placeholder:
        print(colab.loud(problem), file=sys.stderr)
        return 2
    try:
        p = build(assignments, graded, args.dest, repo, args.release_dir)
    except ReleaseRefused as refused:
        why = (
            "it would overwrite or remove files it did not write"
            if isinstance(refused, WouldOverwrite)
            else "it would give answers away"
        )
        print(f"student release refused: {why}", file=sys.stderr)
        for line in refused.lines:
            print(f"  {line}", file=sys.stderr)
        return 1
    dest = args.dest.resolve()
    print(f"student release: {len(p.notebooks)} notebooks, {len(p.helpers)} helper files -> {dest}")
    for note in p.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.zip:
        print(f"zip: {make_zip(dest)}")
    if problem:
        print(colab.loud(problem), file=sys.stderr)
    print(publish_hint(dest, p))
    return 0
