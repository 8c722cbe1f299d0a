"""How a class folder is read: one folder per student, or a file-name pattern (`--pattern`).

The default layout is one folder per student below SUBMISSIONS, the folder's name being the
student id. Platforms hand submissions out otherwise; a pattern reads them as they come: a
regular expression matched against the whole path of each .ipynb file below SUBMISSIONS
(folders separated by `/`), with the named groups

- `student` (required): the student id;
- `file` (required): the file's own name as the student handed it in (e.g.
  `02_queries_and_keys.ipynb`), by which it is matched to a course notebook;
- `version` (optional): larger is newer (a time stamp, or an upload id that grows), used when
  one student handed in several files for one notebook;
- any other group is read and ignored; `participant` is kept to tell two people of one name
  apart.

nbgrader's `zip_collect` (FileNameCollectorPlugin.named_regexp) reads file names the same way.
Built-in presets, checked against each platform's own code that names the files:

- `canvas` (Canvas, SpeedGrader's *Download Submissions*): flat files
  `<sortable name>_[LATE_]<user id>_<upload id>_<file>`; the name is the user's sortable name
  in lower case without spaces or punctuation, `LATE` marks a late submission, anonymous
  grading writes `anon_<id>` instead of name and user id. The student id is Canvas's numeric
  user id, the `ID` column of Canvas's gradebook (`export --format canvas --id-column ID`).
- `moodle` (Moodle's assignment, *Download all submissions*): a folder per submission,
  `<full name>_<participant id>_assignsubmission_file[_]/<file>` (the default since Moodle
  3.1), or flat files `<full name>_<participant id>_assignsubmission_file_<file>`. The
  student id is the full name (the participant id changes from one assignment to the next);
  two people of one name in one archive stop the run: use `moodle-id`.
- `moodle-id`: the same files, the student id being `<full name>_<participant id>` (blind
  marking writes `Participant` for every name).
- `nbgrader`: nbgrader's course directory (`submitted/<student>/<assignment>/<file>`) or its
  exchange (`inbound/<student>+<assignment>+<timestamp>[+<random>]/<file>`), SUBMISSIONS being
  the course directory, the exchange's course folder, or `submitted`/`inbound` itself.

Student ids are compared after Unicode NFC normalisation (macOS writes file names in NFD),
and case-folded where the platform's ids ignore case (nbgrader's, JupyterHub user names);
ids that differed only so are one student, with a warning.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from autograder.model.settings import Limits

SKIPPED_NAMES = ("__MACOSX",)


class PatternError(ValueError):
    """A --pattern that cannot be used: the reason in words."""


@dataclass(frozen=True)
class Pattern:
    """A way of reading student ids and file names from the paths of a class folder."""

    name: str  # the preset's name, or "custom"
    regexes: tuple[re.Pattern[str], ...]  # tried in order; the first full match counts
    casefold: bool = False  # the platform's ids ignore case
    with_root: bool = False  # matched against "<SUBMISSIONS' own name>/<path>"
    about: str = ""

    def match(self, rel: str, root_name: str = "") -> dict[str, str] | None:
        """The named groups of the first regex that matches `rel` whole, or None."""
        path = f"{root_name}/{rel}" if self.with_root else rel
        for regex in self.regexes:
            found = regex.fullmatch(path)
            if found and found["student"] and found["file"]:
                return {k: v for k, v in found.groupdict().items() if v is not None}
        return None


def _compile(*sources: str, flags: int = 0) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(s, flags) for s in sources)


_ANY_FOLDERS = r"(?:[^/]*/)*?"
_MOODLE_NAME = r"(?P<student>[^/_]+)_(?P<participant>\d+)_assignsubmission_file"
_MOODLE_BOTH = r"(?P<student>[^/_]+_\d+)_assignsubmission_file"

PRESETS: dict[str, Pattern] = {
    "canvas": Pattern(
        "canvas",
        _compile(
            _ANY_FOLDERS + r"(?:(?P<name>(?!anon_)[^/]*?)_)?(?:LATE_)?"
            r"(?P<student>\d+|anon_[0-9A-Za-z]+)_(?P<version>\d+)_(?P<file>[^/]+)",
            flags=re.IGNORECASE,
        ),
        about="Canvas's download: <name>_[LATE_]<user id>_<upload id>_<file>",
    ),
    "moodle": Pattern(
        "moodle",
        _compile(
            _ANY_FOLDERS + _MOODLE_NAME + r"_?/(?:[^/]*/)*(?P<file>[^/]+)",
            _ANY_FOLDERS + _MOODLE_NAME + r"_(?P<file>[^/]+)",
        ),
        about="Moodle's download: <full name>_<participant id>_assignsubmission_file/<file>",
    ),
    "moodle-id": Pattern(
        "moodle-id",
        _compile(
            _ANY_FOLDERS + _MOODLE_BOTH + r"_?/(?:[^/]*/)*(?P<file>[^/]+)",
            _ANY_FOLDERS + _MOODLE_BOTH + r"_(?P<file>[^/]+)",
        ),
        about="Moodle's download, students told apart by participant id",
    ),
    "nbgrader": Pattern(
        "nbgrader",
        _compile(
            r"(?:.*/)?submitted/(?P<student>[^/]+)/(?P<assignment>[^/]+)/(?:[^/]*/)*"
            r"(?P<file>[^/]+)",
            r"(?:.*/)?inbound/(?P<student>[^/+]+)\+(?P<assignment>[^/+]+)\+(?P<version>[^/+]+)"
            r"(?:\+[^/]*)?/(?:[^/]*/)*(?P<file>[^/]+)",
        ),
        casefold=True,
        with_root=True,
        about="nbgrader: submitted/<student>/<assignment>/<file> or its exchange's inbound/",
    ),
}


def parse_pattern(text: str) -> Pattern:
    """A preset by name, or a regular expression with the groups `student` and `file`."""
    if text in PRESETS:
        return PRESETS[text]
    try:
        regex = re.compile(text)
    except re.error as err:
        raise PatternError(f"--pattern {text!r} is not a regular expression ({err})") from None
    missing = [g for g in ("student", "file") if g not in regex.groupindex]
    if missing:
        names = ", ".join(f"(?P<{g}>...)" for g in missing)
        presets = ", ".join(PRESETS)
        raise PatternError(f"--pattern needs the named group {names} (or a preset: {presets})")
    return Pattern("custom", (regex,), about=text)


# ---- ids --------------------------------------------------------------------------------


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


@dataclass
class Ids:
    """Student ids as read, made one where they differ only by Unicode form (or by case)."""

    casefold: bool = False
    ids: dict[str, str] = field(default_factory=dict)  # comparison key -> the id used
    spellings: dict[str, set[str]] = field(default_factory=dict)  # id used -> raw spellings

    def key(self, raw: str) -> str:
        text = nfc(raw)
        return text.casefold() if self.casefold else text

    def __call__(self, raw: str) -> str:
        """The id for `raw`: its NFC form, or the id an earlier spelling of it got."""
        student = self.ids.setdefault(self.key(raw), nfc(raw))
        self.spellings.setdefault(student, set()).add(raw)
        return student

    def warnings(self) -> list[str]:
        lines = []
        for student, raw in sorted(self.spellings.items()):
            if len(raw) > 1 or raw != {student}:
                how = "Unicode form" + (" or case" if self.casefold else "")
                shown = ", ".join(sorted(repr(r) for r in raw))
                lines.append(
                    f"student {student!r}: read from {shown}, the same id in another {how}; "
                    "graded as one student"
                )
        return lines


# ---- walking a class folder ---------------------------------------------------------------


@dataclass
class Found:
    """One .ipynb entry below the class folder (links and special files included, not followed)."""

    path: Path
    rel: str  # POSIX path below the class folder
    refused: str = ""  # why it will not be read
    mtime: float = 0.0


def walk(
    root: Path, limits: Limits, refused: dict[Path, str] | None = None, limit: int | None = None
) -> list[Found]:
    """Every .ipynb below `root` (hidden and __MACOSX entries skipped), bounded in number and
    depth."""
    refused = refused or {}
    limit = limit or limits.zip_members
    found: list[Found] = []
    stack, seen = [(root, 0)], 0
    while stack:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = sorted(it, key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > limit:
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
            info = entry.stat(follow_symlinks=False)
            why = refused.get(path, "")
            if stat.S_ISLNK(info.st_mode):
                why = "a symbolic link, not the notebook file itself"
            elif not stat.S_ISREG(info.st_mode):
                why = "not a regular file"
            found.append(Found(path, path.relative_to(root).as_posix(), why, info.st_mtime))
    return found


@dataclass
class Grouped:
    """The files of a class folder read through a pattern, by student."""

    files: dict[str, list[tuple[Found, dict[str, str]]]] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def group(
    root: Path, pattern: Pattern, limits: Limits, refused: dict[Path, str] | None = None
) -> Grouped:
    """Each .ipynb below `root` under the student its path names; the rest listed."""
    ids = Ids(pattern.casefold)
    result = Grouped()
    people: dict[str, set[str]] = {}  # student -> participant ids seen (moodle)
    for found in walk(root, limits, refused):
        groups = pattern.match(found.rel, root.name)
        if groups is None:
            result.unmatched.append(found.rel)
            continue
        student = ids(groups["student"])
        result.files.setdefault(student, []).append((found, groups))
        if "participant" in groups:
            people.setdefault(student, set()).add(groups["participant"])
    shared = {s: sorted(p) for s, p in people.items() if len(p) > 1}
    if shared:
        names = "; ".join(f"{s!r} (participants {', '.join(p)})" for s, p in shared.items())
        raise PatternError(
            f"several students share a name in this download: {names}. Grade it with "
            "--pattern moodle-id (the student id is then '<name>_<participant id>')"
        )
    result.warnings = ids.warnings()
    return result


def student_folders(root: Path) -> tuple[dict[str, list[Path]], list[str]]:
    """The default layout: student id -> the folders named so (after NFC), and warnings."""
    ids = Ids()
    folders: dict[str, list[Path]] = {}
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return {}, []
    for entry in entries:
        if entry.name.startswith(".") or entry.name in SKIPPED_NAMES:
            continue
        if entry.is_dir(follow_symlinks=False) or entry.is_symlink():
            folders.setdefault(ids(entry.name), []).append(Path(entry.path))
    return folders, ids.warnings()


_MOODLE_FOLDER = re.compile(r"[^/_]+_\d+_assignsubmission_[a-z]+_?")


def guess(root: Path, limits: Limits) -> Pattern | None:
    """The preset a class folder is laid out by, when it is not one folder per student: an
    nbgrader course or exchange, Moodle's folders, or flat files that one preset reads (at
    least half of them)."""
    try:
        kids = [k for k in root.iterdir() if not k.name.startswith(".")]
    except OSError:
        return None
    names = {k.name for k in kids if k.is_dir() and not k.is_symlink()}
    if root.name in ("submitted", "inbound") or names & {"submitted", "inbound"}:
        return PRESETS["nbgrader"]
    folders = [k for k in kids if k.is_dir() and k.name not in SKIPPED_NAMES]
    if folders and all(_MOODLE_FOLDER.fullmatch(k.name) for k in folders):
        return PRESETS["moodle"]
    if not any(k.is_file() and k.name.lower().endswith(".ipynb") for k in kids):
        return None
    found = walk(root, limits, limit=min(limits.zip_members, 20_000))
    for name in ("moodle", "canvas"):
        fits = sum(PRESETS[name].match(f.rel, root.name) is not None for f in found)
        if fits and 2 * fits >= len(found):  # the rest is listed as not graded
            return PRESETS[name]
    return None
