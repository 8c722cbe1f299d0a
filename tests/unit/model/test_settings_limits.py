"""Every limit is in settings.py: with its default, unit and reason; printed by
`python -m autograder limits`; its options generated from it; none defined elsewhere."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from autograder.cli import main, parser
from autograder.model.paths import ROOT
from autograder.model.settings import (
    LIMITS,
    METAVARS,
    Limits,
    explain,
    fields,
    limits_from_args,
    option_name,
    options,
)

PACKAGE = ROOT / "autograder"
# names of module-level constants that are bounds: they belong in settings.py
BOUND = re.compile(
    r"(_LIMIT|_LIMITS|_BYTES|_TIMEOUT|_MB|_MIB|_KB|_SECONDS|_CHARS|_MARGIN|_FLOOR|_CAP|_PIXELS"
    r"|_RETRIES|_MEMBERS|_DEPTH)$|^MAX_"
)
# The probe package runs inside the jail and imports nothing of the grader: its bounds are
# constants that mirror settings' `probe` group, held equal here.
PROBE_MIRRORS = {
    ("probe/plain.py", "MAX_DEPTH"): "plain_depth",
    ("probe/observed.py", "MAX_DEPTH"): "encode_depth",
    ("probe/observed.py", "TEXT_BYTES"): "text_bytes",
    ("probe/observed.py", "JSON_BYTES"): "json_bytes",
    ("probe/observed.py", "NPY_HEADER_BYTES"): "npy_header_bytes",
}


def _numeric(node: ast.AST) -> bool:
    """A number written in the source: 64, 2**20, 4 * 2**20, 32 << 20, -1.5."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    return False


def bounds_defined_in(source: str) -> list[str]:
    """Module-level constants named like a bound and given a number."""
    found = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if (
            isinstance(node, ast.AnnAssign) and node.value is not None) else []  # fmt: skip
        for target in targets:
            if isinstance(target, ast.Name) and BOUND.search(target.id):
                if _numeric(node.value):  # type: ignore[union-attr]
                    found.append(target.id)
    return found


def test_the_scan_finds_a_bound_written_as_a_number() -> None:
    source = (
        "RESULT_LIMIT = 256 * 2**20\nSTART_TIMEOUT: float = 120.0\nMEMORY_MARGIN = 32 << 20\n"
        "STATE_BYTES = LIMITS.reads.state_bytes\nKEY_LENGTH = 32\nNAMES = ('a',)\n"
    )
    assert bounds_defined_in(source) == ["RESULT_LIMIT", "START_TIMEOUT", "MEMORY_MARGIN"]


def test_no_limit_is_defined_outside_settings() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "model" / "settings.py":
            continue
        here = str(path.relative_to(PACKAGE))
        names = [n for n in bounds_defined_in(path.read_text()) if (here, n) not in PROBE_MIRRORS]
        if names:
            found[str(path.relative_to(ROOT))] = names
    assert found == {}, "limits belong in autograder/model/settings.py, with their reason"


def test_the_probes_bounds_mirror_the_settings() -> None:
    import importlib

    for (file, name), field_name in PROBE_MIRRORS.items():
        module = importlib.import_module("autograder." + file.removesuffix(".py").replace("/", "."))
        assert getattr(module, name) == getattr(LIMITS.probe, field_name), (file, name)


def test_the_scan_finds_a_depth_and_a_maximum() -> None:
    assert bounds_defined_in("MAX_DEPTH = 6\nNEST_DEPTH = 3\nMAXIMUM = 2\n") == [
        "MAX_DEPTH",
        "NEST_DEPTH",
    ]


def test_every_limit_has_a_unit_and_a_reason() -> None:
    seen = list(fields())
    assert len(seen) > len(dataclasses.fields(Limits))  # the groups are flattened
    for name, value, f in seen:
        assert f.metadata["unit"] in METAVARS, name
        assert len(f.metadata["why"]) > 30, name
        assert isinstance(value, (int, float)) and value > 0 or f.metadata["zero"], name


def test_explain_prints_every_limit_with_value_unit_and_reason() -> None:
    lines = explain().splitlines()
    for name, value, f in fields():
        heading = f"{name} = {value!r} {f.metadata['unit']}"
        assert heading in lines, heading
        assert lines[lines.index(heading) + 1].strip() == f.metadata["why"]
    assert "jail.shm_bytes = " in explain() and "reads.result_bytes = " in explain()


def test_every_run_limit_is_a_grade_option_with_its_reason() -> None:
    grade = parser("grade")._subparsers._group_actions[0].choices["grade"]  # type: ignore[union-attr]
    by_option = {s: a for a in grade._actions for s in a.option_strings}
    by_field = {f.name: f for f in dataclasses.fields(Limits)}
    assert options() and all(name in by_field for name in options())
    for name in options():
        action = by_option[option_name(name)]
        assert action.default == getattr(LIMITS, name)
        assert by_field[name].metadata["why"] in action.help.replace("%%", "%")


def test_options_reach_the_run_settings(tmp_path: Path) -> None:
    argv = ["grade", str(tmp_path), "--out", str(tmp_path / "out"), "--zip-ratio", "50",
            "--timeout", "10", "--cell-timeout", "30", "--worker-retries", "0"]  # fmt: skip
    limits = limits_from_args(parser("grade").parse_args(argv))
    assert limits.zip_ratio == 50.0 and limits.worker_retries == 0
    assert limits.timeout == 10.0 and limits.cell_timeout == 10.0  # never past the notebook's
    assert limits.jail == LIMITS.jail


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_a_limit_option_must_be_a_positive_number(value: str, capsys) -> None:
    assert main(["grade", "class", "--out", "out", "--zip-members", value]) == 2
    assert "argument --zip-members:" in capsys.readouterr().err


def test_limits_travel_as_json_with_their_groups() -> None:
    changed = dataclasses.replace(
        LIMITS, timeout=9.0, jail=dataclasses.replace(LIMITS.jail, shm_bytes=1)
    )
    assert Limits.from_json(changed.to_json()) == changed
    assert Limits.from_json({"timeout": 9.0, "unknown": 1}) == dataclasses.replace(
        LIMITS, timeout=9.0
    )
