"""One command line: every command in one argparse tree, the same words for the same things,
examples in every --help, required arguments refused in one line."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict

import pytest

from autograder.cli import COMMANDS, PROG, main, parser
from autograder.model import options
from autograder.model.paths import ROOT


def subparsers() -> dict[str, argparse.ArgumentParser]:
    tree = parser()  # every command's options
    (action,) = [a for a in tree._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_has_help_with_examples(command: str, capsys) -> None:
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: {PROG} {command} "), text[:80]
    assert "\nexamples:\n" in text
    examples = text.split("\nexamples:\n", 1)[1]
    assert f"{PROG} {command}" in examples, "an example of the command itself"


def test_the_top_level_help_lists_every_command_with_examples(capsys) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert all(f"    {name}" in text for name in COMMANDS)
    assert "\nexamples:\n" in text


def test_every_command_module_gives_add_arguments_and_run() -> None:
    for name, command in COMMANDS.items():
        arguments, run = command.load()
        assert callable(arguments) and callable(run), name


def test_the_same_thing_has_the_same_name_in_every_command() -> None:
    """An option shared by commands: one option name per destination, one metavar per
    option name; the retired spellings are not shown."""
    names: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    metavars: dict[str, set[str | None]] = defaultdict(set)
    for command, sub in subparsers().items():
        for action in sub._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            assert not set(action.option_strings) & set(options.RENAMED), (command, action)
            names[action.dest].add(tuple(action.option_strings))
            for name in action.option_strings:
                metavars[name].add(str(action.metavar))
    assert {d: n for d, n in names.items() if len(n) > 1} == {}
    # --out is grade's folder and gradescope's zip: the one name with two metavars
    assert {n: m for n, m in metavars.items() if len(m) > 1 and n != "--out"} == {}
    assert "--notebooks" in {n for ns in names["notebooks"] for n in ns}


def test_a_retired_spelling_still_works(tmp_path) -> None:
    args = parser("student-release").parse_args(
        options.renamed(["student-release", "--assignments", "01", "--dest", str(tmp_path)])
    )
    assert args.notebooks == "01"


@pytest.mark.parametrize(
    "argv, missing",
    [
        (["grade"], "SUBMISSIONS, --out"),
        (["grade", "class"], "--out"),
        (["student-release", "--dest", "x"], "--notebooks"),
        (["export"], "OUT"),
        (["refresh"], "OUT"),
        (["gradescope", "--notebooks", "02"], "--out"),
    ],
)
def test_required_arguments_are_refused_in_one_line(argv, missing, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    said = f"{PROG} {argv[0]}: error: the following arguments are required: {missing}"
    assert err.startswith(said)
    assert err.count("\n") == 1, "one line"


def test_limits_need_no_submissions(capsys) -> None:
    assert main(["grade", "--limits"]) == 0
    assert main(["limits"]) == 0
    out = capsys.readouterr().out
    half = len(out) // 2
    assert out[:half] == out[half:] and out.startswith("timeout = ")


def test_the_console_script_and_the_module_are_one_command_line() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'autograder = "autograder.cli:main"' in text
    done = subprocess.run([sys.executable, "-m", "autograder", "badges", "--help"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith(f"usage: {PROG} badges"), done.stderr
