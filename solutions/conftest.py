"""nbval on the instructor notebooks: no cell may raise, whatever its tags say.

Answer cells, self-checks and the cells that use their results carry the `raises-exception`
tag so that a student's Run All goes on past answers not written yet. nbval reads that tag as
"may raise"; in the solutions every answer is written, so here an error is always a failure.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        options = getattr(item, "options", None)
        if type(item).__name__ == "IPyNbCell" and isinstance(options, dict):
            options["check_exception"] = False
