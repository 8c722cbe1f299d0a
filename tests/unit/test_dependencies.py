"""The dependencies are locked and grouped: requirements.in (course, grader, torch's own needs,
dev) compiled into requirements.lock, every package pinned with its hashes; torch pinned apart
(requirements-torch.txt, installed first by its build) and out of the lock; pyproject.toml's
optional groups saying the same with ranges; this environment running the lock."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement

from autograder.course import pins
from autograder.model.paths import ROOT

# The Makefile uninstalls it after the lock (it slows every Jupyter start; nothing needs it).
REMOVED_AFTER_INSTALL = {"rfc3987-syntax"}
CUDA_ONLY = ("nvidia-", "triton")


def lock_entries() -> dict[str, tuple[str, list[str], list[str]]]:
    """Normalised name -> (version, its hashes, what it is there for) of requirements.lock."""
    entries: dict[str, tuple[str, list[str], list[str]]] = {}
    name = ""
    for line in pins.LOCK.read_text(encoding="utf-8").splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==(\S+)", line):
            name = pins.normal(match[1])
            entries[name] = (match[2], [], [])
        elif match := re.match(r"^\s+--hash=sha256:([0-9a-f]{64})", line):
            entries[name][1].append(match[1])
        elif name and (match := re.match(r"^\s+#\s+(?:via\s+)?(-r \S+|[A-Za-z0-9][\w.-]*)$", line)):
            entries[name][2].append(match[1])
        elif line.strip() and not line.startswith(("#", " ")):
            raise AssertionError(f"requirements.lock: not a pin: {line!r}")
    return entries


def named(line: str) -> str:
    return pins.normal(Requirement(line).name)


def test_the_lock_pins_every_package_with_its_hashes() -> None:
    entries = lock_entries()
    assert len(entries) > 50, "the lock holds the transitive packages too"
    for needed in ("jinja2", "markupsafe", "alembic", "sqlalchemy", "traitlets", "ipython"):
        assert needed in entries and "jupyter-client" in entries, needed
    unhashed = [name for name, (_, hashes, _) in entries.items() if not hashes]
    assert not unhashed, f"requirements.lock: no hash for {unhashed}"
    assert "--generate-hashes" in pins.LOCK.read_text(encoding="utf-8").split("\n\n", 1)[0]


def test_the_lock_is_compiled_from_requirements_in_as_it_is() -> None:
    """What the lock says it holds for requirements.in is requirements.in, at its pins: an
    edited requirements.in without `make lock` fails here."""
    entries = lock_entries()
    wanted = {named(line) for group in pins.groups().values() for line in group}
    from_in = {name for name, (_, _, via) in entries.items() if "-r requirements.in" in via}
    assert from_in == wanted, (sorted(wanted - from_in), sorted(from_in - wanted))
    for name, pin in pins.pins().items():
        if name != "torch":
            assert entries[name][0] == pin.split("==")[1], (pin, entries[name][0])


def test_torch_is_out_of_the_lock_and_what_it_needs_is_in_it() -> None:
    entries = lock_entries()
    assert "torch" not in entries and not [n for n in entries if n.startswith(CUDA_ONLY)]
    pin = pins.pins()["torch"]
    torch = metadata.distribution("torch")
    assert torch.version.split("+")[0] == pin.split("==")[1], "make venv installs the pin"
    needs = {
        named(text)
        for text in torch.requires or []
        if (req := Requirement(text)).marker is None or req.marker.evaluate({"extra": ""})
    }
    needs = {n for n in needs if not n.startswith(CUDA_ONLY)}
    assert needs and needs <= set(entries), sorted(needs - set(entries))
    assert needs <= {named(line) for line in pins.groups()["torch"]}, "listed in requirements.in"


def test_nothing_in_the_lock_needs_torch() -> None:
    """The lock installs over torch with --require-hashes: none of it may ask for torch."""
    for name in lock_entries().keys() - REMOVED_AFTER_INSTALL:
        for text in metadata.distribution(name).requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                assert named(text) != "torch", f"{name} needs torch"


def test_this_environment_runs_the_lock() -> None:
    wrong = {}
    for name, (version, _, _) in lock_entries().items():
        if name in REMOVED_AFTER_INSTALL:
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (installed, version)
    assert not wrong, f"installed vs locked (run make venv): {wrong}"


@pytest.mark.parametrize("group", ["course", "grader", "dev"])
def test_pyproject_groups_say_what_requirements_in_pins(group: str) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    ranges = {named(r): Requirement(r) for r in project["optional-dependencies"][group]}
    listed = {named(line) for line in pins.groups()[group]} | (
        {"torch"} if group == "course" else set()
    )
    assert set(ranges) == listed, (sorted(set(ranges) - listed), sorted(listed - set(ranges)))
    versions = {name: (pins.pins().get(name) or "").partition("==")[2] for name in listed}
    versions = {n: v or lock_entries()[n][0] for n, v in versions.items()}
    outside = {n: (v, str(ranges[n].specifier)) for n, v in versions.items()
               if not ranges[n].specifier.contains(v)}  # fmt: skip
    assert not outside, outside
    assert project["dependencies"] == [], "Colab installs the helpers with --no-deps"
