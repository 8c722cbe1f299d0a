"""Regenerate examples/submissions/ (the bundled class `make grade` grades) from solutions/.

    .venv/bin/python examples/make_examples.py [TARGET]

Students: `correct` (the solutions, every notebook), `untouched` (the release as handed out),
`mistakes_1`, `mistakes_2` (classic mistakes from tests/corpus, several per notebook), and
broken or hostile submissions of the first notebook (invalid JSON, stripped metadata, a renamed
file, deleted/duplicated/reordered cells, edited tests, an endless loop ignoring SIGINT,
os._exit, sys.exit, 100 MB of printing, a memory hog, monkeypatching). Each student folder
gets an ABOUT.txt saying what it holds and what the grader should report.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.corpus import hostile  # noqa: E402

MISTAKE_STUDENTS = 2


def cases() -> list[hostile.Case]:
    """Every example student, with the expected outcome per notebook."""
    notebooks = hostile.course_notebooks()
    full = hostile.Expect("ok")
    out = [
        hostile.Case(
            "correct",
            "the solutions: full marks everywhere",
            {nb: hostile.dump(hostile.correct(nb)) for nb in notebooks},
            {nb: full for nb in notebooks},
        ),
        hostile.Case(
            "untouched",
            "the release, nothing filled in: zero everywhere",
            {nb: hostile.dump(hostile.release(nb)) for nb in notebooks},
            {nb: hostile.Expect("ok", None) for nb in notebooks},
        ),
    ]
    for k in range(MISTAKE_STUDENTS):
        files, expect = {}, {}
        for nb in notebooks:
            rounds = hostile.rounds(nb)
            if k < len(rounds) and rounds[k]:
                files[nb] = hostile.dump(hostile.mutated(nb, rounds[k]))
                expect[nb] = hostile.expect_mutations(rounds[k])
        out.append(
            hostile.Case(
                f"mistakes_{k + 1}", "classic mistakes, named in the feedback", files, expect
            )
        )
    first = notebooks[0]
    return out + hostile.broken_cases(first) + hostile.hostile_cases(first)


def describe(case: hostile.Case) -> str:
    lines = [case.about, "", "expected:"]
    for nb, e in case.expect.items():
        lost = "every cell" if e.lost is None else (", ".join(sorted(e.lost)) or "nothing")
        lines.append(f"  {nb}: status {e.status}; loses points in {lost}")
        lines += [f"    names {mistake} in {gid}" for gid, mistake in e.named]
        if e.free:
            lines.append(
                "    (may lose points too, using a wrong cell's names: "
                f"{', '.join(sorted(e.free))})"
            )
    return "\n".join(lines) + "\n"


def write(target: Path) -> list[hostile.Case]:
    if target.exists():
        shutil.rmtree(target)
    made = cases()
    for case in made:
        folder = target / case.student
        folder.mkdir(parents=True)
        for name, content in case.files.items():
            (folder / name).write_bytes(content)
        (folder / "ABOUT.txt").write_text(describe(case))
    return made


def main() -> int:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "examples" / "submissions"
    made = write(target)
    print(f"wrote {len(made)} example students into {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
