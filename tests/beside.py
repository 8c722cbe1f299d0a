"""The run of `make test` that goes beside the rest (scripts/run_tests.sh), seen from a test.

The beside run (the notebooks under nbval, the browser tests) holds an exclusive lock on
build/test-beside.lock while it runs. A test that checks the whole machine for changes
(the hostile class: files, /tmp, processes) calls `wait_for_beside_run` first.
"""

from __future__ import annotations

import fcntl
import time

from autograder.model.paths import ROOT

LOCK = ROOT / "build" / "test-beside.lock"


def wait_for_beside_run() -> float:
    """Block until no beside run holds the lock; return the seconds waited (0 without one)."""
    if not LOCK.exists():
        return 0.0
    start = time.monotonic()
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return time.monotonic() - start
