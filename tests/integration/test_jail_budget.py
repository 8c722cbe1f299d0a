"""The wait for a jailed probe server's start never goes past the notebook's wall budget."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.checks import spec_for
from autograder.jail.jail import Launch
from autograder.model.course import load_masters
from autograder.model.settings import LIMITS
from autograder.worker.sandbox import ProbeJob, Sandbox
from tests.corpus import hostile

NOTEBOOK = hostile.course_notebooks()[0]


@dataclass
class SilentJail:
    """A jail whose probe server never says it is ready (a `sleep` in its place)."""

    python: str = "python"
    file_bytes: int = 2**20
    shared_bytes: int = 2**20
    launched: list[list[str]] = field(default_factory=list)

    def environment(self, **extra: str) -> dict[str, str]:
        return dict(extra)

    def launch(self, argv: list[str], shared: Path, **_: Any) -> Launch:
        self.launched.append(argv)
        return Launch(["sleep", "60"])

    def give_fd(self, fd: int) -> None:
        pass


def test_a_server_that_never_starts_is_given_up_at_the_notebooks_deadline(
    tmp_path: Path,
) -> None:
    master = load_masters()[NOTEBOOK]
    gid = list(master.graded)[0]
    jail = SilentJail()
    sandbox = Sandbox(5, 2**30, tmp_path, jail)
    job = ProbeJob(gid, master.spec_module, master.setup, [(gid, "x = 1")], notebook=NOTEBOOK)
    start = time.monotonic()
    try:
        sandbox.begin(NOTEBOOK, deadline=start + 1.5)
        outcome = sandbox.probe(job, spec_for(gid).cases())
    finally:
        sandbox.close()
    waited = time.monotonic() - start
    assert jail.launched, "no server was started"
    assert outcome.observed is None and "stopped answering" in outcome.problem
    # Given up at the 1.5 s deadline, not before; without the deadline the wait would last until
    # the silent server exits (60 s) or the start timeout. The upper bound leaves a loaded
    # machine twenty times the deadline.
    assert 1.4 < waited < 30 < 60 < LIMITS.jail.probe_start_timeout, waited
