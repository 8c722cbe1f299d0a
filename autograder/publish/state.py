"""Resume state: one authenticated file per graded (student, notebook), written atomically.

`OUT/.state/<student>/<notebook>.json` holds the `NotebookGrade` and an HMAC-SHA256 of it
under a key kept in `OUT/.state/key` (mode 0600, made on first use). Only the grading process
writes OUT and only it reads the key; student code runs in a jail that sees neither. A state
whose MAC does not verify (forged, edited, half written, or from another OUT) is not trusted:
that notebook is graded again. A state counts only for the submission, master and grading
code it was made from (its `key`), so a changed file or a changed grader regrades.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import threading
from pathlib import Path

from autograder.model.grades import NotebookGrade
from autograder.model.settings import LIMITS
from autograder.publish.outdir import state_folder, state_path

KEY_LENGTH = 32  # bytes of the HMAC key (a size, not a bound)
STATE_BYTES = LIMITS.reads.state_bytes  # a state is a few KB; a larger file is not ours


def atomic_write(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Write via a temporary file and a rename: readers see the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _canonical(data: dict) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


class StateStore:
    """The authenticated states of one OUT folder."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.folder = state_folder(out)
        self._key = _load_or_make_key(self.folder / "key")

    def mac(self, data: dict) -> str:
        return hmac.new(self._key, _canonical(data), hashlib.sha256).hexdigest()

    def save(self, grade: NotebookGrade) -> None:
        data = grade.to_json()
        blob = json.dumps({"grade": data, "mac": self.mac(data)}, indent=1, allow_nan=False)
        atomic_write(state_path(self.out, grade.student, grade.notebook), blob, 0o600)

    def load(self, student: str, notebook: str, key: str | None = None) -> NotebookGrade | None:
        """The trusted grade, or None: absent, forged, for another submission, unreadable."""
        grade, _ = self.check(student, notebook, key)
        return grade

    def check(
        self, student: str, notebook: str, key: str | None = None
    ) -> tuple[NotebookGrade | None, str]:
        """(grade, "") or (None, why it is not trusted; "" when there is no state)."""
        path = state_path(self.out, student, notebook)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None, ""
        except OSError:
            return None, "unreadable"
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None, "not a file"
            with os.fdopen(fd, "rb", closefd=False) as f:
                raw = f.read(STATE_BYTES + 1)
        finally:
            os.close(fd)
        try:
            doc = json.loads(raw) if len(raw) <= STATE_BYTES else None
            data, mac = doc["grade"], doc["mac"]
            if not (isinstance(mac, str) and hmac.compare_digest(mac, self.mac(data))):
                return None, "its MAC does not verify"
            grade = NotebookGrade.from_json(data)
        except (ValueError, KeyError, TypeError, RecursionError):
            return None, "not a state file"
        if (grade.student, grade.notebook) != (student, notebook):
            return None, "it is another notebook's"
        if key is not None and grade.key != key:
            return None, ""  # stale: the submission, the master or the grader changed
        return grade, ""


def _load_or_make_key(path: Path) -> bytes:
    """The MAC key: read it, or make it (mode 0600) when absent or not a proper key file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            key = f.read(KEY_LENGTH + 1)
        proper = stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
        if proper and not info.st_mode & 0o077 and len(key) == KEY_LENGTH:
            return key
    except OSError:
        pass
    key = secrets.token_bytes(KEY_LENGTH)  # a new key: every earlier state is regraded
    atomic_write(path, key, 0o600)
    return key
