"""Predict first, then look: a reveal cell shows its result only once the prediction is made.

A reveal cell starts with

    if recorded(globals(), "ROW_SUMS_AFTER", "LAST_ROW_SUM_AFTER"):
        ...  # the experiment that answers the prediction

Until every named variable holds an answer (not the stub's `...`), the cell prints one line
asking for the prediction and shows nothing else; it raises nothing, so Run All goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["recorded", "missing_predictions"]


def missing_predictions(namespace: Mapping[str, Any], *names: str) -> list[str]:
    """The names in `names` that the notebook has not given an answer yet."""
    return [name for name in names if namespace.get(name, ...) is ...]


def recorded(namespace: Mapping[str, Any], *names: str) -> bool:
    """True when every prediction in `names` is made; else print which are not, once."""
    missing = missing_predictions(namespace, *names)
    if missing:
        print(
            f"Record your prediction first ({', '.join(missing)} in the cell above), then run "
            "this cell again: it shows the result only after you have committed to an answer."
        )
    return not missing
