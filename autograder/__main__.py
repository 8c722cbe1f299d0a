"""Command line: `python -m autograder release` and `python -m autograder grade ...`."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m autograder {release,grade,student-release,formgrade,export} ..."
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage)
        print("  release   regenerate notebooks/ from solutions/ with nbgrader")
        print("  grade     autograde a class: grade SUBMISSIONS --out OUT [--jobs N] [--timeout S]")
        print("  student-release  the students' tree: --assignments 01,02 --dest DIR")
        print("  formgrade        point formgrader at a graded class: formgrade OUT")
        print(
            "  export           final grades with hand-graded points, Canvas/Moodle CSV: export OUT"
        )
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "release":
        from autograder.release import main as release_main

        return release_main(rest)
    if command == "grade":
        from autograder.cli import main as grade_main

        return grade_main(rest)
    mains = {
        "student-release": "autograder.student_release",
        "formgrade": "autograder.formgrade",
        "export": "autograder.export",
    }
    if command in mains:
        import importlib

        return importlib.import_module(mains[command]).main(rest)
    print(f"unknown command {command!r}\n{usage}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
