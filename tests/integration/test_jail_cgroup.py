"""Where a jail's cgroup comes from (cgroup v2 delegated subtree, v1, systemd, none), read
from /proc/self/cgroup and /proc/self/mountinfo; and, on this machine, a real one: its bounds,
the kill inside it, and its removal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.jail import cgroup

V1_CGROUP = "4:memory:/process_api/abc\n8:pids:/\n0::/\n"


def mountinfo(root: Path, v1: bool = True, v2_root: str = "/") -> str:
    lines = [f"41 31 0:38 {v2_root} {root / 'unified'} rw,relatime - cgroup2 cgroup2 rw"]
    if v1:
        lines += [
            f"35 31 0:32 / {root / 'memory'} rw,relatime - cgroup cgroup rw,memory",
            f"39 31 0:36 / {root / 'pids'} rw,relatime - cgroup cgroup rw,pids",
        ]
    return "\n".join(lines) + "\n"


def test_v1_children_of_the_graders_own_memory_and_pids_cgroups(tmp_path: Path) -> None:
    (tmp_path / "memory" / "process_api" / "abc").mkdir(parents=True)
    (tmp_path / "pids").mkdir()
    (tmp_path / "unified").mkdir()
    chosen, why = cgroup.choose(V1_CGROUP, mountinfo(tmp_path), systemd=False)
    assert why == "" and chosen is not None and chosen.kind == "v1"
    assert chosen.parents == (tmp_path / "memory" / "process_api" / "abc", tmp_path / "pids")


def test_v2_the_grader_moves_into_a_leaf_of_its_delegated_cgroup(tmp_path: Path) -> None:
    mine = tmp_path / "unified" / "user.slice" / "grader.scope"
    mine.mkdir(parents=True)
    (mine / "cgroup.controllers").write_text("cpu memory pids\n")
    (mine / "cgroup.subtree_control").write_text("")
    (mine / "cgroup.procs").write_text(f"{os.getpid()}\n")
    chosen, why = cgroup.choose("0::/user.slice/grader.scope\n", mountinfo(tmp_path, v1=False))
    assert why == "" and chosen is not None and chosen.kind == "v2" and chosen.parents == (mine,)
    assert (mine / cgroup.LEAF / "cgroup.procs").read_text() == str(os.getpid())
    assert (mine / "cgroup.subtree_control").read_text() == "+memory +pids"
    # a worker started from the leaf uses the same parent
    (mine / "cgroup.subtree_control").write_text("memory pids\n")
    path = f"0::/user.slice/grader.scope/{cgroup.LEAF}\n"
    worker, _ = cgroup.choose(path, mountinfo(tmp_path, v1=False))
    assert worker is not None and worker.parents == (mine,)


def test_v2_a_cgroup_shared_with_other_processes_is_not_taken(tmp_path: Path) -> None:
    mine = tmp_path / "unified" / "session.scope"
    mine.mkdir(parents=True)
    (mine / "cgroup.controllers").write_text("memory pids\n")
    (mine / "cgroup.subtree_control").write_text("")
    (mine / "cgroup.procs").write_text(f"1\n{os.getpid()}\n")
    chosen, why = cgroup.choose("0::/session.scope\n", mountinfo(tmp_path, v1=False), False)
    assert chosen is None and "holds other processes" in why
    assert not (mine / cgroup.LEAF).exists()  # nothing touched
    assert (mine / "cgroup.subtree_control").read_text() == ""


def test_systemd_scopes_where_nothing_else_works(tmp_path: Path) -> None:
    (tmp_path / "unified").mkdir()
    chosen, _ = cgroup.choose("0::/\n", mountinfo(tmp_path, v1=False), systemd=True)
    assert chosen is not None and chosen.kind == "systemd"
    scope = cgroup.JailCgroup(chosen, (), "autograder-jail-x", 2**30, 64)
    prefix = scope.prefix()
    assert prefix[0] == "systemd-run" and "--property=MemoryMax=1073741824" in prefix
    assert "--property=TasksMax=64" in prefix and prefix[-1] == "--"
    none, why = cgroup.choose("0::/\n", mountinfo(tmp_path, v1=False), systemd=False)
    assert none is None and "no cgroup v2" not in why and "systemd does not run" in why


# ---- a real cgroup, where this machine gives one --------------------------------------------


@pytest.fixture
def hierarchy() -> cgroup.Hierarchy:
    where = cgroup.hierarchy()
    if where is None or where.kind == "systemd":
        pytest.skip(f"no cgroup folder here ({cgroup.why_not() or 'systemd scopes'})")
    return where


HOLD = """
import os, sys
held = []
for i in range(int(sys.argv[1])):
    fd = os.memfd_create(f"m{i}")
    for _ in range(16):
        os.write(fd, b"x" * 2**20)
    held.append(fd)
print("held", len(held) * 16, "MiB", flush=True)
"""


def run_in(cg: cgroup.JailCgroup, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([*cg.prefix(), *argv], capture_output=True, text=True, timeout=60)


def test_memory_in_memfd_files_counts_and_the_jail_is_stopped(
    hierarchy: cgroup.Hierarchy,
) -> None:
    cg = hierarchy.make(256 * 2**20, 64)
    try:
        cg.mark()
        within = run_in(cg, sys.executable, "-c", HOLD, "4")  # 64 MiB
        assert within.returncode == 0 and "held 64 MiB" in within.stdout
        assert not cg.over_since_mark()
        beyond = run_in(cg, sys.executable, "-c", HOLD, "40")  # 640 MiB, in no one's RSS
        assert beyond.returncode == -9 and cg.over_since_mark()
        assert cg.peak() <= 256 * 2**20
    finally:
        cg.release()
    assert not any(f.exists() for f in cg.folders)


def test_a_cgroup_bounds_its_processes_and_release_kills_what_is_left(
    hierarchy: cgroup.Hierarchy,
) -> None:
    cg = hierarchy.make(256 * 2**20, 8)
    code = (
        "import subprocess\nprocs = []\ntry:\n    for _ in range(30):\n"
        "        procs.append(subprocess.Popen(['sleep', '60'], stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL))\nexcept OSError:\n    pass\n"
        "print(len(procs), flush=True)\n"
    )
    try:
        done = run_in(cg, sys.executable, "-c", code)
        assert 0 < int(done.stdout) < 8
        assert cg.pids(), "the sleepers should still be in the cgroup"
    finally:
        cg.release()
    assert not cg.pids() and not any(f.exists() for f in cg.folders)


def test_without_a_cgroup_a_jail_refuses_memfd_and_has_lower_limits(tmp_path: Path) -> None:
    """Where no cgroup can be had, nothing would count memfd pages: memfd_create is refused,
    and a probe's jail gets at most 256 open files and 128 processes."""
    from autograder.jail.jail import Jail

    chosen, why = cgroup.hierarchy(), cgroup.why_not()
    cgroup.use(None, "none, for this test")
    code = (
        "import errno, os, resource\n"
        "try:\n    os.memfd_create('x')\n    made = 'made'\n"
        "except OSError as err:\n    made = errno.errorcode[err.errno]\n"
        "limit = lambda name: resource.getrlimit(getattr(resource, name))[0]\n"
        "print(made, limit('RLIMIT_NOFILE'), limit('RLIMIT_NPROC'))\n"
    )
    try:
        jail = Jail.from_settings()
        launch = jail.launch([jail.python, "-c", code], tmp_path, probes=True)
        try:
            done = subprocess.run(
                launch.argv, pass_fds=launch.pass_fds, capture_output=True, text=True, timeout=60
            )
        finally:
            launch.release()
    finally:
        cgroup.use(chosen, why)
    assert launch.cgroup is None
    assert done.stdout.split() == ["EPERM", "256", "128"], done.stderr
