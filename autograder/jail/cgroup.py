"""One cgroup per jail: a memory bound that counts everything the jail holds, and a process bound.

RSS sums and rlimits do not bound a jail: pages held in `memfd_create` files, tmpfs or shared
memory are in no process's RSS, and RLIMIT_AS is per process (a probe that forks gets one
each). The kernel's memory cgroup charges all of it (anonymous memory, page cache, shmem,
memfd and tmpfs pages) to the cgroup of the process that touched it, and kills inside that
cgroup when it is full; the pids controller bounds the number of tasks.

Where the cgroups come from, first that works (`hierarchy()`, decided once per process):

- cgroup v2, a delegated subtree: the grader's own cgroup, when it may write there and has
  the memory and pids controllers. The grader moves itself into a leaf (`LEAF`) of it, enables
  the controllers for its children, and makes each jail's cgroup beside that leaf; a worker
  started by the grader finds the leaf and uses its parent. `systemd-run --user --scope -p
  Delegate=yes ...` starts the grader in such a subtree;
- cgroup v1: children of the grader's own memory and pids cgroups;
- systemd: each jail started in its own transient scope (`systemd-run --scope -p MemoryMax=...
  -p TasksMax=...`), where systemd runs;
- none: `hierarchy()` is None and `why_not()` says why; the grader says so and bounds what it
  can without. `AUTOGRADER_CGROUPS=off` in the environment asks for this (where cgroups
  misbehave); the report says so as well.

A jail's cgroup is made by the grader, under the grader's own cgroup (or by systemd, at the
grader's request), before the jail starts; the jail's first process joins it before it runs
anything (`JailCgroup.prefix`), so everything it starts is inside. The grader touches no
cgroup it did not make, and removes each one when its jail is gone (`release`; what is left at
exit is removed then).
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

OFF_VARIABLE = "AUTOGRADER_CGROUPS"  # "off": no cgroup, as where none can be had
LEAF = "autograder-grader"  # the v2 leaf the grading processes move into
PREFIX = "autograder-jail"  # every cgroup the grader makes is named so
# The jail's first process writes its own pid into each cgroup, then becomes the jail.
JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
_COUNTER = itertools.count()
_LOCK = threading.Lock()
_MADE: set[JailCgroup] = set()  # not released yet: removed at exit


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _fields(text: str) -> dict[str, int]:
    """'key value' lines (memory.events, memory.oom_control) as a dict."""
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            found[key] = int(value)
    return found


# ---- where this process is ------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    root: str  # the part of the hierarchy the mount shows (mountinfo's 4th field)
    point: Path
    kind: str  # "cgroup2", or the v1 controller ("memory", "pids")


def mounts(mountinfo: str) -> list[Mount]:
    """The cgroup mounts of /proc/self/mountinfo's text: v2, and v1's memory and pids."""
    found = []
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        parts, tail = left.split(), right.split()
        if len(parts) < 5 or len(tail) < 3:
            continue
        root, point = parts[3], Path(parts[4].replace("\\040", " "))
        if tail[0] == "cgroup2":
            found.append(Mount(root, point, "cgroup2"))
        elif tail[0] == "cgroup":
            options = tail[2].split(",")
            found += [Mount(root, point, c) for c in ("memory", "pids") if c in options]
    return found


def own_paths(proc_cgroup: str) -> dict[str, str]:
    """/proc/self/cgroup's text as {"cgroup2" or controller: path}."""
    found = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            found["cgroup2"] = path
        for c in controllers.split(","):
            if c in ("memory", "pids"):
                found[c] = path
    return found


def folder(mount: Mount, path: str) -> Path | None:
    """Where the cgroup `path` is in the file system, or None when this mount does not show it."""
    root = mount.root.rstrip("/")
    if root and not (path == root or path.startswith(root + "/")):
        return None
    return mount.point / path[len(root) :].lstrip("/")


# ---- the hierarchies --------------------------------------------------------------------------


@dataclass(frozen=True)
class Hierarchy:
    """Where this process makes the cgroups of its jails."""

    kind: str  # "v2", "v1" or "systemd"
    parents: tuple[Path, ...] = ()  # v2: one folder; v1: the memory, then the pids folder
    user: bool = False  # systemd: the user's manager (not root)

    def describe(self) -> str:
        where = ", ".join(str(p) for p in self.parents) or "transient scopes"
        return f"cgroup {self.kind} ({where})"

    def make(self, memory_bytes: int, processes: int) -> JailCgroup:
        """A new cgroup with these bounds (raises OSError when it cannot be made)."""
        count = next(_COUNTER)
        if count == 0:
            self.sweep()
        name = f"{PREFIX}-{os.getpid()}-{count}-{os.urandom(3).hex()}"
        if self.kind == "systemd":
            cgroup = JailCgroup(self, (), name)
        else:
            made: list[Path] = []
            try:
                for parent in self.parents:
                    (parent / name).mkdir(mode=0o755)
                    made.append(parent / name)
            except OSError:
                for path in made:
                    _rmdir(path)
                raise
            cgroup = JailCgroup(self, tuple(made), name)
        with _LOCK:
            _MADE.add(cgroup)
        try:
            cgroup.set_memory(memory_bytes)
            cgroup.set_processes(processes)
        except OSError:
            cgroup.release()
            raise
        return cgroup

    def sweep(self) -> None:
        """Remove the empty cgroups that graders which are gone left here (killed before
        they could remove them): named by the grader, made more than a minute ago by a
        process that no longer exists, holding no process (the kernel refuses to remove any
        other)."""
        for parent in self.parents:
            try:
                entries = list(os.scandir(parent))
            except OSError:
                continue
            for entry in entries:
                parts = entry.name.removeprefix(PREFIX + "-").split("-")
                if not entry.name.startswith(PREFIX + "-") or not parts[0].isdigit():
                    continue
                try:
                    stale = entry.stat().st_mtime < time.time() - 60  # not one just made
                except OSError:
                    continue
                if stale and not os.path.exists(f"/proc/{parts[0]}") and entry.is_dir():
                    _rmdir(Path(entry.path))


@dataclass(eq=False)
class JailCgroup:
    """The cgroup(s) of one jail: its bounds, how its first process joins, what happened."""

    hierarchy: Hierarchy
    folders: tuple[Path, ...]  # v1: memory, pids; v2: one; systemd: () until `attach`
    name: str
    memory_bytes: int = 0
    processes: int = 0
    released: bool = False
    _baseline: int = field(default=0, repr=False)  # oom kills before the current request

    # ---- bounds -------------------------------------------------------------------------

    def set_memory(self, limit: int) -> None:
        """Bound everything the jail holds to `limit` bytes (swap included: none beyond)."""
        self.memory_bytes = int(limit)
        kind = self.hierarchy.kind
        if kind == "systemd":
            if self.folders:  # running: change the scope's property
                self._systemctl("set-property", "--runtime", f"{self.name}.scope",
                                f"MemoryMax={limit}")  # fmt: skip
            return
        memory = self.folders[0]
        if kind == "v2":
            _write(memory / "memory.max", str(limit))
            if (memory / "memory.swap.max").exists():
                _write(memory / "memory.swap.max", "0")
            return
        memsw = memory / "memory.memsw.limit_in_bytes"
        current = _read(memory / "memory.limit_in_bytes").strip()
        raising = current.isdigit() and int(current) < limit
        if raising and memsw.exists():  # memsw may never be below the limit
            _write(memsw, str(limit))
        _write(memory / "memory.limit_in_bytes", str(limit))
        if not raising and memsw.exists():
            _write(memsw, str(limit))

    def set_processes(self, count: int) -> None:
        self.processes = int(count)
        if self.hierarchy.kind == "systemd":
            return
        _write(self.folders[-1] / "pids.max", str(count))

    # ---- joining ------------------------------------------------------------------------

    def prefix(self) -> list[str]:
        """The start of the jail's command line: its first process joins the cgroup, then
        executes the rest (the same pid: every process of the jail starts inside)."""
        if self.hierarchy.kind == "systemd":
            user = ["--user"] if self.hierarchy.user else []
            return [
                "systemd-run", *user, "--scope", "--quiet", "--collect", f"--unit={self.name}",
                f"--property=MemoryMax={self.memory_bytes}", "--property=MemorySwapMax=0",
                f"--property=TasksMax={self.processes}", "--",
            ]  # fmt: skip
        files = [str(f / "cgroup.procs") for f in self.folders]
        return ["/bin/sh", "-c", JOIN, "sh", *files, "--"]

    def attach(self, pid: int | None) -> None:
        """systemd: find the scope's folder from the running jail's pid (others know theirs)."""
        if self.hierarchy.kind != "systemd" or self.folders or not pid:
            return
        path = own_paths(_read(Path(f"/proc/{pid}/cgroup"))).get("cgroup2", "")
        if path.endswith(f"/{self.name}.scope"):
            for mount in mounts(_read(Path("/proc/self/mountinfo"))):
                place = folder(mount, path) if mount.kind == "cgroup2" else None
                if place is not None and place.is_dir():
                    self.folders = (place,)
                    return

    # ---- what happened ------------------------------------------------------------------

    def oom_kills(self) -> int:
        """Processes the kernel killed in this jail for want of memory, so far."""
        if not self.folders:
            return 0
        memory = self.folders[0]
        if self.hierarchy.kind == "v1":
            values = _fields(_read(memory / "memory.oom_control"))
            if "oom_kill" in values:
                return values["oom_kill"]
            return values.get("under_oom", 0)
        return _fields(_read(memory / "memory.events")).get("oom_kill", 0)

    def mark(self) -> None:
        """Remember the kills so far: `over_since_mark` then says whether one followed."""
        self._baseline = self.oom_kills()

    def over_since_mark(self) -> bool:
        return self.oom_kills() > self._baseline

    def usage(self) -> int:
        """Bytes charged to the jail now (its pages in memory, page cache included)."""
        if not self.folders:
            return 0
        memory = self.folders[0]
        name = "memory.usage_in_bytes" if self.hierarchy.kind == "v1" else "memory.current"
        text = _read(memory / name).strip()
        return int(text) if text.isdigit() else 0

    def peak(self) -> int:
        """The most bytes the jail held at once, where the kernel keeps it (else 0)."""
        if not self.folders:
            return 0
        memory = self.folders[0]
        name = "memory.max_usage_in_bytes" if self.hierarchy.kind == "v1" else "memory.peak"
        text = _read(memory / name).strip()
        return int(text) if text.isdigit() else 0

    def pids(self) -> list[int]:
        found: set[int] = set()
        for place in self.folders:
            found |= {int(p) for p in _read(place / "cgroup.procs").split() if p.isdigit()}
        return sorted(found)

    # ---- the end ------------------------------------------------------------------------

    def release(self, wait: float = 5.0) -> None:
        """Kill what is left in the cgroup and remove it (the jail is over)."""
        if self.released:
            return
        self.released = True
        with _LOCK:
            _MADE.discard(self)
        if self.hierarchy.kind == "systemd":
            if self.pids():
                self._systemctl("kill", "--signal=SIGKILL", f"{self.name}.scope")
            return  # --collect: systemd removes the scope once it is empty
        deadline = time.monotonic() + wait
        while True:
            left = self.pids()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if not left:
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        for place in self.folders:
            _rmdir(place, deadline)

    def _systemctl(self, *args: str) -> None:
        user = ["--user"] if self.hierarchy.user else []
        subprocess.run(["systemctl", *user, *args], capture_output=True, timeout=30, check=False)


def _rmdir(path: Path, deadline: float = 0.0) -> None:
    """Remove an empty cgroup folder (its last tasks may take a moment to be gone)."""
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)


@atexit.register
def _release_all() -> None:
    with _LOCK:
        left = list(_MADE)
    for cgroup in left:
        cgroup.release(wait=1.0)


# ---- choosing -------------------------------------------------------------------------------

_CHOSEN: list[tuple[Hierarchy | None, str]] = []


def hierarchy() -> Hierarchy | None:
    """Where this process makes its jails' cgroups, or None (`why_not` says why)."""
    with _LOCK:
        if not _CHOSEN:
            _CHOSEN.append(choose())
        return _CHOSEN[0][0]


def why_not() -> str:
    """Why no cgroup can be had here ("" when one can)."""
    hierarchy()
    return _CHOSEN[0][1]


def use(chosen: Hierarchy | None, reason: str = "") -> None:
    """From now on, make this process's jails' cgroups in `chosen` (None: none, for `reason`)."""
    with _LOCK:
        _CHOSEN[:] = [(chosen, reason)]


def choose(
    proc_cgroup: str | None = None,
    mountinfo: str | None = None,
    systemd: bool | None = None,
) -> tuple[Hierarchy | None, str]:
    """The first hierarchy that works here, and why the others did not."""
    if os.environ.get(OFF_VARIABLE, "").lower() in ("off", "0", "no", "false"):
        return None, f"turned off by {OFF_VARIABLE}={os.environ[OFF_VARIABLE]}"
    if proc_cgroup is None:
        proc_cgroup = _read(Path("/proc/self/cgroup"))
    if mountinfo is None:
        mountinfo = _read(Path("/proc/self/mountinfo"))
    own, found = own_paths(proc_cgroup), mounts(mountinfo)
    reasons = []
    for attempt in (_v2, _v1):
        chosen, why = attempt(own, found)
        if chosen is not None:
            return chosen, ""
        reasons.append(why)
    if systemd is None:
        systemd = os.path.isdir("/run/systemd/system") and shutil.which("systemd-run") is not None
    if systemd:
        return Hierarchy("systemd", user=os.geteuid() != 0), ""
    reasons.append("systemd does not run here")
    return None, "; ".join(reasons)


def _v2(own: dict[str, str], found: list[Mount]) -> tuple[Hierarchy | None, str]:
    path = own.get("cgroup2")
    mount = next((m for m in found if m.kind == "cgroup2"), None)
    if path is None or mount is None:
        return None, "no cgroup v2 hierarchy"
    mine = folder(mount, path)
    if mine is None or not mine.is_dir():
        return None, "the cgroup v2 hierarchy does not show this process's cgroup"
    wanted = {"memory", "pids"}
    if mine.name == LEAF:  # the grader moved itself here: its parent holds the jails
        parent = mine.parent
        if wanted <= set(_read(parent / "cgroup.subtree_control").split()):
            return Hierarchy("v2", (parent,)), ""
        return None, f"{parent} does not enable memory and pids for its children"
    if not wanted <= set(_read(mine / "cgroup.controllers").split()):
        return None, "cgroup v2 without the memory and pids controllers for this process"
    if not os.access(mine, os.W_OK) or not os.access(mine / "cgroup.subtree_control", os.W_OK):
        return None, f"cgroup v2: {mine} is not delegated to this user"
    if wanted <= set(_read(mine / "cgroup.subtree_control").split()):
        return Hierarchy("v2", (mine,)), ""  # a root: it may hold processes and children
    others = [p for p in _read(mine / "cgroup.procs").split() if p != str(os.getpid())]
    if others:
        return None, f"cgroup v2: {mine} holds other processes (not a delegated subtree)"
    try:
        (mine / LEAF).mkdir(exist_ok=True)
        _write(mine / LEAF / "cgroup.procs", str(os.getpid()))
        _write(mine / "cgroup.subtree_control", "+memory +pids")
    except OSError as err:
        return None, f"cgroup v2: {mine} cannot be delegated ({err.strerror})"
    return Hierarchy("v2", (mine,)), ""


def _v1(own: dict[str, str], found: list[Mount]) -> tuple[Hierarchy | None, str]:
    parents = []
    for controller in ("memory", "pids"):
        mount = next((m for m in found if m.kind == controller), None)
        path = own.get(controller)
        if mount is None or path is None:
            return None, f"no cgroup v1 {controller} controller"
        place = folder(mount, path)
        if place is None or not place.is_dir():
            return None, f"cgroup v1 {controller}: this process's cgroup is not mounted"
        if not os.access(place, os.W_OK):
            return None, f"cgroup v1 {controller}: {place} is not writable by this user"
        parents.append(place)
    return Hierarchy("v1", tuple(parents)), ""
