"""`grade` refuses in one line, before grading anything, when the jail cannot be had: bwrap
missing, or installed but unable to start a jail (user namespaces disabled)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from autograder.cli import main


@pytest.fixture
def klass(tmp_path: Path) -> Path:
    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "class" / "alice" / "notes.txt").write_text("hello")
    return tmp_path / "class"


def refusal(klass: Path, capsys: Any) -> str:
    """Grade `klass`: the exit code must be 2 and stderr one line, which is returned."""
    out = klass.parent / "out"
    code = main(["grade", str(klass), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert not (out / "grades.csv").exists()
    return err


def tool_folder(tmp_path: Path, tools: list[str]) -> Path:
    """A folder holding links to the host's `tools` (and a PATH of that folder alone)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in tools:
        real = shutil.which(tool)
        assert real is not None, tool
        (folder / tool).symlink_to(real)
    return folder


def test_missing_bwrap_refuses_in_one_line(
    klass: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    folder = tool_folder(tmp_path, ["prlimit", "unshare", "setpriv"])
    monkeypatch.setenv("PATH", str(folder))
    err = refusal(klass, capsys)
    assert "bwrap (bubblewrap) is not installed" in err and "install_bwrap.sh" in err


def test_a_bwrap_that_cannot_start_a_jail_refuses_in_one_line(
    klass: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """bwrap is on PATH but fails as it does where user namespaces are disabled."""
    folder = tmp_path / "fake"
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    err = refusal(klass, capsys)
    assert "cannot start a jail (bwrap: setting up uid map: Permission denied)" in err
    assert "user namespaces" in err and "--no-jail" in err
