"""The grader end to end on a sample of the corpus and the release.

One class, graded once with `python -m autograder grade --jobs 2` (jailed): a student handing
in the release untouched (`unanswered`, zero everywhere), and one student per round of the
end-to-end mutation sample (`hostile.mutation_sample`: every catalog mistake at least once and
every answer cell that has a mutation, several per notebook run, in cells that do not use each
other's names; each must lose points and be named in diagnoses.csv and, in words, in the
feedback). Beside the mutations, in the cells they leave alone, sit the corpus's correct
alternatives (one per answer cell; full marks, nothing named); an alternative that fits no
round is graded in a round of its own. Every mutation and alternative of the corpus is judged
in-process by test_checks_corpus.py, and the solutions score full marks in the jail in
test_grader_sandbox.py; this test proves that the command line (rebuild, jail, kernel, probes,
outputs) carries each mistake and each correct answer through, with as few notebook runs as
the sample allows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus import hostile

pytestmark = pytest.mark.slow
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
    return cases + list(rounds.values())


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
