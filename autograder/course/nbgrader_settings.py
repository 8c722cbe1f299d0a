"""The course's nbgrader configuration, applied by nbgrader_config.py and by the grader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autograder.model.contract import COURSE_ID
from autograder.model.paths import COURSE_DIR
from autograder.model.settings import LIMITS


def configure(c: Any, course_dir: Path = COURSE_DIR) -> Any:
    """Fill a traitlets Config `c` with the course's settings and return it."""
    c.CourseDirectory.root = str(course_dir)
    c.CourseDirectory.course_id = COURSE_ID
    c.Exchange.root = str(course_dir / "exchange")
    # Formgrader renders students' outputs on the Jupyter server's own origin: no scripts.
    c.HTMLExporter.sanitize_html = True
    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
    # Tracebacks without source lines: a failing hidden test never shows its code.
    c.Execute.extra_arguments = ["--InteractiveShell.xmode=Minimal"]
    c.Execute.timeout = int(LIMITS.cell_timeout)  # the grader's own cell timeout
    c.ClearHiddenTests.enforce_metadata = True
    c.GenerateFeedback.preprocessors = [
        "nbgrader.preprocessors.GetGrades",
        "nbgrader.preprocessors.ClearHiddenTests",
        "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    ]
    return c


def configure_release(c: Any) -> Any:
    """`c` with the course's release step: prediction cells keep their named stubs
    (`autograder.course.stubs`). Imports nbgrader, unlike `configure`."""
    from autograder.course.nbgrader_stubs import generate_preprocessors

    c.GenerateAssignment.preprocessors = generate_preprocessors()
    return c


def configure_instructor(c: Any) -> Any:
    """The instructor's lab: the course directory, and the graded class formgrader shows."""
    from autograder.course import formgrade

    return formgrade.apply(configure_release(configure(c, formgrade.course_dir())))
