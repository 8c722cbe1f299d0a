"""The grader end to end on a sample of the corpus, the solutions and the release.

One class, graded once with `python -m autograder grade --jobs 2` (jailed): a student handing
in the solutions (full marks on every autograded cell of every notebook), one handing in the
release untouched (`unanswered`, zero everywhere), one student per round of the end-to-end
mutation sample (`hostile.mutation_sample`: every catalog mistake at least once and every
answer cell that has a mutation, several per notebook run, in cells that do not use each
other's names; each must lose points and be named in diagnoses.csv and, in words, in the
feedback) and one per round of alternatives (one per answer cell; full marks). Every mutation
and alternative of the corpus is judged in-process by test_checks_corpus.py; this test proves
that the command line (rebuild, jail, kernel, probes, outputs) carries each mistake through.
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
            "solutions",
            "the solutions",
            {nb: hostile.dump(hostile.correct(nb)) for nb in NOTEBOOKS},
            {nb: hostile.Expect("ok") for nb in NOTEBOOKS},
        ),
        hostile.Case(
            "release",
            "the release, untouched",
            {nb: hostile.dump(hostile.release(nb)) for nb in NOTEBOOKS},
            {nb: hostile.Expect("unanswered", None) for nb in NOTEBOOKS},
        ),
    ]
    mutants: dict[int, hostile.Case] = {}
    alternatives: dict[int, hostile.Case] = {}
    for nb in NOTEBOOKS:
        for k, batch in enumerate(hostile.sample_rounds(nb)):
            case = mutants.setdefault(k, hostile.Case(f"mutants_{k + 1:02d}", "mutations", {}))
            case.files[nb] = hostile.dump(hostile.mutated(nb, batch))
            case.expect[nb] = hostile.expect_mutations(batch)
        for k, batch in enumerate(hostile.group(nb, hostile.alternative_sample(nb))):
            case = alternatives.setdefault(k, hostile.Case(f"alternatives_{k + 1:02d}", "alts", {}))
            case.files[nb] = hostile.dump(hostile.with_alternatives(nb, batch))
            case.expect[nb] = hostile.Expect("ok")
    return cases + list(mutants.values()) + list(alternatives.values())


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


def test_solutions_get_every_point_and_the_release_none(
    graded: tuple[Path, list[hostile.Case]],
) -> None:
    out, _ = graded
    rows = hostile.read_csv(out / "grades.csv")
    for row in rows:
        if row["student"] == "solutions":
            assert row["status"] == "ok", row
            auto = float(row["max_score"]) - float(row["manual_max"])
            assert float(row["score"]) == auto and auto > 0, row
            assert row["manual_state"] == ("waiting" if float(row["manual_max"]) else ""), row
        if row["student"] == "release":
            assert row["status"] == "unanswered" and float(row["score"]) == 0.0, row
    assert not [r for r in hostile.read_csv(out / "diagnoses.csv") if r["student"] == "solutions"]


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
