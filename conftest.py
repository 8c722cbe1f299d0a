"""Shared test settings: a headless matplotlib and the data set from ../shared when present."""

import os
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
# The data set for the notebooks (nbval) and the tests: ../shared/data beside a CI checkout.
_shared = Path(__file__).resolve().parents[1] / "shared" / "data" / "tinyshakespeare.txt"
if "TINYSHAKESPEARE" not in os.environ and _shared.is_file():
    os.environ["TINYSHAKESPEARE"] = str(_shared)


def pytest_collection_modifyitems(items: list) -> None:
    """Tests marked `after_beside` wait for make test's beside run (tests/beside.py): they go
    last, in their own order, so that the rest of the suite runs while the beside run ends."""
    items.sort(key=lambda item: item.get_closest_marker("after_beside") is not None)
