"""The one guard of every CSV the grader writes (grades.csv, cells.csv, diagnoses.csv,
final-grades.csv and the platforms' import files): a text cell a spreadsheet would read as a
formula (it starts with = + - @, a tab or a carriage return) is prefixed with a quote."""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def starts_like_formula(text: str) -> bool:
    return text.startswith(FORMULA_STARTS)


def neutral(value: object) -> str:
    """A CSV cell a spreadsheet shows as text, never runs as a formula."""
    text = str(value)
    return "'" + text if starts_like_formula(text) else text
