"""What the jail costs, side by side in one run (figures, not asserts).

    .venv/bin/python benchmarks/bench_jail.py [--notebook 05_the_head.ipynb] [--repeat 2]

(a) kernel start: a fresh kernel until it answers, torch and matplotlib imported (what every
    notebook starts with), unjailed against jailed;
(b) one notebook (the solution, rebuilt as the grader runs it) executed in a fresh kernel,
    unjailed against jailed;
(c) the probes of that notebook's answer cells, forked from a forkserver against a jailed
    probe server: the first score_answers (the server's start included), then every cell
    probed again in the running server.
Each figure is the best of --repeat runs, the two sides alternating. Set $TINYSHAKESPEARE
when the notebook needs the data set.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def best(fn: Callable[[], float], repeat: int) -> float:
    return min(fn() for _ in range(repeat))


def kernel_start(jail: object) -> float:
    from autograder.worker.execute import KernelRunner

    runner = KernelRunner(jail, warm=True)  # warm: torch and matplotlib imported as it starts
    start = time.perf_counter()
    kernel = runner._spare.result()  # noqa: SLF001 - the kernel started ahead
    client = kernel.km.client()
    client.start_channels()
    runner._call(client.wait_for_ready(timeout=120))  # noqa: SLF001 - answers once preloaded
    seconds = time.perf_counter() - start
    client.stop_channels()
    runner.close()
    return seconds


def run_notebook(jail: object, nb: object) -> float:
    import copy

    from autograder.worker.execute import KernelRunner

    runner = KernelRunner(jail, warm=False)
    start = time.perf_counter()
    done = runner.execute(
        copy.deepcopy(nb), timeout=600, cell_timeout=600, memory_bytes=8 * 2**30, more=False
    )
    seconds = time.perf_counter() - start
    runner.close()
    if done.status != "ok":
        raise SystemExit(f"the notebook did not run: {done.status} {done.detail}")
    return seconds


def probes(sandbox: object, master: object, answers: dict) -> float:
    from autograder.worker.judge import score_answers

    start = time.perf_counter()
    results, _ = score_answers(master, answers, sandbox)
    seconds = time.perf_counter() - start
    if any(r.score < r.max_score for r in results.values()):
        raise SystemExit("the solutions did not earn full marks")
    return seconds


def probe_cells(sandbox: object, master: object, answers: dict) -> float:
    """Every graded cell probed once in the sandbox's running server (no start counted)."""
    from autograder.checks import spec_for
    from autograder.worker.sandbox import ProbeJob

    order = list(master.code_answers)
    start = time.perf_counter()
    for gid in master.graded:
        cells = [(g, answers[g]) for g in order[: order.index(gid) + 1] if g in answers]
        spec = spec_for(gid)
        cases = spec.cases()
        job = ProbeJob(gid, master.spec_module, master.setup, cells, set(), master.notebook)
        outcome = sandbox.probe(job, cases)
        if spec.evaluate(cases, outcome.observed or {"!exec": "-"}).score < spec.points:
            raise SystemExit(f"{gid}: the solution did not earn full marks")
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--notebook", default="05_the_head.ipynb")
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()

    from autograder.jail.jail import Jail
    from autograder.model.course import load_masters
    from autograder.worker.rebuild import rebuild
    from autograder.worker.sandbox import Sandbox
    from tests.corpus import hostile

    jail = Jail.from_settings()
    master = load_masters()[args.notebook]
    nb = rebuild(master.nb, hostile.correct(args.notebook), master.stubs).notebook
    answers = hostile.solutions(args.notebook)
    rows: list[tuple[str, float, float]] = []

    rows.append(
        (
            "kernel start, torch imported",
            best(lambda: kernel_start(None), args.repeat),
            best(lambda: kernel_start(jail), args.repeat),
        )
    )
    rows.append(
        (
            f"{args.notebook} in a fresh kernel",
            best(lambda: run_notebook(None, nb), args.repeat),
            best(lambda: run_notebook(jail, nb), args.repeat),
        )
    )
    scratch = Path(tempfile.mkdtemp(prefix="bench-jail-"))
    forked = Sandbox(600, 4 * 2**30, scratch / "forked")
    jailed = Sandbox(600, 4 * 2**30, scratch / "jailed", jail)
    for box in (forked, jailed):
        box.start()
    first = (probes(forked, master, answers), probes(jailed, master, answers))
    rows.append(("probes, first call (server start)", *first))
    rows.append(
        (
            "probes, server started",
            best(lambda: probe_cells(forked, master, answers), args.repeat),
            best(lambda: probe_cells(jailed, master, answers), args.repeat),
        )
    )
    jailed.close()

    print(f"{'':40} {'unjailed':>9} {'jailed':>9} {'ratio':>7}")
    for name, bare, jailed_s in rows:
        print(f"{name:40} {bare:8.2f}s {jailed_s:8.2f}s {jailed_s / bare:6.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
