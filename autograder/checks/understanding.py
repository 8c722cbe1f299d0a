"""Checks of the prediction cells: answers whose probe records named constants.

Each spec here sets `notebook` to its notebook file and uses the probe
`values.probe_values`; `autograder.checks.notebook_specs` merges them into their notebook.
"""

from __future__ import annotations

from autograder.checks.base import CellSpec

SPECS: list[CellSpec] = []
