"""Where the course's files live."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
COURSE_DIR = ROOT / ".nbgrader"  # nbgrader's course directory (generated, not committed)
EXAMPLES = ROOT / "examples" / "submissions"
