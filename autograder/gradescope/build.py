"""autograder.zip for Gradescope: the grader, the chosen notebooks' masters, a locked environment.

The zip holds, at its root (Gradescope unpacks it into /autograder/source):

    setup.sh          run once when Gradescope builds the image (templates/gradescope/)
    run_autograder    run for every submission (templates/gradescope/)
    gradescope.json   the notebooks that count, the limits, who sees the tests
    requirements.lock the course's pinned packages but the test tools, and all they need, at
                      the versions this environment runs (torch as PyTorch's CPU build:
                      Gradescope's machines have no GPU)
    autograder/       the grading package, checks and probes included
    attention_course/ the course helpers the notebooks import
    solutions/        the masters of the chosen notebooks only
    data/             the tiny Shakespeare, when a chosen notebook trains on it
"""

from __future__ import annotations

import json
import platform
import zipfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from autograder.course import helpers
from autograder.course.pins import pins
from autograder.model.course import InputError, grader_hash, load_masters
from autograder.model.notebook_io import source
from autograder.model.paths import ROOT
from autograder.model.settings import Limits

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "gradescope"
SCRIPTS = ("setup.sh", "run_autograder")
CONFIG = "gradescope.json"
LOCK = "requirements.lock"
PYTHON = "3.11"
IMAGE = "Ubuntu 22.04"
# requirements.in's groups the grader runs on (not dev: tests and lint, never on Gradescope).
GRADER_GROUPS = ("course", "grader", "torch")
# Only on machines with an NVIDIA GPU: never in the CPU build's closure.
CUDA_ONLY = ("nvidia-", "triton")
# Asked for by an extra, removed by the Makefile: it slows every Jupyter start, nothing uses it.
LEFT_OUT = ("rfc3987-syntax",)
# Gradescope's containers: Linux on x86-64, CPython 3.11 (what environment markers see there).
TARGET = {
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "implementation_name": "cpython",
    "python_version": PYTHON,
    "python_full_version": f"{PYTHON}.0",
    "extra": "",
}


@dataclass
class Lock:
    lines: list[str]
    warnings: list[str] = field(default_factory=list)


def _name(text: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(text)


def grader_packages() -> list[str]:
    """The course's pinned packages less those only the tests use (requirements.in's dev
    group): what the grader runs on."""
    return [pin.split("==")[0] for pin in pins(*GRADER_GROUPS).values()]


def lock(roots: list[str] | None = None) -> Lock:
    """`name==version` for every package `roots` (default: `grader_packages`) need on
    Gradescope, the extras they ask for included, at this environment's versions; torch as
    `+cpu`. setup.sh installs exactly these (pip --no-deps). A package this environment lacks
    is left out, with a warning, unless the course removes it on purpose (`LEFT_OUT`)."""
    from packaging.requirements import Requirement

    found: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    warnings: list[str] = []
    todo: list[tuple[str, str]] = [(name, "") for name in roots or grader_packages()]
    while todo:
        name, extra = todo.pop()
        name = _name(name)
        if (name, extra) in seen or name.startswith(CUDA_ONLY) or name in LEFT_OUT:
            continue
        seen.add((name, extra))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            warnings.append(f"{name} is needed on Gradescope but not installed here: left out")
            continue
        found[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({**TARGET, "extra": extra}):
                todo += [(req.name, e) for e in ("", *sorted(req.extras))]
    lines = []
    for name, version in sorted(found.items()):
        pin = f"{version.split('+')[0]}+cpu" if name == "torch" else version
        lines.append(f"{name}=={pin}")
    return Lock(lines, warnings)


def _tree(folder: Path) -> list[Path]:
    """The files of a package folder, without bytecode, caches or hidden files."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and p.suffix != ".pyc"
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def needs_data(notebooks: list[str]) -> bool:
    """Whether a chosen notebook imports the data set's helper (it trains on the text)."""
    package = ROOT / helpers.PACKAGE
    masters = load_masters(notebooks=tuple(notebooks))
    code = [source(c) for m in masters.values() for c in m.nb.cells if c.cell_type == "code"]
    return "data.py" in helpers.needed(code, package)


def data_file() -> Path | None:
    """The checked tiny Shakespeare of this installation, or None."""
    from attention_course.data import DataUnavailable, locate

    try:
        return locate(download=False)
    except DataUnavailable:
        return None


def settings_advice(n_notebooks: int, limits: Limits) -> dict[str, int]:
    """What to set in Gradescope's Autograder Settings for these limits."""
    return {
        "timeout_seconds": int(n_notebooks * limits.timeout + limits.gradescope.start_seconds),
        "memory_mb": 2 * limits.memory_mb
        + limits.gradescope.grader_mb,  # a kernel and a probe side by side
    }


def config(notebooks: list[str], limits: Limits, visibility: str) -> dict:
    return {
        "notebooks": notebooks,
        "limits": {
            "timeout": limits.timeout,
            "cell_timeout": limits.cell_timeout,
            "memory_mb": limits.memory_mb,
        },
        "visibility": visibility,
        "image": IMAGE,
        "python": PYTHON,
        "gradescope_settings": settings_advice(len(notebooks), limits),
        "made_with": {"python": platform.python_version(), "grader": grader_hash()[:16]},
    }


def _add(zf: zipfile.ZipFile, arcname: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16  # a regular file with these permissions
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build(
    notebooks: list[str], out: Path, limits: Limits, visibility: str = "visible"
) -> tuple[dict, Lock]:
    """Write the autograder zip to `out`; InputError when something it needs is missing."""
    masters = load_masters(notebooks=tuple(notebooks))
    missing = [nb for nb in notebooks if nb not in masters]
    if missing:
        raise InputError(f"no master in solutions/ for {', '.join(missing)}")
    data = None
    if needs_data(notebooks):
        data = data_file()
        if data is None:
            raise InputError(
                "a chosen notebook trains on the tiny Shakespeare, which is not here: put it "
                "at data/tinyshakespeare.txt or set $TINYSHAKESPEARE (Gradescope's jail has "
                "no network to download it)"
            )
    locked = lock()
    settings = config(notebooks, limits, visibility)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.part")
    with zipfile.ZipFile(partial, "w") as zf:
        for script in SCRIPTS:
            _add(zf, script, (TEMPLATES / script).read_bytes(), 0o755)
        _add(zf, CONFIG, (json.dumps(settings, indent=2) + "\n").encode())
        header = "# The grader's packages at the versions it was built with (autograder.zip).\n"
        _add(zf, LOCK, (header + "\n".join(locked.lines) + "\n").encode())
        for package in ("autograder", helpers.PACKAGE):
            for path in _tree(ROOT / package):
                _add(zf, path.relative_to(ROOT).as_posix(), path.read_bytes())
        for notebook in notebooks:
            _add(zf, f"solutions/{notebook}", masters[notebook].path.read_bytes())
        if data is not None:
            _add(zf, "data/tinyshakespeare.txt", data.read_bytes())
    partial.replace(out)
    return settings, locked
