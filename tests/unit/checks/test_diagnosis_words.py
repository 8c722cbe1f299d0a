"""The words of a named mistake fit the cell it is named in."""

from __future__ import annotations

from autograder.checks import all_specs, run_in_process, spec_for
from autograder.checks.catalog import CELL_WORDS, MISTAKES, describe


def test_cell_words_are_for_catalog_ids_and_existing_cells() -> None:
    cells = set(all_specs())
    for mistake, grade_id in CELL_WORDS:
        assert mistake in MISTAKES, mistake
        assert grade_id in cells, grade_id


def test_a_shape_table_is_told_about_shapes_not_code() -> None:
    table = {
        "k": (4, 8, 16),
        "q": (4, 8, 16),
        "k_T": (8, 4, 16),
        "scores": (4, 8, 8),
        "masked": (4, 8, 8),
        "weights": (4, 8, 8),
        "v": (4, 8, 16),
        "out": (4, 8, 32),
    }
    result = run_in_process(spec_for("shape-table"), {"SHAPES": table})
    assert result.mistakes == ["transpose-batch", "aggregate-x"], result.render()
    text = result.render()
    for mistake in result.mistakes:
        words = describe(mistake, "shape-table")
        assert words != describe(mistake) and words in text
        assert "(B, T" in words and ".transpose(" not in words


def test_unknown_cells_get_the_catalog_words() -> None:
    assert describe("no-scale", "head") == MISTAKES["no-scale"]
    assert describe("no-scale") == MISTAKES["no-scale"]
    assert describe("not-an-id", "head") == "not-an-id"
