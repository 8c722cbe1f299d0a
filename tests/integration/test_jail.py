"""Hostile student code against the jail, from a jailed kernel and from a jailed probe child.

Every attack is run from both places; each test asserts that the attack failed and that the
honest path still works in the same jail (the kernel computes and reads the data set; a
correct answer next to the attack still probes to full marks). One kernel notebook carries
every attack as a cell; the probe child runs each attack in an answer cell and reports the
outcome through the error text of the answer's function. The jail's bounds are checked from
inside a kernel and a probe too: the seccomp filter's answers (against the same calls made
outside a jail), the open file descriptors, the cgroup (its bounds read as the grader removes
it, and memory held in memfd files or by forked processes stopping the jail), and a forged
progress mark that never reaches the page.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.checks import spec_for
from autograder.jail.jail import Jail, JailUnavailable, require_bwrap
from autograder.model.course import load_masters
from autograder.model.paths import ROOT, SOLUTIONS
from autograder.worker.execute import KernelRunner
from autograder.worker.judge import score_answers
from autograder.worker.sandbox import ProbeJob, Sandbox
from tests.corpus import hostile

NOTEBOOK = hostile.course_notebooks()[0]
MASTER = load_masters()[NOTEBOOK]
GID = list(MASTER.graded)[0]
SOLUTION = hostile.solutions(NOTEBOOK)[GID]
FUNCTION = spec_for(GID).names[0]
TOKEN = secrets.token_hex(6)
SECRET_VAR, SECRET = "GRADER_SECRET_TOKEN", f"s3cret-{TOKEN}"
SITE = Path(sysconfig.get_paths()["purelib"])


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What the attacks aim at: another student's file, a listening socket, a host process,
    a secret in the grader's environment; and a fingerprint of the grader's files."""
    folder = tmp_path_factory.mktemp("submissions")
    victim = folder / "other_student" / NOTEBOOK
    victim.parent.mkdir()
    victim.write_text(f"the other student's answers {TOKEN}")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    sleeper = subprocess.Popen(["sleep", "300"])
    os.environ[SECRET_VAR] = SECRET
    out = tmp_path_factory.mktemp("out")  # what OUT holds: grades and the states' key
    (out / "grades.csv").write_text("student,notebook,score,max_score,status\n")
    (out / ".state").mkdir()
    (out / ".state" / "key").write_bytes(secrets.token_bytes(32))
    home = Path.home() / f".grader-test-{TOKEN}"
    home.write_text(f"the instructor's file {TOKEN}")
    state = {
        "out": str(out),
        "home": str(home),
        "victim": str(victim),
        "port": listener.getsockname()[1],
        "sleep_pid": sleeper.pid,
        "solutions": str(next(SOLUTIONS.glob("*.ipynb"))),
        "fingerprint": fingerprint(),
        "sleeper": sleeper,
    }
    yield state
    home.unlink()
    os.environ.pop(SECRET_VAR, None)
    sleeper.kill()
    sleeper.wait()
    listener.close()


def fingerprint() -> str:
    """The grader's code and the venv's site-packages listing."""
    h = hashlib.sha256()
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        h.update(path.read_bytes())
    h.update("\n".join(sorted(os.listdir(SITE))).encode())
    return h.hexdigest()


def attacks(host: Any) -> dict[str, str]:
    """name -> a function body that returns True when the attack got through (or raises)."""
    big = f"/tmp/big-{TOKEN}"
    return {
        "read the solutions": f"return len(open({host['solutions']!r}).read()) > 0",
        "read another student's file": f"return {TOKEN!r} in open({host['victim']!r}).read()",
        "read or write OUT": read_or_write(
            f"{host['out']}/.state/key", f"{host['out']}/grades.csv"
        ),
        "read or write the instructor's home": read_or_write(
            host["home"], f"{Path(host['home']).parent}/.written-{TOKEN}"
        ),
        "import the grader's checks": "import autograder.checks\nreturn True",
        "edit a module of the grader": (
            f"open({str(ROOT / 'autograder' / 'run' / 'grade.py')!r}, 'a')"
            ".write('# x\\n')\nreturn True"
        ),
        "drop a .pth into the venv": (
            f"open({str(SITE / f'zz-{TOKEN}.pth')!r}, 'w').write('import os\\n')\nreturn True"
        ),
        "read a secret of the grader's environment": (
            "import os\n"
            f"found = {SECRET!r} in repr(dict(os.environ))\n"
            "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n"
            f"        found |= {SECRET!r}.encode() in open(f'/proc/{{pid}}/environ', 'rb').read()\n"
            "    except OSError:\n"
            "        pass\n"
            "return found"
        ),
        "connect to the host": (
            "import socket\n"
            f"socket.create_connection(('127.0.0.1', {host['port']}), timeout=3).close()\n"
            "return True"
        ),
        "see the grader's processes": (
            "import os\n"
            "seen = False\n"
            "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n"
            "        seen |= b'test_jail.py' in open(f'/proc/{pid}/cmdline', 'rb').read()\n"
            "    except OSError:\n"
            "        pass\n"
            "return seen"
        ),
        "kill a host process": f"import os\nos.kill({host['sleep_pid']}, 9)\nreturn True",
        "fill the disk with 200 MB": (
            f"with open({big!r}, 'wb') as f:\n"
            "    for _ in range(200):\n"
            "        f.write(b'x' * 2**20)\n"
            "return True"
        ),
        "escape through a symlink in the scratch": (
            "import os\n"
            f"os.symlink('/', '/tmp/up-{TOKEN}')\n"
            f"return len(open('/tmp/up-{TOKEN}' + {host['solutions']!r}).read()) > 0"
        ),
        "gain privileges": (
            "import ctypes\n"
            "libc = ctypes.CDLL(None)\n"
            "return libc.unshare(0x10000000) == 0 or libc.setuid(0) == 0"
        ),
    }


def read_or_write(read: str, write: str) -> str:
    """An attack body: True when `read` can be read or `write` can be written."""
    return (
        "got = False\n"
        "try:\n"
        f"    got |= len(open({read!r}, 'rb').read()) > 0\n"
        "except OSError:\n"
        "    pass\n"
        "try:\n"
        f"    open({write!r}, 'a').write('x')\n"
        "    got = True\n"
        "except OSError:\n"
        "    pass\n"
        "return got"
    )


def attack_cell(body: str) -> str:
    """Run the attack; `_verdict` says whether it got through."""
    return (
        "def _attack():\n" + textwrap.indent(body, "    ") + "\ntry:\n"
        "    _verdict = 'ESCAPED' if _attack() else 'blocked: no effect'\n"
        "except BaseException as _err:\n"
        "    _verdict = f'blocked: {type(_err).__name__}: {_err}'[:120]\n"
    )


ATTACKS = list(attacks(defaultdict(str)))


# ---- from the kernel ---------------------------------------------------------------------

HONEST = """
import torch
from attention_course.data import load_text
print("honest", float(torch.arange(4.0).sum()), len(load_text(download=False)))
"""


@pytest.fixture(scope="module")
def runner() -> KernelRunner:
    runner = KernelRunner(Jail.from_settings())
    yield runner
    runner.close()


def run(runner: KernelRunner, *cells: str, timeout: float = 60) -> Any:
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    return runner.execute(nb, timeout=timeout, cell_timeout=timeout, memory_bytes=2**31)


def text(cell: Any) -> str:
    return "".join(o.get("text", "") + o.get("evalue", "") for o in cell.outputs)


@pytest.fixture(scope="module")
def kernel_verdicts(host: Any, runner: KernelRunner) -> dict[str, str]:
    names = list(attacks(host))
    cells = [attack_cell(body) + "print(_verdict)" for body in attacks(host).values()]
    done = run(runner, HONEST, *cells)
    assert done.status == "ok", done.detail
    assert text(done.notebook.cells[0]).strip() == "honest 6.0 1115394"
    return {n: text(c).strip() for n, c in zip(names, done.notebook.cells[1:], strict=True)}


@pytest.mark.slow  # a real jail
@pytest.mark.parametrize("attack", ATTACKS)
def test_the_kernel_cannot(attack: str, kernel_verdicts: dict[str, str]) -> None:
    assert kernel_verdicts[attack].startswith("blocked"), kernel_verdicts[attack]


@pytest.mark.slow  # a real jail
def test_the_kernel_sees_only_its_view_without_privileges(runner: KernelRunner) -> None:
    cell = (
        "import os\n"
        f"print(sorted(os.listdir({str(ROOT)!r})))\n"
        "print(os.getuid() != 0, 'JPY_PARENT_PID' in os.environ, os.environ['HOME'])\n"
        "status = dict(line.split(':', 1) for line in open('/proc/self/status'))\n"
        "print(status['CapEff'].strip(), status['NoNewPrivs'].strip())\n"
    )
    done = run(runner, cell, HONEST)
    assert text(done.notebook.cells[0]).splitlines() == [
        "['.venv']",
        "True False /tmp",
        "0000000000000000 1",
    ]
    assert "honest 6.0" in text(done.notebook.cells[1])


def sleepers(arg: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", arg]]


DAEMON = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{arg}"])
    os._exit(0)
def _daemons():
    found = 0
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            found += open(f"/proc/{{p}}/cmdline", "rb").read() == b"sleep\\x00{arg}\\x00"
        except OSError:
            pass
    return found
for _ in range(100):
    if _daemons():
        break
    time.sleep(0.05)
print("daemons", _daemons())
"""


@pytest.mark.slow  # a real jail
def test_a_double_forked_daemon_dies_with_the_kernel(runner: KernelRunner) -> None:
    arg = f"{600 + secrets.randbelow(1000)}.{secrets.randbelow(1000)}"
    done = run(runner, DAEMON.format(arg=arg), HONEST)
    assert "daemons 1" in text(done.notebook.cells[0])  # it ran, in the jail
    assert "honest 6.0" in text(done.notebook.cells[1])
    time.sleep(0.2)
    assert sleepers(arg) == []


@pytest.mark.slow  # a real jail
def test_flooding_the_shared_folder_stops_the_kernel_and_leaves_nothing(
    runner: KernelRunner,
) -> None:
    flood = (
        "import os, sys\n"
        "folder = os.path.dirname(sys.argv[sys.argv.index('-f') + 1])\n"
        "for i in range(8):\n"
        "    with open(os.path.join(folder, f'f{i}'), 'wb') as f:\n"
        "        for _ in range(40):\n"
        "            f.write(b'x' * 2**20)\n"
    )
    done = run(runner, flood, HONEST)
    assert done.status == "error" and "writing too much" in done.detail
    assert not list(Path("/tmp").glob("kernel-*/f0"))  # its folder is gone
    assert "honest 6.0" in text(run(runner, HONEST).notebook.cells[0])  # the next is fine


# ---- from a probe child ------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory, host: Any) -> Sandbox:
    box = Sandbox(5, 512 * 2**20, tmp_path_factory.mktemp("probes"), Jail.from_settings())
    box.start()
    yield box
    box.close()


def probe(sandbox: Sandbox, answer: str) -> Any:
    job = ProbeJob(GID, MASTER.spec_module, MASTER.setup, [(GID, answer)], notebook=NOTEBOOK)
    return sandbox.probe(job, spec_for(GID).cases())


def full_marks(sandbox: Sandbox, answer: str) -> bool:
    """The answer cell, probed in the sandbox's current jail, earns every point."""
    spec = spec_for(GID)
    job = ProbeJob(GID, MASTER.spec_module, MASTER.setup, [(GID, answer)], notebook=NOTEBOOK)
    cases = spec.cases()
    outcome = sandbox.probe(job, cases)
    return (
        outcome.observed is not None
        and spec.evaluate(cases, outcome.observed).score == (MASTER.graded[GID])
    )


@pytest.mark.slow  # a real jail
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_probe_child_cannot(attack: str, sandbox: Sandbox, host: Any) -> None:
    body = attacks(host)[attack]
    reveal = f"def {FUNCTION}(*args):\n    raise RuntimeError(_verdict)\n"
    outcome = probe(sandbox, attack_cell(body) + reveal)
    assert outcome.observed is not None, outcome.problem
    verdicts = [v for k, v in outcome.observed.items() if k.endswith("!")]
    assert verdicts and all(v.startswith("RuntimeError: blocked") for v in verdicts), verdicts
    assert full_marks(sandbox, attack_cell(body) + SOLUTION)  # the honest path, same attack


@pytest.mark.slow  # a real jail
def test_a_daemon_of_a_probe_child_does_not_survive_it(sandbox: Sandbox) -> None:
    arg = f"{600 + secrets.randbelow(1000)}.{secrets.randbelow(1000)}"
    assert full_marks(sandbox, DAEMON.format(arg=arg) + SOLUTION)
    time.sleep(0.2)
    assert sleepers(arg) == []


@pytest.mark.slow  # a real jail
def test_flooding_a_probes_shared_folder_stops_its_jail_and_leaves_nothing(
    sandbox: Sandbox,
) -> None:
    flood = (
        "import os, time\n"  # os.walk follows no link (an earlier probe of this jail left one to /)
        "folder = next(d for d, _, files in os.walk('/tmp') if 'job.json' in files)\n"
        "for i in range(3):\n"
        "    with open(os.path.join(folder, f'f{i}'), 'wb') as f:\n"
        "        for _ in range(40):\n"
        "            f.write(b'x' * 2**20)\n"
        "time.sleep(60)\n"
    )
    timeout, sandbox.cell_timeout = sandbox.cell_timeout, 60  # the flood must stop it, not
    try:  # the clock of a busy machine
        outcome = probe(sandbox, flood + SOLUTION)
    finally:
        sandbox.cell_timeout = timeout
    assert outcome.observed is None and "wrote more than 96 MiB" in outcome.problem
    assert not list(sandbox.scratch.glob("**/f0"))  # its folder is gone
    assert full_marks(sandbox, SOLUTION)  # the next probe is fine


@pytest.mark.slow  # a real jail
def test_a_replaced_probe_returns_only_what_the_students_code_computes(
    sandbox: Sandbox,
) -> None:
    """The cell swaps the probe for one that reports 'perfect' data; without the references
    (not in the jail) it can only report what its own code computes: still wrong."""
    spec = spec_for(GID)
    cheat = f"""
import sys
def {FUNCTION}(x):
    return x * 0
def _forged(ns, cases):
    try:
        from autograder.checks import spec_for
        return {{k: spec_for({GID!r}).reference(*a) for k, a in cases["args"].items()}}
    except ImportError:
        return {{k: {FUNCTION}(*a) for k, a in cases["args"].items()}}
for name, module in list(sys.modules.items()):
    if name.endswith(".{spec.probe_module}"):
        setattr(module, {spec.probe_function!r}, _forged)
"""
    results, _ = score_answers(MASTER, {**hostile.solutions(NOTEBOOK), GID: cheat}, sandbox)
    assert results[GID].score < MASTER.graded[GID]
    assert full_marks(sandbox, SOLUTION)


@pytest.mark.slow  # a real jail
def test_a_symlinked_result_is_refused_not_followed(sandbox: Sandbox, tmp_path: Path) -> None:
    """Student code makes observed.json a link to a file of the host: the grader never
    reads through it (the jail's view has no such file, the host's has)."""
    secret = tmp_path / "other.json"
    secret.write_text(f'{{"stolen": "{TOKEN}"}}')
    os.chmod(tmp_path, 0o755)
    swap = f"""
import os
_replace = os.replace
def _evil(src, dst):
    _replace(src, dst)
    if str(dst).endswith("observed.json"):
        os.unlink(dst)
        os.symlink({str(secret)!r}, dst)
os.replace = _evil
"""
    outcome = probe(sandbox, swap + SOLUTION)
    assert outcome.observed is None and "could not be read" in outcome.problem
    assert TOKEN not in outcome.problem
    assert full_marks(sandbox, SOLUTION)


# ---- the jail's bounds seen from inside: cgroup, seccomp filter, open files -----------------

# (name, arguments, what a jail answers): harmless arguments, on which the call outside a jail
# succeeds or fails otherwise (tested in `outside`): EPERM/ENOSYS can only be the filter's.
CALLS = [
    ("unshare", (0,), "EPERM"),
    ("ptrace", (2, 0, 0, 0), "EPERM"),  # PTRACE_PEEKDATA of pid 0
    ("process_vm_readv", (0, 0, 0, 0, 0, 0), "EPERM"),
    ("io_uring_setup", (0, 0), "EPERM"),
    ("perf_event_open", (0, 0, 0, 0, 0), "EPERM"),
    ("setns", (-1, 0), "EPERM"),
    ("keyctl", (0, 0, 0, 0, 0), "EPERM"),
    ("mount", (0, 0, 0, 0, 0), "EPERM"),
    ("bpf", (0, 0, 0), "EPERM"),
    ("personality", (0x0040000,), "EPERM"),  # ADDR_NO_RANDOMIZE
    ("clone3", (0, 0), "ENOSYS"),  # the C library then uses clone, whose flags are checked
    # CLONE_NEWUSER | SIGCHLD: without the filter, the jail's limit of nested user namespaces
    # would answer ENOSPC (outside a jail it would fork: not tried there)
    ("clone", (0x10000000 | 17, 0, 0, 0, 0), "EPERM"),
    ("getpid", (), "ok"),
]
INSIDE = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return errno.errorcode[ctypes.get_errno()] if result == -1 else "ok"
calls = {name: call(nr, args) for name, nr, args in NUMBERED}
links = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        links[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own descriptor
        pass
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
seccomp = [status["Seccomp"].strip(), status["Seccomp_filters"].strip()]
kinds = sorted({links[fd].split(":")[0] if ":" in links[fd] else links[fd] for fd in links})
facts = {"calls": calls, "seccomp": seccomp, "kinds": kinds, "fds": sorted(links),
         "cgroupns": os.readlink("/proc/self/ns/cgroup")}
"""
NAMESPACE_LINKS = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time")


def numbered() -> list[tuple[str, int, tuple[int, ...]]]:
    import pyseccomp

    arch = pyseccomp.system_arch()
    return [(name, pyseccomp.resolve_syscall(arch, name), args) for name, args, _ in CALLS]


def inside_code() -> str:
    return f"NUMBERED = {numbered()!r}\n{INSIDE}"


@pytest.fixture(scope="module")
def outside() -> dict[str, str]:
    """The same calls in an unjailed process: none answers as the filter does."""
    import json

    code = (
        inside_code().replace(
            "for name, nr, args in NUMBERED}", "for name, nr, args in NUMBERED if name != 'clone'}"
        )
        + "print(json.dumps(calls))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def check_inside(facts: dict[str, Any], outside: dict[str, str]) -> None:
    expected = {name: answer for name, _, answer in CALLS}
    assert facts["calls"] == expected, facts["calls"]
    assert all(outside[n] != a for n, a in expected.items() if a != "ok" and n in outside)
    assert facts["seccomp"] == ["2", "1"]  # filter mode, one filter
    assert not [k for k in facts["kinds"] if k in NAMESPACE_LINKS], facts["kinds"]
    assert not [k for k in facts["kinds"] if "jail-seccomp" in k], facts["kinds"]
    assert facts["cgroupns"] != os.readlink("/proc/self/ns/cgroup")  # its own cgroup view


@pytest.fixture
def released(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    """The bounds of every jail cgroup, read as each is removed (cgroup name -> files)."""
    from autograder.jail.cgroup import JailCgroup

    seen: dict[str, dict[str, str]] = {}
    original = JailCgroup.release

    def release(self: JailCgroup, wait: float = 5.0) -> None:
        if self.folders and not self.released:
            seen[self.name] = {
                f.name: (folder / f.name).read_text().strip()
                for folder in self.folders
                for f in folder.iterdir()
                if f.name in BOUND_FILES
            }
        original(self, wait)

    monkeypatch.setattr(JailCgroup, "release", release)
    return seen


BOUND_FILES = ("memory.limit_in_bytes", "memory.max", "pids.max", "memory.max_usage_in_bytes")
KERNEL_MEMORY = 1537 * 2**20  # an odd bound, to find this notebook's cgroup among the others


def memory_limit(files: dict[str, str]) -> int:
    return int(files.get("memory.limit_in_bytes") or files.get("memory.max") or 0)


@pytest.mark.slow  # a real jail
def test_a_kernel_runs_in_its_cgroup_under_the_filter_without_the_graders_fds(
    runner: KernelRunner, outside: dict[str, str], released: dict[str, dict[str, str]]
) -> None:
    import json

    from autograder.jail import cgroup

    nb = new_notebook(cells=[new_code_cell(inside_code() + "print(json.dumps(facts))")])
    done = runner.execute(nb, timeout=60, cell_timeout=60, memory_bytes=KERNEL_MEMORY)
    assert done.status == "ok", done.detail
    check_inside(json.loads(text(done.notebook.cells[0])), outside)
    if cgroup.hierarchy() is None:
        pytest.skip(f"no cgroup here ({cgroup.why_not()})")
    mine = [f for f in released.values() if memory_limit(f) == KERNEL_MEMORY]
    assert len(mine) == 1, released
    assert mine[0]["pids.max"] == "1024"


@pytest.mark.slow  # a real jail
def test_a_kernel_holding_memfd_files_past_its_bound_is_stopped(runner: KernelRunner) -> None:
    from autograder.jail import cgroup

    hog = (
        "import os\nheld = []\nfor i in range(40):\n    fd = os.memfd_create(f'm{i}')\n"
        "    for _ in range(64):\n        os.write(fd, b'x' * 2**20)\n    held.append(fd)\n"
    )
    nb = new_notebook(cells=[new_code_cell(hog)])
    done = runner.execute(nb, timeout=60, cell_timeout=60, memory_bytes=768 * 2**20)
    if cgroup.hierarchy() is None:  # memfd_create is refused instead
        assert done.status == "ok" and "PermissionError" in text(done.notebook.cells[0])
    else:
        assert done.status == "error", done.detail
        assert "its jail used more than 768 MiB of memory" in done.detail
    assert "honest 6.0" in text(run(runner, HONEST).notebook.cells[0])


@pytest.mark.slow  # a real jail
def test_a_probe_runs_in_its_cgroup_under_the_filter_without_the_graders_fds(
    sandbox: Sandbox, outside: dict[str, str]
) -> None:
    import json

    from autograder.jail import cgroup

    # the facts travel back as the error of the graded function, in at most 300 characters
    short = (
        "_short = json.dumps([[facts['calls'][n] for n, _, _ in NUMBERED], facts['seccomp'],"
        " facts['kinds'], facts['cgroupns']])\n"
    )
    reveal = f"def {FUNCTION}(*args):\n    raise RuntimeError(_short)\n"
    outcome = probe(sandbox, inside_code() + short + reveal)
    assert outcome.observed is not None, outcome.problem
    message = next(v for k, v in outcome.observed.items() if k.endswith("!"))
    calls, seccomp, kinds, cgroupns = json.loads(message.removeprefix("RuntimeError: "))
    facts = {"calls": dict(zip([n for n, _, _ in CALLS], calls, strict=True)),
             "seccomp": seccomp, "kinds": kinds, "cgroupns": cgroupns}  # fmt: skip
    check_inside(facts, outside)
    if cgroup.hierarchy() is None:
        pytest.skip(f"no cgroup here ({cgroup.why_not()})")
    server = sandbox._current  # noqa: SLF001 - the jail this probe ran in
    files = {
        name: (d / name).read_text().strip()
        for d in server.cgroup.folders
        for name in BOUND_FILES
        if (d / name).exists()
    }
    assert memory_limit(files) == sandbox.memory_bytes and files["pids.max"] == "1024"
    assert int(files.get("memory.max_usage_in_bytes", "1")) > 0


@pytest.mark.slow  # a real jail
def test_a_probe_whose_processes_hold_more_than_the_bound_together_is_stopped(
    sandbox: Sandbox,
) -> None:
    """Four processes of 200 MiB each: each is under RLIMIT_AS, the jail is not."""
    from autograder.jail import cgroup

    forks = (
        "import os, time\nchild = False\nfor _ in range(3):\n    if os.fork() == 0:\n"
        "        child = True\n        break\nmine = b'x' * (200 * 2**20)\ntime.sleep(3)\n"
        "if child:\n    os._exit(0)\n"
    )
    outcome = probe(sandbox, forks + SOLUTION)
    assert outcome.observed is None
    if cgroup.hierarchy() is not None:
        assert "its jail used more than 512 MiB of memory" in outcome.problem, outcome.problem
    assert full_marks(sandbox, SOLUTION)


@pytest.mark.slow  # a real jail
def test_a_forged_progress_mark_never_reaches_the_page(sandbox: Sandbox) -> None:
    """The child's progress file says where it stopped; student code can write it. Only a mark
    the grader can name is used: no text of the file is repeated."""
    forge = (
        "import os\n"
        "folder = next(d for d, _, files in os.walk('/tmp') if 'job.json' in files)\n"
        "open(os.path.join(folder, 'progress'), 'w').write('answer:<b>FORGED</b> by the grader')\n"
        "os._exit(3)\n"
    )
    outcome = probe(sandbox, SOLUTION + "\n" + forge)
    assert outcome.observed is None and outcome.stopped_in is None
    assert "FORGED" not in outcome.problem and "exit code 3" in outcome.problem
    assert full_marks(sandbox, SOLUTION)


# ---- after everything: nothing outside the jails changed ----------------------------------


@pytest.mark.slow  # a real jail
def test_nothing_outside_the_jails_changed(
    host: Any, kernel_verdicts: dict[str, str], sandbox: Sandbox
) -> None:
    assert len(kernel_verdicts) == len(ATTACKS)
    assert fingerprint() == host["fingerprint"]
    assert host["sleeper"].poll() is None  # the host's process is alive
    assert not Path(f"/tmp/big-{TOKEN}").exists() and not Path(f"/tmp/up-{TOKEN}").exists()
    assert not (Path.home() / f".written-{TOKEN}").exists()
    assert (Path(host["out"]) / "grades.csv").read_text().count("\n") == 1


def test_missing_bwrap_is_one_line_with_the_install_command(monkeypatch: Any) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(JailUnavailable) as err:
        require_bwrap()
    assert "\n" not in str(err.value) and "install_bwrap.sh" in str(err.value)


# ---- the jail's own bounds: hidden modules, the process limit -----------------------------


def jailed_python(jail: Jail, code: str, tmp_path: Path, hidden: list[str]) -> str:
    launch = jail.launch([jail.python, "-c", code], tmp_path, hidden=hidden, probes=True)
    try:
        done = subprocess.run(
            launch.argv, pass_fds=launch.pass_fds, capture_output=True, text=True, timeout=60
        )
    finally:
        launch.close()
    return done.stdout.strip()


@pytest.mark.slow  # a real jail
def test_hidden_helpers_are_absent_and_the_rest_imports(tmp_path: Path, monkeypatch: Any) -> None:
    import autograder.probe
    from autograder.course import staging
    from autograder.jail.jail import hidden_helpers

    monkeypatch.setattr(autograder.probe, "REVEALS", {"modules.py": "05_the_head.ipynb"}, False)
    hidden = hidden_helpers("05_the_head.ipynb")
    assert set(staging.hidden_helpers("05_the_head.ipynb")) <= set(hidden)
    assert "attention_course/references/nb05.py" in hidden
    assert hidden_helpers("07_head_on_gpu.ipynb") == []
    code = (
        "import importlib\n"
        "for name in ('attention_course.references.nb05', 'attention_course.references.nb02',"
        " 'attention_course.charmodel', 'gradeprobe.modules', 'gradeprobe.nb05'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        print(name, 'there')\n"
        "    except ImportError:\n"
        "        print(name, 'absent')\n"
    )
    assert jailed_python(Jail.from_settings(), code, tmp_path, hidden).splitlines() == [
        "attention_course.references.nb05 absent",
        "attention_course.references.nb02 there",
        "attention_course.charmodel there",
        "gradeprobe.modules absent",
        "gradeprobe.nb05 there",
    ]


def spawn_sleepers(at_most: int, then: str) -> str:
    """Code that starts up to `at_most` sleeping processes (fewer when its limit stops it),
    prints how many, then runs `then`."""
    return (
        "import subprocess, time\n"
        "procs = []\n"
        "try:\n"
        f"    while len(procs) < {at_most}:\n"
        "        procs.append(subprocess.Popen(['sleep', '30']))\n"
        "except OSError:\n"
        "    pass\n"
        "print(len(procs), flush=True)\n"
        f"{then}\n"
    )


KILL_THEM = "for p in procs:\n    p.kill()"


@pytest.mark.slow  # a real jail
def test_a_fork_bomb_stops_at_the_process_limit(tmp_path: Path) -> None:
    import dataclasses

    jail = dataclasses.replace(Jail.from_settings(), processes=40)
    assert 0 < int(jailed_python(jail, spawn_sleepers(400, KILL_THEM), tmp_path, [])) < 40


@pytest.mark.slow  # a real jail
def test_a_fork_bomb_leaves_a_neighbouring_jail_its_processes(tmp_path: Path) -> None:
    """Jails run side by side (two workers, a kernel beside its probes): one that holds every
    process its limit allows leaves the other jail's limit untouched."""
    import dataclasses

    jail = dataclasses.replace(Jail.from_settings(), processes=40)
    hog, neighbour = spawn_sleepers(400, "time.sleep(30)"), spawn_sleepers(20, KILL_THEM)
    (tmp_path / "hog").mkdir()
    (tmp_path / "neighbour").mkdir()
    launch = jail.launch([jail.python, "-c", hog], tmp_path / "hog", probes=True)
    try:
        holder = subprocess.Popen(
            launch.argv, pass_fds=launch.pass_fds, stdout=subprocess.PIPE, text=True
        )
    finally:
        launch.close()
    try:
        assert holder.stdout is not None
        assert 30 < int(holder.stdout.readline()) < 40  # the hog is at its limit, and holds
        assert jailed_python(jail, neighbour, tmp_path / "neighbour", []) == "20"
    finally:
        holder.kill()
        holder.wait(10)


FACTS = """
import errno, json, os, resource, socket, sys

def wrote(folder):
    try:
        open(os.path.join(folder, ".written"), "w").close()
        return "written"
    except OSError as err:
        return errno.errorcode[err.errno]

def size(path):
    info = os.statvfs(path)
    return info.f_blocks * info.f_frsize

try:
    socket.sethostname("changed")
    renamed = "renamed"
except OSError as err:
    renamed = errno.errorcode[err.errno]
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
limits = {n: resource.getrlimit(getattr(resource, f"RLIMIT_{n}")) for n in LIMITS}
print(json.dumps({
    "uid": os.getuid(),
    "status": {k: v.strip() for k, v in status.items() if k.startswith(("Cap", "NoNewPrivs"))},
    "namespaces": {n: os.readlink("/proc/self/ns/" + n) for n in NAMESPACES},
    "hostname": [socket.gethostname(), renamed],
    "interfaces": [name for _, name in socket.if_nameindex()],
    "sizes": [size("/tmp"), size("/dev/shm")],
    "limits": limits,
    "listed": {folder: sorted(os.listdir(folder)) for folder in ("/", "/etc")},
    "writes": {folder: wrote(folder) for folder in sys.argv[1:]},
    "environment": dict(os.environ),
}))
"""
NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts")
LIMITS = ("FSIZE", "NPROC", "CORE", "NOFILE")
FIXED_ENVIRONMENT = {  # README: what a jail's environment holds besides jail.PASSED_ON
    "HOME", "PWD", "USER", "LOGNAME", "PATH", "LANG", "PYTHONPATH", "PYTHONNOUSERSITE",
    "PYTHONDONTWRITEBYTECODE", "MPLBACKEND", "MPLCONFIGDIR", "NBGRADER_EXECUTION",
    "PYDEVD_DISABLE_FILE_VALIDATION", "TINYSHAKESPEARE",
}  # fmt: skip


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What a process in a probe's jail reports of itself, run with OMP_NUM_THREADS and TZ
    set in the grader's environment (passed on) and a secret (not)."""
    import json

    from autograder.jail.jail import DATA, LIB

    jail, shared = Jail.from_settings(), tmp_path_factory.mktemp("facts")
    folders = ["/", "/usr", "/etc", str(jail.venv), str(jail.python_prefix), LIB, DATA]
    code = f"NAMESPACES, LIMITS = {NAMESPACES!r}, {LIMITS!r}\n{FACTS}"
    with pytest.MonkeyPatch.context() as env:
        for key, value in (("OMP_NUM_THREADS", "3"), ("TZ", "Europe/Paris"), (SECRET_VAR, SECRET)):
            env.setenv(key, value)
        launch = jail.launch([jail.python, "-c", code, *folders, "/tmp", str(shared)], shared)
        expected_env = jail.environment()
    try:
        done = subprocess.run(
            launch.argv, pass_fds=launch.pass_fds, capture_output=True, text=True, timeout=60
        )
    finally:
        launch.close()
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout), "jail": jail, "shared": str(shared), "env": expected_env}


@pytest.mark.slow  # a real jail
def test_a_jail_runs_unprivileged_in_its_own_namespaces(facts: dict[str, Any]) -> None:
    import socket

    from autograder.jail.jail import NOBODY

    assert facts["uid"] == NOBODY
    status = facts["status"]
    assert status["NoNewPrivs"] == "1"
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[cap], 16) == 0, (cap, status)
    for name in NAMESPACES:
        assert facts["namespaces"][name] != os.readlink(f"/proc/self/ns/{name}"), name
    assert facts["hostname"] == ["jail", "EPERM"] and socket.gethostname() != "changed"
    assert facts["interfaces"] == ["lo"]


@pytest.mark.slow  # a real jail
def test_a_jail_has_the_bounds_the_readme_states(facts: dict[str, Any]) -> None:
    """64 MiB of /tmp, 16 MiB of /dev/shm, files of at most 64 MiB, 1,024 processes, 1,024
    open files (256 where the jail has no cgroup)."""
    from autograder.jail import cgroup

    assert facts["sizes"] == [64 * 2**20, 16 * 2**20]
    limits = {k: tuple(v) for k, v in facts["limits"].items()}
    files = 1024 if cgroup.hierarchy() is not None else 256
    assert limits == {"FSIZE": (64 * 2**20,) * 2, "NPROC": (1024, 1024), "CORE": (0, 0),
                      "NOFILE": (files, files)}  # fmt: skip


@pytest.mark.slow  # a real jail
def test_a_jail_sees_a_read_only_view_and_writes_only_its_scratch(facts: dict[str, Any]) -> None:
    from autograder.jail.jail import _ETC

    jail: Jail = facts["jail"]
    tops = {Path(p).parts[1] for p in (jail.venv, jail.python_prefix, facts["shared"])}
    tops |= {
        t for t in ("bin", "sbin", "lib", "lib32", "lib64", "libx32") if Path(f"/{t}").exists()
    }
    assert facts["listed"]["/"] == sorted(tops | {"usr", "etc", "proc", "dev", "tmp", "jail"})
    assert facts["listed"]["/etc"] == sorted(n for n in _ETC if Path(f"/etc/{n}").exists())
    writes = facts["writes"]
    assert writes.pop("/tmp") == writes.pop(facts["shared"]) == "written"
    assert set(writes.values()) == {"EROFS"}, writes
    assert (Path(facts["shared"]) / ".written").exists()


@pytest.mark.slow  # a real jail
def test_a_jail_gets_only_the_fixed_environment_and_thread_counts(facts: dict[str, Any]) -> None:
    from autograder.jail.jail import PASSED_ON

    env = facts["environment"]
    assert env == facts["env"]
    assert FIXED_ENVIRONMENT <= set(env) <= FIXED_ENVIRONMENT | set(PASSED_ON)
    assert env["OMP_NUM_THREADS"] == "3" and env["TZ"] == "Europe/Paris"
    assert SECRET_VAR not in env and SECRET not in str(env)


PARENT = """
import subprocess, sys
from pathlib import Path
from autograder.jail.jail import Jail

jail = Jail.from_settings()
launch = jail.launch(["sleep", sys.argv[1]], Path(sys.argv[2]))
subprocess.Popen(launch.argv, pass_fds=launch.pass_fds).wait()
"""


@pytest.mark.slow  # a real jail
def test_a_jail_dies_with_its_parent(tmp_path: Path) -> None:
    """The process that started a jail is SIGKILLed: nothing of the jail survives it."""
    arg = f"{600 + secrets.randbelow(1000)}.{secrets.randbelow(1000)}"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, arg, str(tmp_path)], cwd=ROOT)
    try:
        for _ in range(300):
            if sleepers(arg) or parent.poll() is not None:
                break
            time.sleep(0.05)
        assert sleepers(arg), "the jailed process never started"
    finally:
        parent.kill()
        parent.wait()
    for _ in range(100):
        if not jailed_by(arg):
            break
        time.sleep(0.05)
    assert jailed_by(arg) == []


def jailed_by(arg: str) -> list[str]:
    """Live processes whose command line holds `arg` (the jail and what runs in it)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if arg in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(" ".join(p.info["cmdline"]))
    return found


def test_the_jail_started_ahead_is_for_the_notebook_that_comes_next() -> None:
    from autograder.jail.jail import guess_next

    course = [f"0{i}_x.ipynb" for i in range(1, 8)]
    one, two, three, four, six, seven = (course[i] for i in (0, 1, 2, 3, 5, 6))
    assert guess_next(None, None, course) == one  # a worker's first jail
    assert guess_next(None, one, course) == two
    assert guess_next(one, two, course) == three  # whole submissions, one worker
    assert guess_next(one, three, course) == four  # after a skipped notebook, still the next
    assert guess_next(six, seven, course) == one  # ... into the next student's submission
    assert guess_next(two, two, course) == two  # the class hands in one assignment
    assert guess_next(one, two, [one, two]) == one  # only the notebooks being graded
    assert guess_next(None, "99_not_graded.ipynb", course) == one
