"""The rebuild of the graded notebook and the matching of files, without kernels."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import nbformat
import pytest

from autograder.intake.discover import discover, match_files
from autograder.model.course import load_masters
from autograder.model.notebook_io import grade_id, is_answer, is_test, source
from autograder.worker.rebuild import MISSING_ANSWER, rebuild, release_stubs
from tests.corpus import hostile

NOTEBOOKS = hostile.course_notebooks()


def code_answers(notebook: str) -> dict[str, str]:
    return hostile.solutions(notebook)


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_release_stubs_are_what_nbgrader_writes(notebook: str) -> None:
    from traitlets.config import Config

    from autograder.course.nbgrader_settings import configure
    from autograder.course.nbgrader_stubs import CourseClearSolutions

    master = hostile.master(notebook)
    clear = CourseClearSolutions(config=configure(Config()))
    cleared, _ = clear.preprocess(copy.deepcopy(master), {})
    expected = {grade_id(c): c.source for c in cleared.cells if is_answer(c)}
    assert release_stubs(master) == expected


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_solutions_and_release_give_their_answers(notebook: str) -> None:
    master = hostile.master(notebook)
    rebuilt = rebuild(master, hostile.correct(notebook))
    assert rebuilt.answers == code_answers(notebook)
    assert set(rebuilt.how.values()) == {"grade_id"}
    assert not rebuilt.notes
    stubs = release_stubs(master)
    released = rebuild(master, hostile.release(notebook))
    assert released.answers == {g: stubs[g] for g in code_answers(notebook)}


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_graded_notebook_is_the_master_with_answers_and_no_hidden_tests(notebook: str) -> None:
    master = hostile.master(notebook)
    student = hostile.correct(notebook)
    for cell in student.cells:  # the student edits every test and every other cell
        if not is_answer(cell):
            cell.source = "raise SystemExit('edited')" if cell.cell_type == "code" else "edited"
    student.cells = student.cells[::-1] + [nbformat.v4.new_code_cell("added = 1")]
    rebuilt = rebuild(master, student).notebook
    assert [c.get("id") for c in rebuilt.cells] == [c.get("id") for c in master.cells]
    for mine, theirs in zip(rebuilt.cells, master.cells, strict=True):
        if is_answer(theirs):
            if theirs.cell_type == "code":
                assert source(mine) == code_answers(notebook)[grade_id(theirs)]
        elif is_test(theirs):
            assert source(mine) and source(mine) in source(theirs)
        else:
            assert source(mine) == source(theirs)
        assert "HIDDEN TESTS" not in source(mine)
        assert "added = 1" not in source(mine)
        if mine.cell_type == "code":
            assert mine.outputs == [] and mine.execution_count is None


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_stripped_metadata_finds_answers_by_their_names(notebook: str) -> None:
    master = hostile.master(notebook)
    stripped = hostile.strip_metadata(hostile.correct(notebook))
    rebuilt = rebuild(master, json.loads(nbformat.writes(stripped)))
    assert rebuilt.answers == code_answers(notebook)
    assert set(rebuilt.how[g] for g in code_answers(notebook)) == {"names"}


def test_duplicates_take_the_last_edited_cell_and_say_so() -> None:
    notebook = NOTEBOOKS[0]
    master = hostile.master(notebook)
    gid = next(iter(code_answers(notebook)))
    student = hostile.correct(notebook)
    index = next(i for i, c in enumerate(student.cells) if grade_id(c) == gid)
    earlier = copy.deepcopy(student.cells[index])
    earlier.source = "# an older attempt\n" + code_answers(notebook)[gid]
    earlier.id = "older"
    stub = copy.deepcopy(student.cells[index])
    stub.source = release_stubs(master)[gid]
    stub.id = "stub-copy"
    student.cells[index:index] = [earlier]
    student.cells.insert(index + 2, stub)
    rebuilt = rebuild(master, student)
    assert rebuilt.answers[gid] == code_answers(notebook)[gid]
    assert any(gid in note and "3 cells" in note for note in rebuilt.notes)


def test_deleted_answer_is_missing_with_a_note() -> None:
    notebook = NOTEBOOKS[0]
    master = hostile.master(notebook)
    gid = list(code_answers(notebook))[-1]
    student = hostile.correct(notebook)
    student.cells = [c for c in student.cells if grade_id(c) != gid]
    rebuilt = rebuild(master, student)
    assert rebuilt.answers[gid] is None and rebuilt.how[gid] == "missing"
    assert any(gid in note and "scores 0" in note for note in rebuilt.notes)
    cell = next(c for c in rebuilt.notebook.cells if grade_id(c) == gid)
    assert cell.source == MISSING_ANSWER


def test_answer_written_below_the_untouched_stub_is_found() -> None:
    notebook = NOTEBOOKS[0]
    master = hostile.master(notebook)
    gid = next(iter(code_answers(notebook)))
    student = hostile.release(notebook)
    index = next(i for i, c in enumerate(student.cells) if grade_id(c) == gid)
    added = nbformat.v4.new_code_cell(code_answers(notebook)[gid])
    student.cells.insert(index + 1, added)
    rebuilt = rebuild(master, student)
    assert rebuilt.answers[gid] == code_answers(notebook)[gid]
    assert rebuilt.how[gid] == "names"


def test_garbage_cells_do_not_crash_the_rebuild() -> None:
    master = hostile.master(NOTEBOOKS[0])
    for student in ({}, {"cells": "nope"}, {"cells": [1, None, {"cell_type": "code"}]}, []):
        rebuilt = rebuild(master, student)
        assert all(v is None for v in rebuilt.answers.values())


def write(path: Path, content: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_files_are_matched_by_name_then_content_then_file_name(tmp_path: Path) -> None:
    masters = load_masters()
    first = NOTEBOOKS[0]
    folder = tmp_path / "alice"
    write(folder / "homework.ipynb", hostile.dump(hostile.correct(first)))
    write(
        folder / "notes.ipynb", b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    )
    sub = match_files(folder, masters)
    assert sub.files == {first: folder / "homework.ipynb"}
    assert "notes.ipynb" in sub.ignored
    assert any("matched by its content" in n for n in sub.notes[first])

    write(folder / "sub" / first, hostile.dump(hostile.correct(first)))  # exact name wins
    assert match_files(folder, masters).files[first] == folder / "sub" / first

    bob = tmp_path / "bob"
    broken = write(bob / f"{first[:-6]} (1).ipynb", b"{ not json")
    assert match_files(bob, masters).files == {first: broken}


def test_links_and_special_files_are_refused_never_read(tmp_path: Path) -> None:
    masters = load_masters()
    first, second = NOTEBOOKS[:2]
    write(tmp_path / "bob" / first, hostile.dump(hostile.correct(first)))
    eve = tmp_path / "eve"
    eve.mkdir()
    (eve / first).symlink_to(Path("..") / "bob" / first)
    (eve / "homework.ipynb").symlink_to(hostile.SOLUTIONS_DIR / second)
    os.mkfifo(eve / "03_mask_then_softmax.ipynb")
    (tmp_path / "mallory").symlink_to("bob")
    subs = {s.student: s for s in discover(tmp_path, masters)}
    assert not subs["eve"].files
    assert "symbolic link" in subs["eve"].invalid[first]
    assert "not a regular file" in subs["eve"].invalid[NOTEBOOKS[2]]
    assert "homework.ipynb" in subs["eve"].ignored  # a link matched by nothing but its name
    assert set(subs["mallory"].invalid) == set(masters) and not subs["mallory"].files
    assert subs["bob"].files == {first: tmp_path / "bob" / first}


def test_files_that_crash_parsing_are_ignored_not_fatal(tmp_path: Path) -> None:
    masters = load_masters()
    first = NOTEBOOKS[0]
    folder = tmp_path / "carl"
    crash = nbformat.v4.new_notebook()
    crash.cells = [nbformat.v4.new_code_cell("x = " + "1+" * 5000 + "1")]
    write(folder / "scratch.ipynb", nbformat.writes(crash).encode())
    write(folder / "deep.ipynb", b"[" * 100_000 + b"]" * 100_000)
    write(folder / first, hostile.dump(hostile.correct(first)))
    sub = match_files(folder, masters)
    assert sub.files == {first: folder / first}
    assert sorted(sub.ignored) == ["deep.ipynb", "scratch.ipynb"]
    rebuilt = rebuild(hostile.master(first), crash)  # and the rebuild survives it too
    assert all(v is None for v in rebuilt.answers.values())


def test_two_renamed_files_go_to_the_notebooks_they_resemble(tmp_path: Path) -> None:
    masters = load_masters()
    a, b = NOTEBOOKS[:2]
    folder = tmp_path / "carol"
    write(folder / "x.ipynb", hostile.dump(hostile.correct(b)))
    write(folder / "y.ipynb", hostile.dump(hostile.strip_metadata(hostile.correct(a))))
    files = match_files(folder, masters).files
    assert files == {a: folder / "y.ipynb", b: folder / "x.ipynb"}
