"""Find the students and their files: masters, matching, and the class .zip, all bounded.

Masters: the contract notebooks whose instructor source exists in solutions/ (or those of them
the run asks for). Students: one folder each below SUBMISSIONS, or as a file-name pattern
names them (autograder/intake/intake.py: Canvas's, Moodle's and nbgrader's layouts, or the
instructor's own); ids are compared in Unicode NFC. Files: a regular file named like a course
notebook is that notebook; any other .ipynb is matched by content (its answer cells'
grade_ids count 2, each contract name its code defines 1) to the notebook it resembles most;
an unreadable file whose name contains a notebook's name or starts with its number is that
notebook (and will be `invalid`). Of several files for one notebook (`02 (1).ipynb`, Colab's
`Copy of ...`), the one with the most answers filled in is graded, then the newest, and the
others are named as left out (`choose`). Symbolic links and special files are never followed
or read: one named like a notebook makes that notebook `invalid`. Reading and matching one
file can fail in any way (deep nesting, huge cells, odd JSON): that file is then `invalid` or
ignored, never the class. Folder walks, file sizes and the .zip are bounded by
`settings.Limits`.
"""

from __future__ import annotations

import json
import os
import stat
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from autograder.intake import intake
from autograder.model.course import InputError, Master
from autograder.model.notebook_io import (
    grade_id,
    is_answer,
    source,
)
from autograder.model.settings import Limits
from autograder.worker.rebuild import match_score, normalise, rebuild

SKIPPED_NAMES = intake.SKIPPED_NAMES


class Refused(Exception):
    """A file the grader will not read (a link, a device, too large): the reason in words."""


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


@dataclass(frozen=True)
class Choice:
    """Several files could be one notebook: the one graded and those left out."""

    graded: str
    left_out: tuple[str, ...]

    def line(self) -> str:
        return f"graded {self.graded}; left out {', '.join(self.left_out)}"


@dataclass
class Submission:
    student: str
    folder: Path  # the student's folder, or the class folder when a pattern reads the class
    files: dict[str, Path] = field(default_factory=dict)  # notebook -> file to grade
    invalid: dict[str, str] = field(default_factory=dict)  # notebook -> why it is refused
    notes: dict[str, list[str]] = field(default_factory=dict)  # notebook -> notes
    ignored: list[str] = field(default_factory=list)
    choices: dict[str, Choice] = field(default_factory=dict)  # notebook -> several candidates

    def note(self, notebook: str, text: str) -> None:
        self.notes.setdefault(notebook, []).append(text)


@dataclass
class Entry:
    """One .ipynb found for a student."""

    path: Path
    rel: str  # relative to Submission.folder: what notes and the instructor see
    refused: str = ""  # why it will not be read (a link, a special file, a zip bomb)
    mtime: float = 0.0
    name: str = ""  # the file's own name (a pattern's `file` group); default: the path's
    version: str = ""  # a pattern's `version` group: larger is newer

    def __post_init__(self) -> None:
        self.name = self.name or self.path.name


def scan(folder: Path, limits: Limits, refused: dict[Path, str] | None = None) -> list[Entry]:
    """The .ipynb entries below `folder`, links and special files included but not followed."""
    found = intake.walk(folder, limits, refused, limit=limits.files_per_student)
    return [Entry(f.path, f.rel, f.refused, f.mtime) for f in found]


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
    """The student's file for each notebook (see `assign`); the folder's name is the id."""
    limits = limits or Limits()
    sub = Submission(intake.nfc(folder.name), folder)
    assign(sub, scan(folder, limits, refused), masters, limits)
    return sub


def assign(
    sub: Submission, entries: list[Entry], masters: dict[str, Master], limits: Limits
) -> None:
    """Each entry to the notebook it is (its exact file name, else the notebook its content
    resembles most, else one its name points at); of several for one notebook, the rule of
    `choose`. Entries that are no notebook are `ignored`."""
    candidates: dict[str, list[tuple[Entry, str]]] = {}
    for e in entries:
        notebook, how = _notebook_of(e, masters, limits)
        if notebook is None:
            sub.ignored.append(e.rel)
        else:
            candidates.setdefault(notebook, []).append((e, how))
    for notebook, master in masters.items():
        found = candidates.get(notebook, [])
        if len(found) > 1:
            e = choose(sub, notebook, master, [c for c, _ in found], limits)
            how = "name"
        elif found:
            e, how = found[0]
        else:
            continue
        if e.refused:
            sub.invalid[notebook] = e.refused
            sub.note(notebook, f"{e.rel} was not read: {e.refused}.")
            continue
        sub.files[notebook] = e.path
        if how != "name":
            sub.note(notebook, f"graded {e.rel} as {notebook} (matched by its {how}).")


def _notebook_of(e: Entry, masters: dict[str, Master], limits: Limits) -> tuple[str | None, str]:
    if e.name in masters:
        return e.name, "name"
    scores = _scores(e, masters, limits)
    if not scores:
        return None, ""
    order = list(masters)
    best = max(scores, key=lambda nb: (scores[nb], -order.index(nb)))
    return best, "content" if scores[best] >= 1 else "file name"


def answered(master: Master, e: Entry, limits: Limits) -> int:
    """How many of the notebook's answer cells `e` fills in (differs from the release stub);
    -1 for a file that cannot be read as a notebook."""
    if e.refused:
        return -1
    try:
        data = parse_json(read_file(e.path, limits.notebook_bytes))
    except Refused:
        return -1
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return -1
    try:
        rebuilt = rebuild(master.nb, data, master.stubs)
    except (Exception, RecursionError, MemoryError):  # any file may be hostile
        return -1
    stubs = {gid: normalise(stub) for gid, stub in master.stubs.items()}
    return sum(
        rebuilt.how.get(gid) != "missing" and normalise(source(c)) != stubs.get(gid)
        for c in rebuilt.notebook.cells
        if is_answer(c) and (gid := grade_id(c))
    )


def _version(text: str) -> tuple[int, int, str]:
    """A pattern's `version` as a sort key: numbers by value, other text as text."""
    if not text:
        return (0, 0, "")
    return (2, int(text), "") if text.isdigit() else (1, 0, text)


def choose(
    sub: Submission, notebook: str, master: Master, entries: list[Entry], limits: Limits
) -> Entry:
    """Of several files for one notebook, the one with the most answers filled in, then the
    newest (the pattern's `version`, else the file's time), then the one named exactly like
    the notebook; never the best-scoring, which would reward handing in many variants. The
    student's page, grades.csv and the report say which was graded and which were left out."""
    count = {e.rel: answered(master, e, limits) for e in entries}
    ranked = sorted(entries, key=lambda e: e.rel)
    ranked.sort(
        key=lambda e: (count[e.rel], _version(e.version), e.mtime, e.name == notebook),
        reverse=True,
    )
    total = len(master.stubs)

    def what(e: Entry) -> str:
        if e.refused:
            return f"not read: {e.refused}"
        if count[e.rel] < 0:
            return "not readable as a notebook"
        return f"{count[e.rel]} of {total} answers filled in"

    chosen, rest = ranked[0], ranked[1:]
    newest = max(entries, key=lambda e: (_version(e.version), e.mtime))
    why = f"{what(chosen)}{', the newest' if newest is chosen else ''}"
    others = "; ".join(f"{e.rel} ({what(e)})" for e in rest)
    sub.note(
        notebook,
        f"{len(entries)} files could be {notebook}: graded {chosen.rel} ({why}); left out "
        f"{others}. The grader takes the file with the most answers filled in, then the "
        "newest: hand in one file per notebook.",
    )
    sub.choices[notebook] = Choice(chosen.rel, tuple(e.rel for e in rest))
    return chosen


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
        if score == 0 and named_like(e.name, notebook):
            score = 0.5
        if score > 0:
            scores[notebook] = score
    return scores


@dataclass
class Class:
    """A class folder as read: a Submission per student, and what the reading had to say."""

    submissions: list[Submission]
    warnings: list[str] = field(default_factory=list)
    pattern: intake.Pattern | None = None
    guessed: bool = False  # the pattern was recognised, not asked for


def read_class(
    root: Path,
    masters: dict[str, Master],
    limits: Limits | None = None,
    exclude: Path | None = None,
    refused: dict[Path, str] | None = None,
    pattern: intake.Pattern | None = None,
) -> Class:
    """The students of `root`: one per folder, or as `pattern` names them (a preset is
    recognised when the folder is laid out by one), sorted by student id."""
    limits = limits or Limits()
    guessed = False
    if pattern is None:
        pattern = intake.guess(root, limits)
        guessed = pattern is not None
    if pattern is None:
        subs, warnings = _by_folder(root, masters, limits, exclude, refused)
        return Class(subs, warnings)
    grouped = intake.group(root, pattern, limits, refused)
    inside = exclude is not None and not root.resolve().is_relative_to(exclude.resolve())
    subs = []
    for student, files in sorted(grouped.files.items()):
        sub = Submission(student, root)
        entries = [  # OUT's own files are never a hand-in (unless the class is in OUT: a .zip)
            Entry(f.path, f.rel, f.refused, f.mtime, Path(g["file"]).name, g.get("version", ""))
            for f, g in files[: limits.files_per_student]
            if not (inside and f.path.resolve().is_relative_to(exclude.resolve()))  # type: ignore[union-attr]
        ]
        assign(sub, entries, masters, limits)
        subs.append(sub)
    warnings = list(grouped.warnings)
    if grouped.unmatched:
        shown = ", ".join(grouped.unmatched[:5]) + (", ..." if len(grouped.unmatched) > 5 else "")
        warnings.append(
            f"{len(grouped.unmatched)} .ipynb files do not fit --pattern {pattern.name} and "
            f"are not graded: {shown}"
        )
    return Class(subs, warnings, pattern, guessed)


def _by_folder(
    root: Path,
    masters: dict[str, Master],
    limits: Limits,
    exclude: Path | None,
    refused: dict[Path, str] | None,
) -> tuple[list[Submission], list[str]]:
    folders, warnings = intake.student_folders(root)
    subs = []
    for student, paths in folders.items():
        paths = [p for p in paths if exclude is None or p.resolve() != exclude.resolve()]
        if not paths:
            continue
        if any(p.is_symlink() for p in paths):
            sub = Submission(student, paths[0])
            for notebook in masters:
                sub.invalid[notebook] = "the student's folder is a symbolic link"
            subs.append(sub)
            continue
        try:
            if len(paths) == 1:
                sub = match_files(paths[0], masters, limits, refused)
                sub.student = student
            else:  # one id written in two Unicode forms: both folders are that student's
                sub = Submission(student, root)
                entries = [
                    Entry(e.path, e.path.relative_to(root).as_posix(), e.refused, e.mtime)
                    for p in paths
                    for e in scan(p, limits, refused)
                ]
                assign(sub, entries, masters, limits)
        except (Exception, RecursionError, MemoryError) as err:  # never the whole class
            sub = Submission(student, paths[0])
            for notebook in masters:
                sub.invalid[notebook] = f"the folder could not be read ({type(err).__name__})"
        subs.append(sub)
    return subs, warnings


def discover(
    root: Path,
    masters: dict[str, Master],
    limits: Limits | None = None,
    exclude: Path | None = None,
    refused: dict[Path, str] | None = None,
) -> list[Submission]:
    """One Submission per student folder of `root`, sorted by student id."""
    return read_class(root, masters, limits, exclude, refused).submissions


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
        _keep_time(target, info)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as err:
        why = f"unreadable ({type(err).__name__})"
    if why:
        target.write_bytes(b"")
    return why, written


def _keep_time(target: Path, info: zipfile.ZipInfo) -> None:
    """The member's own time on the extracted file: "the newest" of two files means it."""
    try:
        when = time.mktime((*info.date_time, 0, 0, -1))
        os.utime(target, (when, when))
    except (OverflowError, ValueError, OSError):
        pass


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
