"""`make lab`'s PyTorch (TORCH=cpu|cuda|auto) in the instructor's Makefile and the students':
the pip command each choice builds on Linux, macOS and Windows, `auto` deciding by whether
`nvidia-smi` answers (a stand-in on PATH), the CPU command resolving on this machine, and the
README's sizes and times."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from autograder.course import student_release
from autograder.model.paths import ROOT

# pytest-timeout: pip resolves the CPU wheel (setup counts)
pytestmark = pytest.mark.timeout(600)

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PIN = next(
    ln.strip()
    for ln in (ROOT / "requirements-torch.txt").read_text().splitlines()
    if ln.startswith("torch==")
)


@pytest.fixture(scope="module")
def student_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the student Makefile's install step reads, as the student release writes them."""
    tree = tmp_path_factory.mktemp("student")
    shutil.copy2(ROOT / "student" / "Makefile", tree / "Makefile")
    (tree / "requirements.txt").write_text(student_release.student_requirements())
    (tree / "pyproject.toml").write_text("")
    (tree / ".course").mkdir()
    (tree / ".course" / "jupyterlab-overrides.json").write_text("{}")
    return tree


def _nvidia_smi(folder: Path, answers: bool) -> dict[str, str]:
    """PATH with a stand-in nvidia-smi first: one that lists a GPU, or one that fails."""
    folder.mkdir(exist_ok=True)
    script = folder / "nvidia-smi"
    body = "echo 'GPU 0: stand-in'; exit 0" if answers else "echo 'no driver' >&2; exit 9"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def torch_line(makefile_dir: Path, *variables: str, env: dict[str, str] | None = None) -> str:
    """The torch install command `make venv` would run (dry: nothing runs)."""
    done = subprocess.run(
        ["make", "-n", "-B", "venv", *variables], cwd=makefile_dir, capture_output=True,
        text=True, env={**os.environ, **(env or {})}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if "pip install" in ln and "torch" in ln]
    assert len(lines) == 1, done.stdout
    rest = "requirements.lock" if makefile_dir == ROOT else "requirements.txt"
    assert rest in done.stdout.split(lines[0], 1)[1], "torch first, then the rest"
    return lines[0]


CHOICES = [  # (variables, nvidia-smi answers, what pip is asked for)
    (["TORCH=cpu", "PLATFORM=Linux"], True, f'--index-url {CPU_INDEX} "{PIN}+cpu"'),
    (["TORCH=cuda", "PLATFORM=Linux"], False, f'install -q "{PIN}"'),
    (["TORCH=auto", "PLATFORM=Linux"], True, f'install -q "{PIN}"'),
    (["TORCH=auto", "PLATFORM=Linux"], False, f'--index-url {CPU_INDEX} "{PIN}+cpu"'),
    (["PLATFORM=Linux"], False, f'--index-url {CPU_INDEX} "{PIN}+cpu"'),  # auto by default
    (["TORCH=cpu", "PLATFORM=Darwin"], False, f'install -q "{PIN}"'),
    (["TORCH=cuda", "PLATFORM=Windows"], True, f'install -q "{PIN}"'),
]


@pytest.mark.parametrize("which", ["instructor", "student"])
@pytest.mark.parametrize("variables, gpu, asked", CHOICES)
def test_each_choice_builds_its_pip_command(
    which: str, variables: list[str], gpu: bool, asked: str, student_tree: Path, tmp_path: Path
) -> None:
    folder = ROOT if which == "instructor" else student_tree
    line = torch_line(folder, *variables, env=_nvidia_smi(tmp_path / "bin", gpu))
    assert line.endswith(asked), line
    if "index-url" not in asked:
        assert "download.pytorch.org" not in line, line


@pytest.mark.parametrize("which", ["instructor", "student"])
def test_an_unknown_choice_is_refused(which: str, student_tree: Path) -> None:
    folder = ROOT if which == "instructor" else student_tree
    done = subprocess.run(
        ["make", "-n", "venv", "TORCH=gpu"], cwd=folder, capture_output=True, text=True
    )
    assert done.returncode != 0 and "TORCH=gpu: choose cpu, cuda or auto" in done.stderr


def test_the_cpu_command_resolves_the_cpu_wheel_here(tmp_path: Path) -> None:
    """The CPU choice's own command, as a dry run: pip finds torch 2.13.0+cpu (this machine's
    local wheel when PyTorch's index is out of reach); its size is the README's."""
    line = torch_line(ROOT, "TORCH=cpu", "PLATFORM=Linux")
    argv = shlex.split(line)
    assert Path(argv[0]).name.startswith("python") and argv[1:4] == ["-m", "pip", "install"]
    report = tmp_path / "report.json"
    argv = [sys.executable, *argv[1:], "--dry-run", "--ignore-installed", "--no-deps",
            "--report", str(report)]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, env={**os.environ, "PIP_RETRIES": "0"}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (install,) = json.loads(report.read_text())["install"]
    assert install["metadata"]["name"] == "torch"
    assert install["metadata"]["version"] == PIN.split("==")[1] + "+cpu"
    url = urllib.parse.urlparse(install["download_info"]["url"])
    if url.scheme == "file":
        megabytes = Path(urllib.parse.unquote(url.path)).stat().st_size / 1e6
        claimed = readme_rows()["`cpu` (Linux)"][0]
        assert abs(megabytes - claimed) / claimed < 0.15, (megabytes, claimed)


def _megabytes(text: str) -> float:
    """'about 190 MB' -> 190; 'about 2.5-3 GB' -> 2750 (the middle)."""
    match = re.search(r"([\d.]+)(?:-([\d.]+))? (MB|GB)", text)
    assert match, text
    low = float(match[1])
    high = float(match[2] or low)
    return (low + high) / 2 * (1000 if match[3] == "GB" else 1)


def _seconds(text: str) -> float:
    match = re.search(r"([\d.]+)(?:-([\d.]+))? (s|minutes)", text)
    assert match, text
    low = float(match[1])
    high = float(match[2] or low)
    return (low + high) / 2 * (60 if match[3] == "minutes" else 1)


def readme_rows() -> dict[str, tuple[float, float]]:
    """The README's table: choice -> (torch download in MB, seconds at 50 Mbit/s)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Installing PyTorch (`TORCH`)", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and ("MB" in cells[2] or "GB" in cells[2]):
            rows[cells[0]] = (_megabytes(cells[2]), _seconds(cells[3]))
    return rows


def test_the_readme_times_follow_from_its_sizes() -> None:
    rows = readme_rows()
    assert set(rows) == {"`cpu` (Linux)", "`cuda` (Linux)", "any, on macOS", "any, on Windows"}
    for choice, (megabytes, seconds) in rows.items():
        at_50_mbit = megabytes / 6.25  # 50 Mbit/s = 6.25 MB/s
        assert 0.7 < seconds / at_50_mbit < 1.4, (choice, megabytes, seconds)
    assert rows["`cuda` (Linux)"][0] > 10 * rows["`cpu` (Linux)"][0]
