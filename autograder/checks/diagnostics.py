"""Name the catalog mistake a wrong answer matches.

Every judge calls `match_mistakes` when a check fails: it compares what the student's code
produced with the output of each known wrong implementation, computed by the trusted side on
the very same inputs, and returns the ids of the mistakes that reproduce it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from autograder.checks.base import close

Variant = tuple[str, Callable[..., Any]]  # (catalog id, wrong implementation)


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


def diagnose_variants(
    variants: list[Variant], args: Mapping[str, tuple], observed: Mapping[str, Any], dtype: Any
) -> list[str]:
    """Catalog ids of the wrong implementations that reproduce what was observed.

    Runs each wrong implementation on the same case arguments the student's code saw; any
    number of implementations may share one id. A variant that cannot run on a case (a shape
    error) simply has no expectation there.
    """
    import copy

    import torch

    table: dict[str, dict[str, Any]] = {}
    for i, (mistake, wrong) in enumerate(variants):
        outputs = {}
        for key, a in args.items():
            try:
                with torch.no_grad():
                    outputs[key] = wrong(*copy.deepcopy(a))
            except Exception:  # a wrong implementation may not run on every size
                continue
        table[f"{i}:{mistake}"] = outputs
    found = match_mistakes(observed, table, dtype)
    return list(dict.fromkeys(tag.split(":", 1)[1] for tag in found))
