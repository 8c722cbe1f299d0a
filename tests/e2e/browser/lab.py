"""A throwaway JupyterLab server for the browser tests, and the Chromium it is driven with."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "build" / "screenshots"

# User settings for the throwaway lab: no news or update checks (the machine is offline),
# and every cell kept in the DOM so that outputs can be inspected without scrolling.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "checkForUpdates": False,
        "fetchNews": "false",
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def jupyter_bin() -> Path:
    """The project's jupyter: .venv/bin/jupyter, else the one beside this interpreter."""
    for candidate in (ROOT / ".venv" / "bin" / "jupyter", Path(sys.executable).parent / "jupyter"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(
        "no jupyter executable in .venv/bin: run `make lab` or `make test` once"
    )


@dataclass
class LabServer:
    """A running `jupyter lab` on a loopback port with a random token."""

    process: subprocess.Popen
    port: int
    token: str
    log_path: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET") -> tuple[int, bytes]:
        request = urllib.request.Request(
            f"{self.base}/{path.lstrip('/')}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 20.0) -> None:
        """Shut down through the REST API (kernels first), then signals if it lingers."""
        if self.process.poll() is None:
            try:
                self.api("api/shutdown", method="POST")
            except (urllib.error.URLError, OSError):
                pass
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait()


def start_lab(home: Path, timeout: float = 90.0) -> LabServer:
    """Start JupyterLab from the project root with its settings and runtime under `home`."""
    for name in ("settings", "runtime", "workspaces", "config", "data"):
        (home / name).mkdir(parents=True, exist_ok=True)
    for rel, values in LAB_SETTINGS.items():
        target = home / "settings" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))

    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the test process sets Agg; the kernel must draw inline
    env.update(
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        PATH=str(jupyter_bin().parent) + os.pathsep + env.get("PATH", ""),
    )
    port, token = free_port(), secrets.token_hex(24)
    log_path = home / "jupyter-lab.log"
    command = [
        str(jupyter_bin()),
        "lab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={ROOT}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # containers and CI machines often run as root
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = LabServer(process, port, token, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}:\n{server.log()}")
        try:
            status, _ = server.api("api/status")
            if status == 200:
                return server
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    server.stop()
    raise TimeoutError(f"jupyter lab did not answer within {timeout:.0f} s:\n{server.log()}")


def stage_notebook(source: Path, folder: Path) -> Path:
    """Copy a notebook into `folder` (inside the project) so the lab's autosave never edits it."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    shutil.copy2(source, target)
    return target
