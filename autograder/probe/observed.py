"""Observed data on disk: JSON for the structure, .npy members of a .npz for the arrays, never
pickle.

The jail writes with `write_observed`; the grader reads with `read_observed`, which trusts
nothing in the folder: no symbolic links are followed (the folder itself included), only
regular files are read, and everything is read against one byte budget per probe
(`Bounds.result_bytes`, from the grader's `reads` limits: the files, then each array) and the
notebook's deadline. The .npz is read by the grader itself, not by numpy's loader: the number
of members and the size of the central directory are checked first; a compressed member is
refused (np.savez stores them uncompressed, so a member's size on disk is its size in memory);
each member's size comes from its header (shape and dtype, objects refused) and must match the
stored size before a byte of it is read; and each member is read once, however often the JSON
refers to it.
Imports only the standard library and numpy.
"""

from __future__ import annotations

import io
import json
import math
import os
import stat
import struct
import time
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

ARRAY = "\x00npz"  # JSON marker: {ARRAY: key} stands for the array stored under key in the .npz
KINDS = "biufcUS"  # the dtypes `encode` writes
# Mirrors of model/settings.py's ProbeLimits (this package imports nothing of the grader).
MAX_DEPTH = 8
TEXT_BYTES = 4096
JSON_BYTES = 1 << 20
NPY_HEADER_BYTES = 4096


class Bounds(NamedTuple):
    """What the grader reads of one probe's files (its settings' `reads` limits)."""

    result_bytes: int  # bytes held to read the files and arrays, in all
    json_bytes: int  # of which observed.json (structure and scalars; arrays go to the .npz)
    members: int  # arrays in observed.npz
    directory_bytes: int  # bytes of its central directory


class Unreadable(ValueError):
    """The observed files break a bound or a rule; the message is the grader's, never theirs."""


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
            return arrays.get(key) if isinstance(key, str) else None
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

    Raises OSError (missing, a link, not a regular file) or Unreadable (too large).
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
            raise Unreadable(f"{name} is larger than the grader reads")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise Unreadable(f"{name} is larger than the grader reads")
    return data


def read_text(folder: str | Path, name: str, limit: int = TEXT_BYTES) -> str:
    """A short text file, or "" when it is missing or not a plain file."""
    try:
        return read_bytes(folder, name, JSON_BYTES)[:limit].decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return ""


def read_json(folder: str | Path, name: str, limit: int = JSON_BYTES) -> Any:
    """Parsed JSON of a small file, or None when it is missing, too big or not JSON."""
    try:
        return json.loads(read_bytes(folder, name, limit))
    except (OSError, ValueError, RecursionError):
        return None


def read_observed(folder: str | Path, bounds: Bounds, deadline: float = math.inf) -> dict[str, Any]:
    """What the probe observed, within `bounds` and before `deadline` (monotonic).

    Raises Unreadable (a bound or rule broken, in the grader's words) or OSError (missing,
    a link, not a regular file)."""
    limit = bounds.result_bytes
    budget = _Budget(limit, deadline)
    npz = read_bytes(folder, "observed.npz", limit)
    budget.spend(len(npz), "the observed files are larger than the grader reads")
    js = read_bytes(folder, "observed.json", min(bounds.json_bytes, budget.left))
    budget.spend(len(js), "the observed files are larger than the grader reads")
    arrays = read_arrays(npz, budget, bounds)
    try:
        observed = decode(json.loads(js), arrays)
    except RecursionError:
        raise Unreadable("they are nested too deeply") from None
    except ValueError:
        raise Unreadable("observed.json is not valid JSON") from None
    if not isinstance(observed, dict):
        raise Unreadable("they are not a mapping")
    return observed


class _Budget:
    """Bytes left to read for one probe, and its deadline."""

    def __init__(self, limit: int, deadline: float) -> None:
        self.left, self.deadline = limit, deadline

    def spend(self, size: int, why: str) -> None:
        if time.monotonic() > self.deadline:
            raise Unreadable("reading them went past the notebook's time budget")
        if size > self.left:
            raise Unreadable(why)
        self.left -= size


def read_arrays(data: bytes, budget: _Budget, bounds: Bounds) -> dict[str, np.ndarray]:
    """Every array of an .npz held in `data`, each read once, sizes checked before reading."""
    _check_directory(data, bounds)
    arrays: dict[str, np.ndarray] = {}
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError, struct.error):
        raise Unreadable("observed.npz is not a readable .npz") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > bounds.members:
            raise Unreadable(f"observed.npz holds more than {bounds.members} arrays")
        for info in infos:
            key = info.filename.removesuffix(".npy")
            if key in arrays or not info.filename.endswith(".npy"):
                raise Unreadable("observed.npz has a member twice, or one that is not an array")
            if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
                raise Unreadable("observed.npz has a compressed member (the grader inflates none)")
            budget.spend(info.file_size, "their arrays add up to more than the grader reads")
            try:
                with archive.open(info) as member:
                    arrays[key] = _read_member(member, info.file_size)
            except Unreadable:
                raise
            except (zipfile.BadZipFile, ValueError, OSError, EOFError, struct.error):
                raise Unreadable("an array of observed.npz is malformed") from None
    return arrays


def _check_directory(data: bytes, bounds: Bounds) -> None:
    """Refuse a .npz whose end record promises more members or directory than the bounds:
    the zip reader would build all of it in memory first."""
    tail = data[-(2**16 + 22) :]
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise Unreadable("observed.npz is not a readable .npz")
    entries, size = struct.unpack("<HI", tail[at + 10 : at + 16])
    if b"PK\x06\x07" in tail[max(0, at - 20) : at]:
        raise Unreadable("observed.npz is a ZIP64 archive (too large to be observed data)")
    if entries > bounds.members or size > bounds.directory_bytes:
        raise Unreadable(f"observed.npz holds more than {bounds.members} arrays")


def _read_member(member: Any, stored: int) -> np.ndarray:
    """One .npy member: the header's shape and dtype must account for exactly `stored` bytes."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(
            member, max_header_size=NPY_HEADER_BYTES
        )
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(
            member, max_header_size=NPY_HEADER_BYTES
        )
    else:
        raise Unreadable("an array of observed.npz has an unknown format")
    if dtype.hasobject or dtype.kind not in KINDS:
        raise Unreadable("an array of observed.npz holds Python objects or an unknown type")
    count = math.prod(shape)
    size = count * dtype.itemsize
    header = member.tell()
    if header + size != stored:
        raise Unreadable("an array's header does not match its size in observed.npz")
    buffer = bytearray(size)
    if size and member.readinto(buffer) != size:
        raise Unreadable("an array of observed.npz is cut short")
    flat = np.frombuffer(buffer, dtype=dtype, count=count)
    return flat.reshape(shape, order="F" if fortran else "C")
