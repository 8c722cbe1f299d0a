"""The prediction cells: each right answer written three ways (literals, one unpacking with
choices as "(B)", expressions). The right answer is the spec's own experiment, run when a
writer writes, so nothing here is a pasted number."""

from __future__ import annotations

from functools import cache
from typing import Any

from autograder.checks import understanding
from tests.corpus import Choose, Writer


@cache
def _truth(grade_id: str) -> dict[str, Any]:
    spec = next(s for s in understanding.SPECS if s.grade_id == grade_id)
    return spec.truth(spec.cases())


def _literal(value: Any, choice: bool) -> str:
    return repr(value)


def _shouted(value: Any, choice: bool) -> str:
    return repr(f"({value.upper()})") if choice else repr(value)


def _expression(value: Any, choice: bool) -> str:
    if choice:
        return f"{f' {value.upper()} '!r}.strip()"
    if isinstance(value, bool):
        return f"bool({int(value)})"
    if isinstance(value, float):
        return f"float({repr(value)!r})"
    return f"int({str(value)!r})"


def _writer(spec: Any, label: str, form: Any, unpacked: bool) -> Writer:
    def write(choose: Choose) -> str:
        truth = _truth(spec.grade_id)
        values = [form(truth[name], name in spec.choices) for name in spec.names]
        if unpacked:
            return f"{', '.join(spec.names)} = {', '.join(values)}\n"
        return "".join(
            f"{name} = {value}  # my prediction\n"
            for name, value in zip(spec.names, values, strict=True)
        )

    return Writer(spec.grade_id, None, label, write)


WRITERS = [
    _writer(spec, label, form, unpacked)
    for spec in understanding.SPECS
    for label, form, unpacked in (
        ("literals", _literal, False),
        ("unpacked", _shouted, True),
        ("expressions", _expression, False),
    )
]
