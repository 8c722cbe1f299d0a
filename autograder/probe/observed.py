"""Observed data on disk: JSON for the structure, .npz for the arrays, never pickle.

The jail writes with `write_observed`; the grader reads with `read_observed`, which trusts
nothing in the folder: no symbolic links are followed (the folder itself included), only
regular files are read, their size is bounded, and arrays load with `allow_pickle=False`
(an object array is refused, never unpickled). Imports only the standard library and numpy.
"""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

ARRAY = "\x00npz"  # JSON marker: {ARRAY: key} stands for the array stored under key in the .npz
RESULT_LIMIT = 256 * 2**20  # bytes of observed data the grader agrees to read
MAX_DEPTH = 8


def encode(value: Any, arrays: dict[str, np.ndarray], depth: int = 0) -> Any:
    """Plain data for JSON; numeric arrays are moved into `arrays` and replaced by a marker."""
    if depth > MAX_DEPTH:
        return {"__repr__": "<nested too deep>"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return encode(value.item(), arrays, depth + 1)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject or value.dtype.kind not in "biufcUS":
            return {"__repr__": f"<array of dtype {value.dtype}>"}
        key = f"a{len(arrays)}"
        arrays[key] = np.ascontiguousarray(value)
        return {ARRAY: key}
    if isinstance(value, (list, tuple)):
        return [encode(v, arrays, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v, arrays, depth + 1) for k, v in value.items()}
    try:
        text = repr(value)[:200]
    except Exception:
        text = f"<{type(value).__name__}>"
    return {"__repr__": text}


def decode(value: Any, arrays: Any) -> Any:
    if isinstance(value, list):
        return [decode(v, arrays) for v in value]
    if isinstance(value, dict):
        if set(value) == {ARRAY}:
            key = value[ARRAY]
            return arrays[key] if isinstance(key, str) and key in arrays.files else None
        return {k: decode(v, arrays) for k, v in value.items()}
    return value


def write_observed(folder: str | Path, observed: dict[str, Any]) -> None:
    """observed.npz then observed.json (the latter's presence means: complete)."""
    folder = Path(folder)
    arrays: dict[str, np.ndarray] = {}
    plain = encode(observed, arrays)
    np.savez(folder / "observed.tmp.npz", **arrays)
    (folder / "observed.tmp.json").write_text(json.dumps(plain))
    os.replace(folder / "observed.tmp.npz", folder / "observed.npz")
    os.replace(folder / "observed.tmp.json", folder / "observed.json")


def write_json(folder: str | Path, name: str, value: Any) -> None:
    path = Path(folder) / name
    path.with_suffix(".tmp").write_text(json.dumps(value))
    os.replace(path.with_suffix(".tmp"), path)


# ---- reading (the grader's side) -----------------------------------------------------------


def read_bytes(folder: str | Path, name: str, limit: int) -> bytes:
    """The content of folder/name, refusing links, special files and more than `limit` bytes.

    Raises OSError (missing, a link, not a regular file) or ValueError (too large).
    """
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{name} is not a regular file")
        if info.st_size > limit:
            raise ValueError(f"{name} is too large")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{name} is too large")
    return data


def read_text(folder: str | Path, name: str, limit: int = 4096) -> str:
    """A short text file, or "" when it is missing or not a plain file."""
    try:
        return read_bytes(folder, name, 1 << 20)[:limit].decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return ""


def read_json(folder: str | Path, name: str, limit: int = 1 << 20) -> Any:
    """Parsed JSON of a small file, or None when it is missing, too big or not JSON."""
    try:
        return json.loads(read_bytes(folder, name, limit))
    except (OSError, ValueError, RecursionError):
        return None


def read_observed(folder: str | Path) -> dict[str, Any]:
    """What the probe observed. Raises ValueError/OSError when the files are unusable."""
    npz = read_bytes(folder, "observed.npz", RESULT_LIMIT)
    js = read_bytes(folder, "observed.json", RESULT_LIMIT - len(npz))
    with np.load(io.BytesIO(npz), allow_pickle=False) as arrays:
        try:
            observed = _materialise(decode(json.loads(js), arrays))
        except RecursionError as err:
            raise ValueError("they are nested too deeply") from err
    if not isinstance(observed, dict):
        raise ValueError("they are not a mapping")
    return observed


def _materialise(value: Any) -> Any:
    """Copy arrays out of the lazily loaded .npz before it is closed."""
    if isinstance(value, np.ndarray):
        return np.array(value)
    if isinstance(value, list):
        return [_materialise(v) for v in value]
    if isinstance(value, dict):
        return {k: _materialise(v) for k, v in value.items()}
    return value
