"""Name the catalog mistake a wrong answer matches.

Every judge calls `match_mistakes` when a check fails: it compares what the student's code
produced with the output of each known wrong implementation, computed by the trusted side on
the very same inputs, and returns the ids of the mistakes that reproduce it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autograder.checks.base import close


def match_mistakes(
    observed: Mapping[str, Any],
    variants: Mapping[str, Mapping[str, Any]],
    dtype: Any = "float32",
) -> list[str]:
    """Ids of the variants whose every expected output equals the observed one.

    `variants` maps a catalog id to {observed key: expected value}; a variant matches when
    every key it names was observed and agrees within the dtype tolerance. Booleans and plain
    values compare with ==.
    """
    found = []
    for mistake, expected in variants.items():
        if expected and all(_same(observed.get(k), v, dtype) for k, v in expected.items()):
            found.append(mistake)
    return found


def _same(observed: Any, expected: Any, dtype: Any) -> bool:
    if observed is None:
        return False
    if isinstance(expected, (bool, int, float, str)) and not hasattr(expected, "shape"):
        return observed == expected
    return close(observed, expected, dtype)
