"""JupyterLab in the venv has the extensions the course needs, enabled."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def _listing(*args: str) -> str:
    done = subprocess.run(
        [str(BIN / "jupyter"), *args], capture_output=True, text=True, timeout=120, check=True
    )
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def test_nbgrader_and_widget_manager_labextensions_are_enabled() -> None:
    text = _listing("labextension", "list")
    for name in ("@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager"):
        line = next((ln for ln in text.splitlines() if name in ln), "")
        assert "enabled" in line and "OK" in line, f"{name} missing or disabled:\n{text}"


def test_formgrader_server_extension_is_enabled() -> None:
    text = _listing("server", "extension", "list")
    assert re.search(r"nbgrader\.server_extensions\.formgrader\s+enabled", text), text
