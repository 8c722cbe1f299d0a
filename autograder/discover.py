"""Find the students and their files: masters, matching, and the class .zip, all bounded.

Masters: the contract notebooks whose instructor source exists in solutions/ (or those of them
the run asks for). Students: one folder each below SUBMISSIONS. Files: a regular file named
like a course notebook is that notebook; any other .ipynb is matched by content (its answer
cells' grade_ids count 2, each contract name its code defines 1) to the unclaimed notebook it
resembles most; an unreadable file whose name contains a notebook's name or starts with its
number is that notebook (and will be `invalid`). Symbolic links and special files are never
followed or read: one named like a notebook makes that notebook `invalid`. Reading and
matching one file can fail in any way (deep nesting, huge cells, odd JSON): that file is then
`invalid` or ignored, never the class. Folder walks, file sizes and the .zip are bounded by
`settings.Limits`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath

from nbformat import NotebookNode

from autograder.contract import CONTRACT, test_cell_id
from autograder.notebook_io import answer_cells, grade_id, is_test, nbgrader_meta, read
from autograder.notebook_io import setup_sources as _setup_sources
from autograder.paths import SOLUTIONS
from autograder.rebuild import match_score, release_stubs
from autograder.settings import Limits

_PKG = Path(__file__).resolve().parent
SKIPPED_NAMES = ("__MACOSX",)


class InputError(Exception):
    """Bad command-line input: reported as one line, exit code 2."""


class Refused(Exception):
    """A file the grader will not read (a link, a device, too large): the reason in words."""


# ---- masters ------------------------------------------------------------------------------


@dataclass
class Master:
    """A trusted source notebook of the course and what the grader needs from it."""

    notebook: str
    path: Path
    key: str  # changes when the master or the grading code changes

    @cached_property
    def nb(self) -> NotebookNode:
        return read(self.path)

    @cached_property
    def stubs(self) -> dict[str, str]:
        return release_stubs(self.nb)

    @cached_property
    def setup(self) -> list[str]:
        return _setup_sources(self.nb)

    @cached_property
    def code_answers(self) -> list[str]:
        return [g for g, c in answer_cells(self.nb).items() if c.cell_type == "code"]

    @cached_property
    def graded(self) -> dict[str, float]:
        """Autograded answer cells -> points of their test cell, in notebook order."""
        points = {
            gid: float(nbgrader_meta(c).get("points", 0))
            for c in self.nb.cells
            if is_test(c) and (gid := grade_id(c))
        }
        return {g: points[test_cell_id(g)] for g in self.code_answers if test_cell_id(g) in points}

    @cached_property
    def manual(self) -> dict[str, float]:
        """Manually graded answer cells (written answers) -> their points."""
        return {
            gid: float(nbgrader_meta(c).get("points", 0))
            for gid, c in answer_cells(self.nb).items()
            if nbgrader_meta(c).get("grade") and gid not in self.graded
        }

    @property
    def spec_module(self) -> str:
        return f"autograder.checks.nb{self.notebook[:2]}"

    @property
    def max_score(self) -> float:
        return round(sum(self.graded.values()) + sum(self.manual.values()), 6)


def grader_hash() -> str:
    """Digest of the grading code: any change regrades instead of resuming."""
    h = hashlib.sha256()
    for path in sorted(_PKG.rglob("*.py")):
        h.update(str(path.relative_to(_PKG)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def load_masters(
    solutions: Path | None = None, notebooks: tuple[str, ...] = ()
) -> dict[str, Master]:
    """Contract notebooks whose master exists in solutions/ (only `notebooks`, when given)."""
    folder = solutions or SOLUTIONS
    code = grader_hash()
    masters = {}
    for notebook in CONTRACT:
        path = folder / notebook
        if path.is_file() and (not notebooks or notebook in notebooks):
            key = hashlib.sha256(path.read_bytes() + code.encode()).hexdigest()
            masters[notebook] = Master(notebook, path, key)
    return masters


def select_notebooks(spec: str) -> tuple[str, ...]:
    """Course notebooks named by `spec`: numbers or file names, separated by commas or spaces.

    An assignment file holds the same, one or more per line; `#` starts a comment.
    """
    lines = [line.split("#", 1)[0] for line in spec.splitlines()]
    words = [w for line in lines for w in line.replace(",", " ").split()]
    chosen = []
    for word in words:
        hits = [nb for nb in CONTRACT if word in (nb, nb[:-6], nb[:2]) or nb[:2] == word.zfill(2)]
        if not hits:
            first = next(iter(CONTRACT))
            raise InputError(f"{word!r} is not a course notebook (expected e.g. 01 or {first})")
        chosen += [h for h in hits if h not in chosen]
    if not chosen:
        raise InputError("no notebooks selected")
    return tuple(nb for nb in CONTRACT if nb in chosen)


# ---- reading files --------------------------------------------------------------------------


def read_file(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, never through a link; Refused otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        if os.path.islink(path):
            raise Refused("a symbolic link, not the notebook file itself") from None
        raise Refused(f"it could not be opened ({err.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Refused("not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"larger than {limit // 2**20} MiB")
    return data


def parse_json(data: bytes) -> object:
    """The parsed JSON, or None for anything that is not (deep nesting included)."""
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None


# ---- students and their files ---------------------------------------------------------------


@dataclass
class Submission:
    student: str
    folder: Path
    files: dict[str, Path] = field(default_factory=dict)  # notebook -> file to grade
    invalid: dict[str, str] = field(default_factory=dict)  # notebook -> why it is refused
    notes: dict[str, list[str]] = field(default_factory=dict)  # notebook -> notes
    ignored: list[str] = field(default_factory=list)

    def note(self, notebook: str, text: str) -> None:
        self.notes.setdefault(notebook, []).append(text)


@dataclass
class Entry:
    """One .ipynb name found in a student's folder."""

    path: Path
    rel: str
    refused: str = ""  # why it will not be read (a link, a special file, a zip bomb)
    mtime: float = 0.0


def scan(folder: Path, limits: Limits, refused: dict[Path, str] | None = None) -> list[Entry]:
    """The .ipynb entries below `folder`, links and special files included but not followed."""
    refused = refused or {}
    found: list[Entry] = []
    stack, seen = [(folder, 0)], 0
    while stack:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > limits.files_per_student:
                return found
            if entry.name.startswith(".") or entry.name in SKIPPED_NAMES:
                continue
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 < limits.folder_depth:
                    stack.append((path, depth + 1))
                continue
            if not entry.name.lower().endswith(".ipynb"):
                continue
            rel = str(path.relative_to(folder))
            info = entry.stat(follow_symlinks=False)
            why = refused.get(path, "")
            if stat.S_ISLNK(info.st_mode):
                why = "a symbolic link, not the notebook file itself"
            elif not stat.S_ISREG(info.st_mode):
                why = "not a regular file"
            found.append(Entry(path, rel, why, info.st_mtime))
    return found


def named_like(name: str, notebook: str) -> bool:
    stem, number = notebook.rsplit(".", 1)[0].lower(), notebook[:2]
    lower = name.lower()
    return stem in lower or (lower.startswith(number) and not lower[2:3].isdigit())


def match_files(
    folder: Path,
    masters: dict[str, Master],
    limits: Limits | None = None,
    refused: dict[Path, str] | None = None,
) -> Submission:
    """The student's file for each notebook: by name, else by content, else by file name."""
    limits = limits or Limits()
    sub = Submission(folder.name, folder)
    entries = scan(folder, limits, refused)
    entries.sort(key=lambda e: (len(Path(e.rel).parts), -e.mtime, e.rel))
    rest = []
    for e in entries:
        name = e.path.name
        if name in masters and name not in sub.files and name not in sub.invalid:
            if e.refused:
                sub.invalid[name] = e.refused
                sub.note(name, f"{e.rel} was not read: {e.refused}.")
            else:
                sub.files[name] = e.path
        elif name in masters:
            sub.ignored.append(e.rel)
            sub.note(name, f"{e.rel} was not graded: another file has the same name.")
        else:
            rest.append(e)
    _match_by_content(sub, rest, masters, limits)
    return sub


def _match_by_content(
    sub: Submission, rest: list[Entry], masters: dict[str, Master], limits: Limits
) -> None:
    open_ = [nb for nb in masters if nb not in sub.files and nb not in sub.invalid]
    candidates = []
    for e in rest:
        for notebook, score in _scores(e, {nb: masters[nb] for nb in open_}, limits).items():
            candidates.append((score, e.mtime, e, notebook))
    used: set[str] = set()
    for score, _, e, notebook in sorted(candidates, key=lambda c: (-c[0], -c[1], c[2].rel)):
        if e.rel in used or notebook in sub.files or notebook in sub.invalid:
            continue
        used.add(e.rel)
        if e.refused:
            sub.invalid[notebook] = e.refused
            sub.note(notebook, f"{e.rel} was not read: {e.refused}.")
            continue
        sub.files[notebook] = e.path
        how = "its content" if score >= 1 else "its file name"
        sub.note(notebook, f"graded {e.rel} as {notebook} (matched by {how}).")
    sub.ignored += [e.rel for e in rest if e.rel not in used]


def _scores(e: Entry, masters: dict[str, Master], limits: Limits) -> dict[str, float]:
    """How much `e` looks like each notebook; a file that breaks matching scores by name only."""
    data = None
    if not e.refused:
        try:
            data = parse_json(read_file(e.path, limits.notebook_bytes))
        except Refused:
            data = None
    scores: dict[str, float] = {}
    for notebook, master in masters.items():
        score: float = 0
        if isinstance(data, dict) and not e.refused:
            try:
                score = match_score(data, master.nb, limits.match_cell_chars)
            except (Exception, RecursionError, MemoryError):  # any file may be hostile
                score = 0
        if score == 0 and named_like(e.path.name, notebook):
            score = 0.5
        if score > 0:
            scores[notebook] = score
    return scores


def discover(
    root: Path,
    masters: dict[str, Master],
    limits: Limits | None = None,
    exclude: Path | None = None,
    refused: dict[Path, str] | None = None,
) -> list[Submission]:
    """One Submission per student folder of `root`, sorted by student id."""
    limits = limits or Limits()
    subs = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        path = Path(entry.path)
        if entry.name.startswith(".") or entry.name in SKIPPED_NAMES:
            continue
        if exclude is not None and path.resolve() == exclude.resolve():
            continue
        if entry.is_symlink():
            sub = Submission(entry.name, path)
            for notebook in masters:
                sub.invalid[notebook] = "the student's folder is a symbolic link"
            subs.append(sub)
        elif entry.is_dir(follow_symlinks=False):
            try:
                subs.append(match_files(path, masters, limits, refused))
            except (Exception, RecursionError, MemoryError) as err:  # never the whole class
                sub = Submission(entry.name, path)
                for notebook in masters:
                    sub.invalid[notebook] = f"the folder could not be read ({type(err).__name__})"
                subs.append(sub)
    return subs


# ---- the class .zip ---------------------------------------------------------------------------


def extract_zip(
    archive: Path, dest: Path, limits: Limits | None = None
) -> tuple[list[str], dict[Path, str]]:
    """Extract the .ipynb members of `archive` into `dest`, bounded; never outside `dest`.

    Returns warnings, and the members refused by size or ratio (path -> why): each is left
    as an empty file so that discovery can mark that notebook `invalid`.
    """
    limits = limits or Limits()
    dest = dest.resolve()
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        raise InputError(f"{archive} is not a readable zip file ({err})") from None
    warnings: list[str] = []
    refused: dict[Path, str] = {}
    total = 0
    with zf:
        for index, info in enumerate(zf.infolist()):
            if index >= limits.zip_members:
                warnings.append(f"only the first {limits.zip_members} members were looked at")
                break
            target = _member_target(info, dest, warnings)
            if target is None or info.is_dir() or not target.name.lower().endswith(".ipynb"):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            why, written = _extract_member(zf, info, target, limits, limits.zip_bytes - total)
            total += written
            if why:
                refused[target] = why
                warnings.append(f"refused member {info.filename!r}: {why}")
    return warnings, refused


def _member_target(info: zipfile.ZipInfo, dest: Path, warnings: list[str]) -> Path | None:
    name = info.filename.replace("\\", "/")
    parts = PurePosixPath(name).parts
    link = (info.external_attr >> 16) & 0o170000 == 0o120000
    target = dest.joinpath(*parts) if parts else dest
    unsafe = (
        name.startswith("/")
        or ".." in parts
        or (parts and ":" in parts[0])
        or link
        or not target.resolve().is_relative_to(dest.resolve())
    )
    if unsafe:
        warnings.append(f"skipped unsafe path in the zip: {info.filename!r}")
        return None
    return target


def _extract_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, limits: Limits, room: int
) -> tuple[str, int]:
    """(why refused or "", bytes written); a refused member is left empty."""
    cap = min(limits.notebook_bytes, int(limits.zip_ratio * max(info.compress_size, 1)))
    written = 0
    why = ""
    try:
        with zf.open(info) as src, open(target, "wb") as out:
            while chunk := src.read(1 << 20):
                written += len(chunk)
                if written > room:
                    raise InputError(f"the zip expands to more than {limits.zip_bytes >> 20} MiB")
                if written > cap:
                    why = (
                        f"it expands more than {limits.zip_ratio:g} times (a zip bomb?)"
                        if cap < limits.notebook_bytes
                        else f"larger than {limits.notebook_bytes >> 20} MiB"
                    )
                    break
                out.write(chunk)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as err:
        why = f"unreadable ({type(err).__name__})"
    if why:
        target.write_bytes(b"")
    return why, written


def class_root(folder: Path) -> Path:
    """The class folder inside an extracted zip: descend through lone wrapper folders."""
    while True:
        kids = [
            k
            for k in folder.iterdir()
            if not k.name.startswith(".") and k.name not in SKIPPED_NAMES
        ]
        if len(kids) != 1 or not kids[0].is_dir() or any(kids[0].glob("*.ipynb")):
            return folder
        if not any(k.is_dir() for k in kids[0].iterdir()):
            return folder
        folder = kids[0]
