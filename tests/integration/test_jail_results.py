"""What a probe hands back is read within bounds: sizes from the headers before a byte is read,
no member inflated, each member read once, one byte budget per probe, and the deadline."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from autograder.probe.observed import (
    ARRAY,
    Unreadable,
    read_observed,
    write_observed,
)
from autograder.worker.sandbox import READS

MEMBER_LIMIT = READS.members

BOMB = """
import json, resource, sys, time, zipfile
import numpy as np
from pathlib import Path
from autograder.worker.sandbox import READS
from autograder.probe.observed import read_observed

folder = Path(sys.argv[1])
with zipfile.ZipFile(folder / "observed.npz", "w", zipfile.ZIP_DEFLATED) as zf:
    with zf.open("a0.npy", "w", force_zip64=True) as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f8", "fortran_order": False, "shape": (2**25,)})
        for _ in range(256):
            f.write(bytes(2**20))
(folder / "observed.json").write_text(json.dumps({"x": [{"\\u0000npz": "a0"}] * 6}))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
try:
    read_observed(folder, READS)
    verdict = "read"
except ValueError as err:
    verdict = str(err)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
size = (folder / "observed.npz").stat().st_size
print(json.dumps([verdict, grown * 1024, time.monotonic() - start, size]))
"""


def test_a_deflated_bomb_referred_to_six_times_is_refused_unread(tmp_path: Path) -> None:
    """256 MiB deflated to a few hundred KB, six references: numpy's loader would inflate it
    six times (1.5 GiB in the grader); the grader reads none of it."""
    done = subprocess.run(
        [sys.executable, "-c", BOMB, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    verdict, grown, seconds, size = json.loads(done.stdout)
    assert size < 2**20 and "compressed member" in verdict
    # unread: the memory says so; the time only bounds it (inflating six times takes far longer)
    assert grown < 16 * 2**20 and seconds < 10, (grown, seconds)


def stored(folder: Path, arrays: dict[str, np.ndarray], refs: object) -> None:
    np.savez(folder / "observed.npz", **arrays)
    (folder / "observed.json").write_text(json.dumps(refs))


def test_a_member_referred_to_many_times_is_read_once(tmp_path: Path) -> None:
    stored(tmp_path, {"a0": np.arange(4.0)}, {"x": [{ARRAY: "a0"}] * 100})
    back = read_observed(tmp_path, READS)
    assert all(a is back["x"][0] for a in back["x"])
    assert np.array_equal(back["x"][0], np.arange(4.0))


def test_one_budget_counts_the_files_and_every_array(tmp_path: Path) -> None:
    """4 MiB of arrays in a 4 MiB .npz: the grader holds 8 MiB to read them."""
    stored(tmp_path, {f"a{i}": np.zeros(2**17) for i in range(4)}, {"x": 1})
    assert read_observed(tmp_path, READS._replace(result_bytes=9 * 2**20)) == {"x": 1}
    with pytest.raises(Unreadable, match="add up to more"):  # the files fit, not the arrays
        read_observed(tmp_path, READS._replace(result_bytes=7 * 2**20))
    with pytest.raises(Unreadable, match="larger than the grader reads"):
        read_observed(tmp_path, READS._replace(result_bytes=3 * 2**20))  # the files themselves


def test_a_header_that_lies_about_its_size_is_refused(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "observed.npz", "w") as zf:
        with zf.open("a0.npy", "w") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": "<f8", "fortran_order": False, "shape": (2**40,)}
            )
            f.write(bytes(64))
    (tmp_path / "observed.json").write_text(json.dumps({"x": {ARRAY: "a0"}}))
    with pytest.raises(Unreadable, match="header does not match its size"):
        read_observed(tmp_path, READS)


def test_too_many_members_are_refused_before_the_archive_is_parsed(tmp_path: Path) -> None:
    stored(tmp_path, {f"a{i}": np.zeros(1) for i in range(MEMBER_LIMIT + 1)}, {"x": 1})
    with pytest.raises(Unreadable, match=f"more than {MEMBER_LIMIT} arrays"):
        read_observed(tmp_path, READS)


def test_objects_and_past_the_deadline_are_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "observed.npz", a0=np.array([object()], dtype=object))
    (tmp_path / "observed.json").write_text(json.dumps({"x": {ARRAY: "a0"}}))
    with pytest.raises(Unreadable, match="Python objects"):
        read_observed(tmp_path, READS)
    write_observed(tmp_path, {"a": np.ones(3)})
    assert read_observed(tmp_path, READS, deadline=math.inf)["a"].sum() == 3
    with pytest.raises(Unreadable, match="time budget"):
        read_observed(tmp_path, READS, deadline=time.monotonic() - 1)


def test_honest_results_round_trip(tmp_path: Path) -> None:
    observed = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": [np.ones(2, dtype=bool), np.array(["x", "yz"]), np.zeros((0, 3))],
        "n": 3,
    }
    write_observed(tmp_path, observed)
    back = read_observed(tmp_path, READS)
    assert back["a"].dtype == np.float32 and np.array_equal(back["a"], observed["a"])
    assert [b.tolist() for b in back["b"]] == [b.tolist() for b in observed["b"]]
    assert back["b"][2].shape == (0, 3) and back["n"] == 3
    back["a"][0, 0] = 7  # the judge gets arrays it may change
