"""The grader end to end on a sample of the corpus and the release.

One class, graded once with `python -m autograder grade --jobs 2` (jailed): a student handing
in the release untouched (`unanswered`, zero everywhere), and one student per round of the
end-to-end mutation sample (`hostile.mutation_sample`: every catalog mistake at least once and
every answer cell that has a mutation, several per notebook run, in cells that do not use each
other's names; each must lose points and be named in diagnoses.csv and, in words, in the
feedback). Beside the mutations, in the cells they leave alone, sit the corpus's correct
alternatives (one per answer cell, each reading names that the notebook's own cells define
above it, tests/corpus/context.py; full marks, nothing named); an alternative that fits no
round is graded in a round of its own. One more student hands in notebook 05 with a Head like
the lecture's that reads its dropout rate from `attn_dropout`, a global only a cell the student
added defines: that cell scores 0 and the page says which name and why. Every mutation and
alternative of the corpus is judged in-process by test_checks_corpus.py, and the solutions score
full marks in the jail in test_grader_sandbox.py; this test proves that the command line
(rebuild, jail, kernel, probes, outputs) carries each mistake and each correct answer through,
with as few notebook runs as the sample allows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.model.notebook_io import grade_id
from tests.corpus import hostile
from tests.corpus.context import lecture_head_with_added_dropout

# pytest-timeout: the class is graded in the first test (setup counts)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
NOTEBOOKS = hostile.course_notebooks()


def corpus_class() -> list[hostile.Case]:
    cases = [
        hostile.Case(
            "release",
            "the release, untouched",
            {nb: hostile.dump(hostile.release(nb)) for nb in NOTEBOOKS},
            {nb: hostile.Expect("unanswered", None) for nb in NOTEBOOKS},
        ),
    ]
    rounds: dict[int, hostile.Case] = {}
    for nb in NOTEBOOKS:
        mutations = hostile.sample_rounds(nb)
        beside, left = hostile.alternatives_beside(nb, mutations, hostile.alternative_sample(nb))
        batches = list(zip(mutations, beside, strict=True))
        batches += [([], alone) for alone in hostile.alternative_groups(nb, left)]
        for k, (batch, alternatives) in enumerate(batches):
            case = rounds.setdefault(k, hostile.Case(f"round_{k + 1:02d}", "mixed", {}))
            case.files[nb] = hostile.dump(hostile.mutated(nb, batch, alternatives))
            case.expect[nb] = hostile.expect_mutations(batch)
            ALTERNATIVE_CELLS.update((case.student, nb, a.grade_id) for a in alternatives)
    return cases + list(rounds.values()) + [added_cell_case()]


ADDED = "added_cell"  # the student whose Head reads a name only their own added cell defines
HEAD_NB = "05_the_head.ipynb"


def added_cell_case() -> hostile.Case:
    import nbformat

    cell, answer = lecture_head_with_added_dropout()
    answers = hostile.full_answers(HEAD_NB)
    answers["head"] = answer
    nb = hostile.with_answers(HEAD_NB, answers)
    at = next(i for i, c in enumerate(nb.cells) if grade_id(c) == "head")
    nb.cells.insert(at, nbformat.v4.new_code_cell(cell))
    files = {HEAD_NB: hostile.dump(nb)}
    expect = {HEAD_NB: hostile.Expect("ok", frozenset({"head"}))}
    return hostile.Case(ADDED, "a Head reading a global of an added cell", files, expect)


ALTERNATIVE_CELLS: set[tuple[str, str, str]] = set()  # (student, notebook, grade_id)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[hostile.Case]]:
    root = tmp_path_factory.mktemp("corpus")
    cases = corpus_class()
    hostile.write_class(root / "class", cases)
    result = hostile.grade(root / "class", root / "out", "--jobs", "2")
    assert result.returncode == 0, result.stderr
    return root / "out", cases


def test_every_expectation_holds(graded: tuple[Path, list[hostile.Case]]) -> None:
    out, cases = graded
    problems = hostile.check(out, cases)
    assert not problems, "\n".join(problems)


def test_every_mistake_and_answer_cell_is_in_the_class(
    graded: tuple[Path, list[hostile.Case]],
) -> None:
    from tests import corpus

    out, cases = graded
    graded_files = {(c.student, nb) for c in cases for nb in c.files}
    rows = {(r["student"], r["notebook"]) for r in hostile.read_csv(out / "grades.csv")}
    assert graded_files <= rows
    named = {
        (r["notebook"], r["grade_id"], r["mistake"])
        for r in hostile.read_csv(out / "diagnoses.csv")
    }
    sample = hostile.mutation_sample()
    assert {(m.notebook, m.grade_id, m.mistake) for m in sample} <= named
    made = {m.mistake for m in corpus.mutations()}
    assert {m.mistake for m in sample} == made, "a mistake of the corpus is never graded"
    mutated_cells = {(m.notebook, m.grade_id) for m in corpus.mutations()}
    assert mutated_cells == {(m.notebook, m.grade_id) for m in sample}
    alternative_cells = {(a.notebook, a.grade_id) for a in corpus.alternatives()}
    sampled = {(a.notebook, a.grade_id) for nb in NOTEBOOKS for a in hostile.alternative_sample(nb)}
    assert alternative_cells == sampled


def test_alternatives_get_every_point_and_the_release_none(
    graded: tuple[Path, list[hostile.Case]],
) -> None:
    out, _ = graded
    assert ALTERNATIVE_CELLS, "no alternative in the class"
    cells = {
        (r["student"], r["notebook"], r["grade_id"]): r for r in hostile.read_csv(out / "cells.csv")
    }
    for key in ALTERNATIVE_CELLS:
        assert key in cells and float(cells[key]["score"]) == float(cells[key]["max_score"]), key
    named = {
        (r["student"], r["notebook"], r["grade_id"])
        for r in hostile.read_csv(out / "diagnoses.csv")
    }
    assert not ALTERNATIVE_CELLS & named, sorted(ALTERNATIVE_CELLS & named)
    for row in hostile.read_csv(out / "grades.csv"):
        if row["student"] == "release":
            assert row["status"] == "unanswered" and float(row["score"]) == 0.0, row
            assert row["manual_state"] in ("", "unanswered"), row


def test_no_page_shows_the_hidden_tests(graded: tuple[Path, list[hostile.Case]]) -> None:
    out, _ = graded
    hidden = hostile.hidden_test_lines()
    pages = sorted((out / "feedback").rglob("*.html"))
    assert pages
    for page in pages:
        text = hostile.page_text(page)
        assert "HIDDEN TESTS" not in text, page
        leaked = [line for line in hidden if line in text]
        assert not leaked, (page, leaked)


def test_a_name_only_an_added_cell_defines_is_named_with_why(
    graded: tuple[Path, list[hostile.Case]],
) -> None:
    out, _ = graded
    rows = hostile.read_csv(out / "cells.csv")
    cells = {r["grade_id"]: r for r in rows if (r["student"], r["notebook"]) == (ADDED, HEAD_NB)}
    assert float(cells["head"]["score"]) == 0.0, cells["head"]
    text = hostile.page_text(hostile.feedback_path(out, ADDED, HEAD_NB))
    assert "`attn_dropout`: only a cell you added defines it" in text, text[-3000:]
