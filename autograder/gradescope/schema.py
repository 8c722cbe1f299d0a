"""The shape of Gradescope's `results.json`, as a JSON Schema, and a check against it.

Written from Gradescope's autograder specification ("Output format"): a top-level `score`
unless every test carries one; optional `execution_time` (seconds), `output`, the formats of
outputs and names, `visibility`, `stdout_visibility`, `extra_data`, `tests` and
`leaderboard`. A test may carry `score`, `max_score`, `status` (passed or failed), `name`,
`name_format`, `number`, `output`, `output_format`, `tags`, `visibility` and `extra_data`.
Keys outside the specification are refused here, so that a misspelt key cannot pass for a
setting Gradescope would ignore.
"""

from __future__ import annotations

from typing import Any

FORMATS = ["text", "html", "simple_format", "md", "ansi"]
VISIBILITIES = ["hidden", "after_due_date", "after_published", "visible"]
STATUSES = ["passed", "failed"]

_NUMBER = {"type": "number"}
_TEXT = {"type": "string"}

TEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": _NUMBER,
        "max_score": {"type": "number", "minimum": 0},
        "status": {"enum": STATUSES},
        "name": _TEXT,
        "name_format": {"enum": FORMATS},
        "number": _TEXT,
        "output": _TEXT,
        "output_format": {"enum": FORMATS},
        "tags": {"type": "array", "items": _TEXT},
        "visibility": {"enum": VISIBILITIES},
        "extra_data": {"type": "object"},
    },
}

LEADER: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "value"],
    "properties": {
        "name": _TEXT,
        "value": {"type": ["number", "string"]},
        "order": {"enum": ["asc", "desc"]},
    },
}

RESULTS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Gradescope autograder results.json",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": _NUMBER,
        "execution_time": {"type": "number", "minimum": 0},
        "output": _TEXT,
        "output_format": {"enum": FORMATS},
        "test_output_format": {"enum": FORMATS},
        "test_name_format": {"enum": FORMATS},
        "visibility": {"enum": VISIBILITIES},
        "stdout_visibility": {"enum": VISIBILITIES},
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": TEST},
        "leaderboard": {"type": "array", "items": LEADER},
    },
    # The score is on the top level, or on every test.
    "anyOf": [
        {"required": ["score"]},
        {"required": ["tests"], "properties": {"tests": {"items": {"required": ["score"]}}}},
    ],
}


def problems(results: object) -> list[str]:
    """Every way `results` departs from the schema, one line each ([] when it conforms)."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(RESULTS_SCHEMA)
    found = sorted(validator.iter_errors(results), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in found]
