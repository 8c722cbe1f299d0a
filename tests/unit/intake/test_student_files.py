"""One student's files, read without a kernel: which of several is graded, and written answers
whose cell lost its nbgrader metadata.

Of several files for one notebook the grader takes the one with the most answers filled in,
then the newest (a pattern's `version`, else the file's time), never the best-scoring; a link
or special file is never read. A written answer without its id is found where it stands:
after its question, else before the text that follows it; its text is what formgrader shows.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat

from autograder.intake.discover import Entry, Submission, assign, match_files
from autograder.model.course import load_masters
from autograder.model.notebook_io import grade_id, is_answer, source
from autograder.model.settings import Limits
from autograder.worker.rebuild import rebuild
from examples.build import (
    answer_ids,
    correct,
    dump,
    mistakes_of,
    release,
    solutions,
    strip_metadata,
    with_answers,
    with_mistakes,
)

NB02 = "02_queries_and_keys.ipynb"
WRITTEN = "why-not-T"


def write(path: Path, content: bytes, when: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    os.utime(path, (when, when))
    return path


def masters() -> dict:
    return load_masters(notebooks=(NB02,))


def partly(k: int) -> bytes:
    """02 with its first `k` code answers filled in, the rest as released."""
    ids = answer_ids(NB02)[:k]
    return dump(with_answers(NB02, {g: solutions(NB02)[g] for g in ids}))


def test_the_most_answered_file_is_graded_then_the_newest(tmp_path: Path) -> None:
    folder = tmp_path / "ana"
    finished = write(folder / f"{NB02[:-6]} (1).ipynb", dump(correct(NB02)), 1_000)
    write(folder / NB02, dump(release(NB02)), 3_000)  # newer, but nothing answered
    write(folder / f"Copy of {NB02}", partly(2), 2_000)
    sub = match_files(folder, masters())
    assert sub.files == {NB02: finished}
    assert sub.choices[NB02].left_out == (f"Copy of {NB02}", NB02)
    (note,) = sub.notes[NB02]
    n = len(masters()[NB02].stubs)
    assert f"3 files could be {NB02}: graded {finished.name} ({n} of {n} answers" in note
    assert f"Copy of {NB02} (2 of {n} answers filled in)" in note

    newer = write(folder / f"{NB02[:-6]} (2).ipynb", dump(correct(NB02)), 4_000)
    assert match_files(folder, masters()).files == {NB02: newer}, "as many answers: the newest"


def test_more_answers_win_over_better_answers(tmp_path: Path) -> None:
    """Grading every variant and keeping the best would reward handing in many."""
    folder = tmp_path / "ben"
    wrong = mistakes_of(NB02)[:1]
    assert wrong, "02 has a classic mistake in the example class"
    all_but_wrong = write(folder / "attempt.ipynb", dump(with_mistakes(NB02, wrong)), 1_000)
    write(folder / NB02, partly(1), 2_000)  # right as far as it goes, newer
    assert match_files(folder, masters()).files == {NB02: all_but_wrong}


def test_a_pattern_version_orders_files_before_their_times(tmp_path: Path) -> None:
    early = write(tmp_path / "a.ipynb", dump(release(NB02)), 9_000)
    late = write(tmp_path / "b.ipynb", dump(release(NB02)), 1_000)
    entries = [
        Entry(early, "u_7_500_a.ipynb", mtime=9_000, name=NB02, version="500"),
        Entry(late, "u_7_1200_b.ipynb", mtime=1_000, name=NB02, version="1200"),
    ]
    sub = Submission("7", tmp_path)
    assign(sub, entries, masters(), Limits())
    assert sub.files == {NB02: late}, "upload 1200 came after upload 500 (numbers, not text)"


def test_a_link_beside_a_real_file_is_left_out_unread(tmp_path: Path) -> None:
    folder = tmp_path / "cy"
    real = write(folder / NB02, dump(release(NB02)), 1_000)
    (folder / f"{NB02[:-6]} (1).ipynb").symlink_to(tmp_path / "elsewhere.ipynb")
    sub = match_files(folder, masters())
    assert sub.files == {NB02: real} and not sub.invalid
    assert "(not read: a symbolic link" in sub.notes[NB02][0]


def _written(nb: nbformat.NotebookNode) -> str | None:
    rebuilt = rebuild(masters()[NB02].nb, nb, masters()[NB02].stubs)
    cell = next(c for c in rebuilt.notebook.cells if is_answer(c) and grade_id(c) == WRITTEN)
    return None if rebuilt.how[WRITTEN] == "missing" else source(cell)


def test_a_written_answer_without_its_id_is_found_where_it_stands() -> None:
    stripped = strip_metadata(correct(NB02))
    text = next(source(c) for c in correct(NB02).cells if grade_id(c) == WRITTEN)
    assert _written(stripped) == text
    index = next(i for i, c in enumerate(stripped.cells) if source(c) == text)
    stripped.cells.insert(index + 1, nbformat.v4.new_markdown_cell("And a second thought."))
    assert _written(stripped) == f"{text}\n\nAnd a second thought."
    question = stripped.cells[index - 1]
    question.source += " (my edit of the question)"  # only the text after it still anchors
    assert _written(stripped) == f"{text}\n\nAnd a second thought."
    del stripped.cells[index : index + 2]
    assert _written(stripped) is None, "nothing stands there: missing, and a note says so"

    quoting = strip_metadata(correct(NB02))
    answer = f"{source(quoting.cells[index - 1])}\n\nBecause the matrices are per token."
    quoting.cells[index].source = answer  # the question copied, then answered
    assert _written(quoting) == answer
