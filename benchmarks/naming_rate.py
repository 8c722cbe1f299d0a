"""How often the grader names each catalog mistake, over answers written from scratch.

    .venv/bin/python benchmarks/naming_rate.py [--examples 5] [--seed 0] [--skip-slow]

Every corpus writer (tests/corpus/nbNN.py, WRITERS) writes --examples answers, each part
drawn at random, checked on one extra random size with tensors from a random seed (the same
drawing as tests/test_diagnosis_corpus.py, with Python's random instead of hypothesis). For
each catalog id: how many wrong answers were written, how many lost points, how many had the
id named; for each answer cell: how many correct answers kept full marks with nothing named.
Exits 1 when a rate is below 100 %.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SLOW_CELLS = {"unmasked-head"}


def measure(examples: int, seed: int, skip_slow: bool) -> tuple[dict, dict, list[str]]:
    """(catalog id -> [written, lost points, named], cell -> [written, clean], failures)."""
    from tests import corpus

    wrong: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    right: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    failures: list[str] = []
    for writer in corpus.writers():
        if skip_slow and writer.grade_id in SLOW_CELLS:
            continue
        for k in range(examples):
            rng = random.Random(f"{seed}:{writer.id}:{k}")

            def choose(name: str, options: object, rng: random.Random = rng) -> object:
                return rng.choice(list(options))  # type: ignore[call-overload]

            _, result = corpus.grade_written(writer, choose, rng.randrange(2**16))
            lost = result.score < result.max_score
            if writer.mistake is None:
                clean = not lost and not result.mistakes
                right[writer.grade_id][0] += 1
                right[writer.grade_id][1] += clean
                if not clean:
                    failures.append(
                        f"{writer.id} #{k}: {result.score}/{result.max_score} {result.mistakes}"
                    )
            else:
                named = writer.mistake in result.mistakes
                counts = wrong[writer.mistake]
                counts[0] += 1
                counts[1] += lost
                counts[2] += lost and named
                if not (lost and named):
                    failures.append(
                        f"{writer.id} #{k}: {result.score}/{result.max_score} {result.mistakes}"
                    )
    return dict(wrong), dict(right), failures


def table(wrong: dict, right: dict) -> str:
    lines = [f"{'catalog id':22s} {'answers':>8s} {'lost pts':>9s} {'named':>7s} {'rate':>7s}"]
    for mistake in sorted(wrong):
        n, lost, named = wrong[mistake]
        lines.append(f"{mistake:22s} {n:8d} {lost:9d} {named:7d} {100 * named / n:6.1f}%")
    lines.append("")
    lines.append(
        f"{'answer cell (correct)':22s} {'answers':>8s} {'full, unnamed':>14s} {'rate':>7s}"
    )
    for gid in sorted(right):
        n, clean = right[gid]
        lines.append(f"{gid:22s} {n:8d} {clean:14d} {100 * clean / n:6.1f}%")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5, help="answers per writer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-slow", action="store_true", help="skip cells that train a model")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    wrong, right, failures = measure(args.examples, args.seed, args.skip_slow)
    print(table(wrong, right))
    total = sum(v[0] for v in wrong.values()) + sum(v[0] for v in right.values())
    print(f"\n{total} answers graded in {time.perf_counter() - start:.1f} s")
    for line in failures:
        print("MISSED", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
