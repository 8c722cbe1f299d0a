"""An error that shows a student a short message in Jupyter, never a traceback."""

from __future__ import annotations


class CourseError(RuntimeError):
    """Raised when something outside the student's code is missing (a data file, a GPU)."""

    def _render_traceback_(self) -> list[str]:
        # IPython calls this instead of printing the traceback.
        return [
            f"{type(self).__name__}: {line}" if i == 0 else line
            for i, line in enumerate(str(self).splitlines())
        ]
