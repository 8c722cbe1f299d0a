"""How often the grader names each catalog mistake, over answers written from scratch.

    .venv/bin/python benchmarks/naming_rate.py [--examples 3] [--budget 120] [--seed 0]
                                               [--skip-slow]

Every corpus writer (tests/corpus/nbNN.py, WRITERS) writes up to --examples answers, each part
drawn at random and checked on three extra sizes (B == T == hs, T = 1 and one drawn) with
tensors from a random seed: the drawing of tests/unit/checks/test_diagnosis_corpus.py, with Python's
random
instead of hypothesis. Writers that draw nothing write once; cells that train a model
(unmasked-head) get one answer per writer. Rounds stop once --budget seconds are spent (the
first round always runs). For each catalog id: how many wrong answers were written, how many
lost points, how many had the id named; for each answer cell: how many correct answers kept
full marks with nothing named. Exits 1 when a rate is below 100 %.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SLOW_CELLS = {"unmasked-head"}


def measure(examples: int, budget: float, seed: int, skip_slow: bool) -> tuple[Any, list[str]]:
    """(the tally, the answers graded otherwise than they should be)."""
    from tests import corpus

    tally, failures = corpus.Tally(), []
    writers = [w for w in corpus.writers() if not (skip_slow and w.grade_id in SLOW_CELLS)]
    once = {w.id for w in writers if w.grade_id in SLOW_CELLS or not corpus.draws(w)}
    start = time.perf_counter()
    for k in range(examples):
        if k and time.perf_counter() - start > budget:
            print(f"budget of {budget:.0f} s spent after {k} round(s) of {examples}")
            break
        for writer in writers:
            if k and writer.id in once:
                continue
            rng = random.Random(f"{seed}:{writer.id}:{k}")

            def choose(name: str, options: Any, rng: random.Random = rng) -> Any:
                return rng.choice(list(options))

            _, result = corpus.grade_written(writer, choose, rng.randrange(2**16))
            if not tally.add(writer, result):
                failures.append(
                    f"{writer.id} #{k}: {result.score}/{result.max_score} {result.mistakes}"
                )
    return tally, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3, help="answers per writer, at most")
    parser.add_argument("--budget", type=float, default=float("inf"), help="seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-slow", action="store_true", help="skip cells that train a model")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    tally, failures = measure(args.examples, args.budget, args.seed, args.skip_slow)
    print(tally.table())
    total = sum(v[0] for v in tally.wrong.values()) + sum(v[0] for v in tally.right.values())
    print(f"\n{total} answers graded in {time.perf_counter() - start:.1f} s")
    for line in failures:
        print("MISSED", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
