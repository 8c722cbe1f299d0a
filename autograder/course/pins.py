"""The course's own pins: requirements.in, in groups (course, grader, torch, dev; each opened by a
`# [group]` line), and requirements-torch.txt, installed first by the Makefile. requirements.lock
is compiled from requirements.in by `make lock` and pins every package with its hashes."""

from __future__ import annotations

import re
from pathlib import Path

from autograder.model.paths import ROOT

REQUIREMENTS = ROOT / "requirements.in"
TORCH = ROOT / "requirements-torch.txt"
LOCK = ROOT / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*==\s*(\S+)")
GROUP = re.compile(r"^#\s*\[(\w+)\]")


def normal(name: str) -> str:
    """A package name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def groups(requirements: Path = REQUIREMENTS) -> dict[str, list[str]]:
    """group -> its requirement lines (comments and blank lines left out), in file order."""
    found: dict[str, list[str]] = {}
    group = ""
    for line in requirements.read_text(encoding="utf-8").splitlines():
        if match := GROUP.match(line.strip()):
            group = match[1]
            found.setdefault(group, [])
        elif line.strip() and not line.lstrip().startswith("#"):
            found.setdefault(group, []).append(line.strip())
    return found


def pins(*wanted: str, requirements: Path = REQUIREMENTS, torch: Path = TORCH) -> dict[str, str]:
    """Normalised name -> `name==version` of every exact pin of the `wanted` groups (all when
    none is named), torch's included."""
    chosen = groups(requirements)
    lines = [ln for g, group in chosen.items() if not wanted or g in wanted for ln in group]
    lines += torch.read_text(encoding="utf-8").splitlines()
    return {normal(m[1]): m[0] for ln in lines if (m := PIN.match(ln.strip()))}
