"""A graded class whose executed notebooks carry script payloads, for the lab's formgrader.

The lab the browser tests share (conftest.py's `lab`) shows, in formgrader, a throwaway
course directory in build/ (never the project's .nbgrader/): `course_with_payload` fills it
before the lab starts, with the assignment released and two submissions of notebook 01 whose
first code cell displays what a student's code can put in an output: a PNG whose metadata
width would become an event handler in formgrader's template, a broken PNG with the same
width (its onerror fires at once), file names in the metadata, an SVG with onload, HTML with a
script and an image handler, and JavaScript. `RAW` keeps them as they are (the control: the
script must run there, or the test could not see it run); `INERT`'s notebook is what the
grader writes to OUT/autograded (`autograder.publish.sanitise.sanitised_json`).
"""

from __future__ import annotations

import base64
import io
import shutil
from pathlib import Path

import nbformat
from nbformat.v4 import new_output

from autograder.intake.discover import Submission
from autograder.model.contract import ASSIGNMENT
from autograder.model.course import load_masters
from autograder.model.enums import Status
from autograder.model.paths import NOTEBOOKS, ROOT
from autograder.publish.gradebook import write_gradebook
from autograder.publish.outdir import autograded_path
from autograder.publish.outputs import placeholder
from autograder.publish.sanitise import sanitised_json

NB01 = "01_uniform_averaging.ipynb"
RAW, INERT = "payload-raw", "payload-inert"
MARK = "payload-ran"  # what every payload's script says when it runs
WIDTH = f"1 onerror=alert('{MARK}') data-x=1"


def png(size: int = 40) -> str:
    """A real PNG, `size` pixels square, base64 as notebooks store it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(size / 100, size / 100), dpi=100)
    fig.patch.set_facecolor("#4c72b0")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def outputs() -> list[nbformat.NotebookNode]:
    return [
        new_output(
            "display_data",
            data={"image/png": png(), "text/plain": "the real image"},
            metadata={"image/png": {"width": WIDTH}, "filenames": {"image/png": "/etc/passwd"}},
        ),
        new_output(
            "display_data",
            data={"image/png": base64.b64encode(b"not a png").decode(), "text/plain": "broken"},
            metadata={"image/png": {"width": WIDTH}},
        ),
        new_output(
            "display_data",
            data={
                "image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" '
                f"onload=\"alert('{MARK}')\"><circle r='4'/></svg>",
                "text/plain": "svg",
            },
        ),
        new_output(
            "display_data",
            data={
                "text/html": f"<script>alert('{MARK}')</script>"
                f"<img src=x onerror=\"alert('{MARK}')\"><b>bold html</b>"
            },
        ),
        new_output("display_data", data={"application/javascript": f"alert('{MARK}')"}),
    ]


def executed(raw: bool) -> str:
    """The released notebook 01 with the payload in its first code cell's outputs."""
    nb = nbformat.read(str(NOTEBOOKS / NB01), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    cell.outputs = outputs()
    text = nbformat.writes(nb)
    return text if raw else sanitised_json(text)


def course_with_payload(folder: Path) -> Path:
    """`folder`: nbgrader's course directory with the assignment and the two submissions in
    its gradebook and autograded/ (formgrader's defaults, no pointer to an OUT)."""
    from autograder.course.release import ensure_course_dir

    ensure_course_dir()  # the project's own, released once; copied, never changed
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(ROOT / ".nbgrader", folder, symlinks=True,
                    ignore=shutil.ignore_patterns("autograded", "formgrade.json", "gradebook.db",
                                                  "submitted", "feedback"))  # fmt: skip
    master = load_masters(notebooks=(NB01,))[NB01]
    rows = []
    for student, raw in ((RAW, True), (INERT, False)):
        path = autograded_path(folder, student, NB01)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(executed(raw), encoding="utf-8")
        sub = Submission(student, path.parent, files={NB01: path})
        rows.append(placeholder(sub, NB01, master, Status.OK))
    write_gradebook(folder / "gradebook.db", {NB01: master}, rows)
    return folder


def submission_id(folder: Path, student: str) -> str:
    """Formgrader's id of `student`'s notebook 01 in the gradebook of `folder`."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}", "self-attention") as gb:
        return gb.find_submission_notebook(Path(NB01).stem, ASSIGNMENT, student).id
