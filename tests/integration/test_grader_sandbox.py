"""The sandbox scores answer cells honestly, whatever they do to their own process.

Each test runs twice: with jailed probe servers (the default) and with children forked from a
forkserver (`--no-jail`). Real processes, no Jupyter kernel: a second or two per case.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autograder.checks import spec_for
from autograder.jail.jail import Jail
from autograder.model.course import load_masters
from autograder.worker.judge import score_answers
from autograder.worker.sandbox import READS, ProbeJob, Sandbox, read_observed, write_observed
from tests.corpus import hostile

NOTEBOOK = hostile.course_notebooks()[0]
MASTER = load_masters()[NOTEBOOK]
SOLUTIONS = hostile.solutions(NOTEBOOK)
IDS = list(MASTER.graded)


@pytest.fixture(scope="module", params=[pytest.param("jail", marks=pytest.mark.slow), "fork"])
def sandbox(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    jail = Jail.from_settings() if request.param == "jail" else None
    scratch = tmp_path_factory.mktemp("sb")
    box = Sandbox(cell_timeout=5, memory_bytes=512 * 2**20, scratch=scratch, jail=jail)
    box.start()
    yield box
    box.close()


def scores(sandbox: Sandbox, answers: dict[str, str]) -> dict[str, float]:
    results, _ = score_answers(MASTER, answers, sandbox)
    return {g: r.score for g, r in results.items()}


def full() -> dict[str, float]:
    return dict(MASTER.graded)


def test_solutions_score_full_marks(sandbox: Sandbox) -> None:
    assert scores(sandbox, SOLUTIONS) == full()


def test_answers_reading_the_notebooks_names_score_full_marks(sandbox: Sandbox) -> None:
    """The master's cells above each answer run before it in the probe (autograder.worker.context):
    the corpus's answers that read `x`, `B`, `ones_below`, `row`, ... keep every point."""
    from tests.corpus.context import ALTERNATIVES

    answers = dict(SOLUTIONS)
    answers |= {a.grade_id: a.source for a in ALTERNATIVES if a.notebook == NOTEBOOK}
    assert answers != SOLUTIONS
    assert scores(sandbox, answers) == full()


def test_missing_and_stub_answers_score_zero(sandbox: Sandbox) -> None:
    stubs = {g: MASTER.stubs[g] for g in SOLUTIONS}
    assert set(scores(sandbox, stubs).values()) == {0.0}
    assert set(scores(sandbox, {g: None for g in SOLUTIONS}).values()) == {0.0}


def with_tail(gid: str, code: str) -> dict[str, str]:
    answers = dict(SOLUTIONS)
    answers[gid] += "\n" + code
    return answers


def test_a_cell_that_hangs_ignoring_sigint_costs_only_its_own_points(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped: list[str | None] = []  # the cell each probe that ended without a result stopped in
    probe = sandbox.probe

    def counted(*args: object, **kwargs: object):
        outcome = probe(*args, **kwargs)
        if outcome.observed is None:
            stopped.append(outcome.stopped_in)
        return outcome

    monkeypatch.setattr(sandbox, "probe", counted)
    got = scores(sandbox, with_tail(IDS[0], hostile.ENDLESS))
    assert got == {**full(), IDS[0]: 0.0}
    # one timeout for the hanging cell; later cells skip it instead of hanging again
    assert stopped == [IDS[0]], stopped


def test_os_exit_in_a_cell_costs_only_its_own_points(sandbox: Sandbox) -> None:
    got = scores(sandbox, with_tail(IDS[0], "import os\nos._exit(0)"))
    assert got == {**full(), IDS[0]: 0.0}


def test_sys_exit_printing_and_warnings_after_a_correct_answer_cost_nothing(
    sandbox: Sandbox,
) -> None:
    assert scores(sandbox, with_tail(IDS[0], "import sys\nsys.exit(1)")) == full()
    assert scores(sandbox, with_tail(IDS[0], hostile.NOISE)) == full()
    assert scores(sandbox, with_tail(IDS[0], hostile.PRINT_100MB)) == full()


def sleepers() -> list[int]:
    import psutil

    return [
        p.pid for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "600"]
    ]


def test_processes_started_by_a_cell_do_not_outlive_it(sandbox: Sandbox) -> None:
    before = set(sleepers())
    assert scores(sandbox, with_tail(IDS[0], hostile.SPAWN)) == full()
    assert set(sleepers()) <= before


def test_a_memory_hog_is_stopped_by_the_address_space_limit(sandbox: Sandbox) -> None:
    assert scores(sandbox, with_tail(IDS[0], hostile.MEMORY_HOG)) == full()


def test_monkeypatching_torch_and_the_checks_fools_nobody(sandbox: Sandbox) -> None:
    wrong = {g: f"def {spec_for(g).function}(x):\n    return x * 0\n" for g in SOLUTIONS}
    wrong[IDS[0]] = hostile.PATCHES + "\n" + wrong[IDS[0]]
    got = scores(sandbox, wrong)
    assert all(got[g] < MASTER.graded[g] for g in SOLUTIONS)


def test_the_child_runs_alone_with_limits(sandbox: Sandbox) -> None:
    """Its own session (forked), or a jail of its own as an unprivileged uid; capped memory."""
    gid = IDS[0]
    spec = spec_for(gid)
    alone = "os.getuid() != 0" if sandbox.jail else "os.getsid(0) == os.getpid()"
    probe = f"""
import os, resource
def {spec.function}(x):
    limited = resource.getrlimit(resource.RLIMIT_AS)[0] > 0
    raise RuntimeError(f"{{{alone}}} {{limited}}")
"""
    outcome = sandbox.probe(
        ProbeJob(gid, MASTER.spec_module, MASTER.setup, [(gid, probe)]), spec.cases()
    )
    errors = [v for k, v in outcome.observed.items() if k.endswith("!")]
    assert errors and all("True True" in e for e in errors)


def test_observed_files_round_trip_without_pickle(tmp_path: Path) -> None:
    observed = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "nested": [{"b": np.ones(2, dtype=bool), "n": 3, "s": "x", "f": float("nan")}],
        "objects": np.array([object()], dtype=object),
    }
    write_observed(tmp_path, observed)
    back = read_observed(tmp_path, READS)
    assert np.array_equal(back["a"], observed["a"]) and back["a"].dtype == np.float32
    assert np.array_equal(back["nested"][0]["b"], [True, True])
    assert back["nested"][0]["n"] == 3 and np.isnan(back["nested"][0]["f"])
    assert "__repr__" in back["objects"]
    # a pickled array planted by student code is refused, never unpickled
    np.save(tmp_path / "evil.npy", np.array([object()], dtype=object), allow_pickle=True)
    (tmp_path / "observed.npz").unlink()
    np.savez(tmp_path / "observed.npz", a0=np.array([object()], dtype=object))
    (tmp_path / "observed.json").write_text('{"a": {"\\u0000npz": "a0"}}')
    with pytest.raises(ValueError):
        read_observed(tmp_path, READS)
