"""Command line: `python -m autograder release` and `python -m autograder grade ...`."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m autograder {release,grade} ..."
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage)
        print("  release   regenerate notebooks/ from solutions/ with nbgrader")
        print("  grade     autograde a class: grade SUBMISSIONS --out OUT [--jobs N] [--timeout S]")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "release":
        from autograder.release import main as release_main

        return release_main(rest)
    if command == "grade":
        from autograder.cli import main as grade_main

        return grade_main(rest)
    print(f"unknown command {command!r}\n{usage}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
