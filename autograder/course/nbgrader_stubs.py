"""nbgrader's ClearSolutions with the course's rule for prediction cells
(`autograder.course.stubs`).
"""

from __future__ import annotations

from typing import Any

from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import ClearSolutions

from autograder.course.stubs import released


class CourseClearSolutions(ClearSolutions):
    """Solution regions replaced as nbgrader does, but a prediction cell keeps its named stubs
    (`ROW_SUMS_AFTER = ...`) and gets no `raise NotImplementedError()`."""

    def _replace_solution_region(self, cell: Any, language: str) -> bool:
        original = cell.source
        replaced = super()._replace_solution_region(cell, language)  # nbgrader's own checks
        if replaced:
            code = cell.cell_type == "code"
            cell.source = released(original, code, self.code_stub[language], self.text_stub)[0]
        return replaced


def generate_preprocessors() -> list[type]:
    """GenerateAssignment's preprocessors, in nbgrader's order, with ClearSolutions swapped."""
    defaults = GenerateAssignment.class_traits()["preprocessors"].default()
    return [CourseClearSolutions if pp is ClearSolutions else pp for pp in defaults]
