"""The lecture's tiny Shakespeare: found by path, else downloaded once and checked.

Order: the file named by $TINYSHAKESPEARE, then data/tinyshakespeare.txt in the project (or in
the working directory), then a one-time download into that data/ folder. The file must match
the lecture's sha256; anything else is a CourseError with what to do, not a traceback.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path

from attention_course.errors import CourseError

URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
ENV_VAR = "TINYSHAKESPEARE"
FILE_NAME = "tinyshakespeare.txt"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class DataUnavailable(CourseError):
    """The data set is neither on disk nor downloadable."""


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def data_dir() -> Path:
    """data/ of the project when it is a checkout, else data/ under the working directory."""
    if (PROJECT_ROOT / "pyproject.toml").exists():
        return PROJECT_ROOT / "data"
    return Path.cwd() / "data"


def _checked(path: Path, origin: str) -> Path:
    digest = sha256_of(path)
    if digest != SHA256:
        raise DataUnavailable(
            f"{path} ({origin}) is not the lecture's tiny Shakespeare: its sha256 is "
            f"{digest[:12]}..., expected {SHA256[:12]}....\n"
            f"Replace it with the file from {URL}."
        )
    return path


def locate(download: bool = True, timeout: float = 20.0) -> Path:
    """Path of a checked copy of the data set, downloading it once if allowed."""
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise DataUnavailable(f"${ENV_VAR} points to {path}, which is not a file.")
        return _checked(path, f"from ${ENV_VAR}")
    for folder in dict.fromkeys([data_dir(), Path.cwd() / "data"]):
        candidate = folder / FILE_NAME
        if candidate.is_file():
            return _checked(candidate, "in data/")
    target = data_dir() / FILE_NAME
    if not download:
        raise DataUnavailable(_where_to_put(target))
    try:
        with urllib.request.urlopen(URL, timeout=timeout) as response:
            payload = response.read()
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise DataUnavailable(
            f"Could not download the data set ({err}).\n" + _where_to_put(target)
        ) from None
    if hashlib.sha256(payload).hexdigest() != SHA256:
        raise DataUnavailable(
            f"The download from {URL} did not match the expected checksum; nothing was saved."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    partial.write_bytes(payload)
    partial.replace(target)
    return target


def _where_to_put(target: Path) -> str:
    return (
        f"Put the lecture's tiny Shakespeare at {target}, or set ${ENV_VAR} to its path "
        f"(the file is at {URL})."
    )


def load_text(download: bool = True) -> str:
    """The whole data set as one string (1,115,394 characters)."""
    return locate(download=download).read_text(encoding="utf-8")
