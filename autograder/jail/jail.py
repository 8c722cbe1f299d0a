"""Bubblewrap command lines: the one trust boundary between the grader and student code.

Every process that runs student code (the notebook's kernel, the probe server and its
children) starts as `bwrap ... -- <argv>` from `Jail.launch`. Inside it has:

- its own user, mount, PID, network, IPC and UTS namespaces: it sees only its own processes,
  has only a loopback device that is down (connecting anywhere fails), and dies with the
  grader (`--die-with-parent`; killing bwrap ends the PID namespace and all it holds);
- an unprivileged uid with no capabilities and `no_new_privs`. When the grader runs as root,
  a user namespace made for each launch maps that uid to host uid `host_uid` (65534, nobody),
  never to root: bwrap sets up the mounts as root (the only way through /root's mode 700 to
  Python), then `setpriv` drops to `host_uid` with an empty capability bounding set, and the
  namespace allows no nested user namespaces. Run by another user, bwrap maps the inner uid
  to that user (`--disable-userns`);
- a read-only view of only what it needs: /usr (and the /bin, /lib links), a few files of
  /etc (the loader's cache, time zone, fonts), Python's prefix (sys.base_prefix, not the rest
  of its home), the virtual environment, the course helpers minus the modules hidden for the
  notebook being graded, the jail-side probe package under `PROBE_PACKAGE`, and the data set;
- a private scratch at /tmp (HOME and working folder): a tmpfs of `scratch_bytes`, gone
  with the jail; the root itself is read-only;
- one read-write folder shared with the grader (`shared`, bound at its own path): the
  kernel's sockets, the probes' inputs and results. The host bounds its size (see the
  watchdogs) and reads nothing from it without checking (no symlinks, size limits);
- an environment of exactly `environment()`: a dozen fixed variables, and of the grader's
  only the thread counts, locale and time zone of `PASSED_ON` (secrets, tokens and
  JPY_PARENT_PID never cross);
- its own cgroup (`autograder.jail.cgroup`), joined before bwrap starts: a memory bound that
  counts everything the jail holds (its processes, shared memory, memfd files, its tmpfs) and
  a bound on its processes; where no cgroup can be had, RLIMIT_NPROC and RLIMIT_NOFILE are
  lower and memfd_create is refused, and the watchdogs sum the jail's RSS;
- a seccomp filter (`autograder.jail.seccomp`) that bwrap loads before the jail's first program;
- rlimits set before bwrap starts (processes, open files, file size, core dumps), binding
  inside because the jailed uid has no CAP_SYS_RESOURCE;
- no file descriptor of the grader's: the jail's first program closes every descriptor above
  2 (the user namespace's included) before it executes the command.

Not in it: the project (solutions/, autograder/ and its checks and references, tests/), OUT,
the submissions, other students' files and processes, the grader's home and environment.

`Jail.selftest` starts one jail as student code is started, running nothing, so that a
machine where bwrap is installed but cannot make its namespaces is refused before grading.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autograder.jail import cgroup as cgroups
from autograder.jail import seccomp
from autograder.model.settings import LIMITS, MiB

INSTALL = "bash scripts/install_bwrap.sh  (or: apt-get install -y bubblewrap)"
PROBE_PACKAGE = "gradeprobe"  # the name autograder/probe is mounted under in the jail
LIB = "/jail/lib"  # on PYTHONPATH inside: the probe package and the course helpers
DATA = "/jail/data"
SCRATCH = "/tmp"
NOBODY = 65534
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "fonts", "nsswitch.conf")
PASSED_ON = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LANG", "LC_ALL", "TZ")  # when set here
CANNOT_START = (
    "allow unprivileged user namespaces (sysctl -w kernel.unprivileged_userns_clone=1 "
    "user.max_user_namespaces=15000; on Ubuntu also "
    "kernel.apparmor_restrict_unprivileged_userns=0), or grade with --no-jail (unsafe)"
)
_STARTED: set[tuple[str, str]] = set()  # (bwrap, python) that started a jail in this process
# The jail's first program: close every descriptor above 2, then become the command.
CLOSER = (
    "import os, sys; os.closerange(3, os.sysconf('SC_OPEN_MAX')); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)
JAIL = LIMITS.jail  # every bound of a jail, with its reason (`python -m autograder limits`)


class JailUnavailable(RuntimeError):
    """bwrap (or a tool the jail needs) is missing or does not work here."""


def require_bwrap() -> str:
    """Path of bwrap; raise one line with the install command when it is missing."""
    path = shutil.which("bwrap")
    if path is None:
        raise JailUnavailable(f"bwrap (bubblewrap) is not installed: run `{INSTALL}`")
    missing = [tool for tool in _root_tools() if shutil.which(tool) is None]
    if missing:
        raise JailUnavailable(f"{', '.join(missing)} missing: install util-linux")
    return path


def _root_tools() -> tuple[str, ...]:
    return ("prlimit", "unshare", "setpriv") if os.geteuid() == 0 else ("prlimit",)


@dataclass
class Launch:
    """A jailed command line, the file descriptors it needs (close them after Popen) and its
    cgroup (release it when the jail is gone)."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    cgroup: cgroups.JailCgroup | None = None

    def close(self) -> None:
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = ()

    def release(self) -> None:
        """Kill what is left of the jail in its cgroup and remove the cgroup."""
        self.close()
        if self.cgroup is not None:
            self.cgroup.release()

    def over_memory(self) -> bool:
        """True when the kernel killed in this jail for want of memory since `cgroup.mark()`."""
        return self.cgroup is not None and self.cgroup.over_since_mark()


@dataclass(frozen=True)
class Jail:
    """What a jail shows and how much it may use; `launch` makes the command lines."""

    bwrap: str
    python_prefix: Path  # sys.base_prefix
    venv: Path  # sys.prefix
    probe: Path  # autograder/probe: mounted as LIB/PROBE_PACKAGE
    course: Path | None = None  # attention_course: mounted as LIB/attention_course
    data: Path | None = None  # the tiny Shakespeare file: DATA/<its name>
    scratch_bytes: int = JAIL.scratch_bytes
    file_bytes: int = JAIL.file_bytes  # RLIMIT_FSIZE: no file larger (scratch or shared)
    shared_bytes: int = (
        JAIL.shared_bytes
    )  # a probe jail is killed when its shared folder grows past
    processes: int = JAIL.processes  # RLIMIT_NPROC and the cgroup's pids.max
    memory_bytes: int = LIMITS.memory_bytes  # the cgroup's bound, unless a launch gives its own
    host_uid: int = NOBODY  # used when the grader runs as root
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(
        cls,
        *,
        scratch_mb: int = JAIL.scratch_bytes // MiB,
        data: Path | str | None = None,
        processes: int = JAIL.processes,
    ) -> Jail:
        """The jail for this installation: this Python, its venv, the project's helpers and
        probes, and the data set (given, else $TINYSHAKESPEARE, else the project's
        data/tinyshakespeare.txt when present). Raises JailUnavailable."""
        from autograder.model.paths import ROOT

        bwrap = require_bwrap()
        if data is None:
            data = os.environ.get("TINYSHAKESPEARE") or ROOT / "data" / "tinyshakespeare.txt"
        data_path = Path(data).resolve() if data else None
        if data_path is not None and not data_path.is_file():
            data_path = None
        course = ROOT / "attention_course"
        jail = cls(
            bwrap=bwrap,
            python_prefix=Path(sys.base_prefix).resolve(),
            venv=Path(sys.prefix).resolve(),
            probe=Path(__file__).resolve().parents[1] / "probe",
            course=course if course.is_dir() else None,
            data=data_path,
            scratch_bytes=scratch_mb * MiB,
            processes=processes,
        )
        try:
            seccomp.program(cgroups.hierarchy() is not None)
        except seccomp.SeccompUnavailable as err:
            raise JailUnavailable(str(err)) from None
        if (jail.bwrap, jail.python) not in _STARTED:
            jail.selftest()
            _STARTED.add((jail.bwrap, jail.python))
        return jail

    @property
    def python(self) -> str:
        """The interpreter to run inside: the venv's (its packages, Python's prefix)."""
        return str(self.venv / "bin" / "python")

    def selftest(self, timeout: float = LIMITS.jail.selftest_timeout) -> None:
        """Start one jail as student code is started (its cgroup, namespaces, seccomp filter,
        mounts and Python), running nothing; raise JailUnavailable, one line of why and what to
        do, if it fails. A jail that starts only without a cgroup gives up cgroups for this
        process (`cgroup.why_not()` then says why)."""
        why = self._try_start(timeout)
        chosen = cgroups.hierarchy()
        if why and chosen is not None:  # without its cgroup?
            cgroups.use(None, f"a jail could not start in {chosen.describe()}: {why}")
            if self._try_start(timeout):  # not either: the cgroup was not the cause
                cgroups.use(chosen)
            else:
                why = ""
        if why:
            raise JailUnavailable(
                f"bwrap is installed but cannot start a jail ({why}): {CANNOT_START}"
            )

    def _try_start(self, timeout: float) -> str:
        with tempfile.TemporaryDirectory(prefix="jailcheck-") as folder:
            try:
                launch = self.launch([self.python, "-c", ""], Path(folder))
            except (JailUnavailable, OSError) as err:
                return str(err)
            try:
                why = _failure(launch, timeout)
                cgroup = launch.cgroup
                if not why and cgroup is not None and cgroup.hierarchy.kind != "systemd":
                    if cgroup.peak() == 0 and cgroup.hierarchy.kind == "v1":
                        why = "its process was not charged to its cgroup"
            finally:
                launch.release()
        return why

    # ---- the command line ---------------------------------------------------------------

    def environment(self, **extra: str) -> dict[str, str]:
        """The whole environment inside: nothing else of the grader's crosses."""
        env = {
            "HOME": SCRATCH,
            "PWD": SCRATCH,
            "USER": "student",
            "LOGNAME": "student",
            "PATH": f"{self.venv}/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONPATH": LIB,
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": INLINE_BACKEND,
            "MPLCONFIGDIR": f"{SCRATCH}/.matplotlib",
            "NBGRADER_EXECUTION": "autograde",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        }
        if self.data is not None:
            env["TINYSHAKESPEARE"] = f"{DATA}/{self.data.name}"
        env.update({k: os.environ[k] for k in PASSED_ON if k in os.environ})
        env.update(self.extra_env)
        env.update(extra)
        return env

    def launch(
        self,
        argv: list[str],
        shared: Path,
        *,
        hidden: Iterable[str] = (),
        env: dict[str, str] | None = None,
        probes: bool = False,
        memory_bytes: int | None = None,
    ) -> Launch:
        """`argv` jailed, with `shared` read-write, the modules `hidden` left out of the course
        helpers (and of the probe package, mounted only with `probes`), in a cgroup of
        `memory_bytes` (default `self.memory_bytes`) where one can be had.

        The caller passes `pass_fds` to Popen and calls `close()` afterwards, and `release()`
        once the jail is gone (killed or ended). An empty `argv` is completed by the caller
        (a kernel manager appends the kernel's command).
        """
        shared = Path(shared).resolve()
        self.give(shared)
        where = cgroups.hierarchy()
        cgroup = None
        if where is not None:
            try:
                cgroup = where.make(memory_bytes or self.memory_bytes, self.processes)
            except OSError as err:
                raise JailUnavailable(f"could not make the jail's cgroup ({err})") from None
        fds: list[int] = []
        try:
            fds.append(seccomp.program_fd(memfd=cgroup is not None))
            if os.geteuid() == 0:
                fds.append(user_namespace(self.host_uid))
        except BaseException:
            for fd in fds:
                os.close(fd)
            if cgroup is not None:
                cgroup.release()
            raise
        head = ["--seccomp", str(fds[0])]
        if os.geteuid() == 0:
            fd = fds[1]
            head += ["--userns", str(fd), "--uid", "0", "--gid", "0"]
            head += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
            tail = [
                "setpriv",
                f"--reuid={self.host_uid}",
                f"--regid={self.host_uid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]
        else:
            head += ["--unshare-user", "--disable-userns", "--uid", str(NOBODY)]
            head += ["--gid", str(NOBODY)]
            tail = []
        tail += [self.python, "-I", "-S", "-c", CLOSER]
        processes = self.processes
        if cgroup is None and probes:
            processes = min(processes, JAIL.probe_processes_unbounded)
        limits = [
            "prlimit",
            f"--nproc={processes}",
            f"--nofile={JAIL.files if cgroup is not None else JAIL.files_unbounded}",
            f"--fsize={self.file_bytes}",
            "--core=0",
            "--",
        ]
        mounts = self._mounts(shared, _hidden_paths(hidden), probes)
        join = cgroup.prefix() if cgroup is not None else []
        cmd = [*join, *limits, self.bwrap, *head, *self._namespaces(), *mounts]
        for key, value in (env if env is not None else self.environment()).items():
            cmd += ["--setenv", key, value]
        cmd += ["--chdir", SCRATCH, "--", *tail, *argv]
        return Launch(cmd, tuple(fds), cgroup)

    def give(self, path: Path) -> None:
        """Let the jailed uid read and write `path` (made by the host before the jail runs)."""
        if os.geteuid() == 0:
            os.chown(path, self.host_uid, self.host_uid, follow_symlinks=False)

    def give_fd(self, fd: int) -> None:
        """`give` for an open file or folder (no path to redirect)."""
        if os.geteuid() == 0:
            os.fchown(fd, self.host_uid, self.host_uid)

    @staticmethod
    def _namespaces() -> list[str]:
        return [
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "jail",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        ]

    def _mounts(self, shared: Path, hidden: tuple[set[str], set[str]], probes: bool) -> list[str]:
        hidden_course, hidden_probe = hidden
        binds: list[tuple[str, str, str]] = []  # (option, source, destination)
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                binds.append(("--symlink", os.readlink(top), top))
            elif os.path.isdir(top):
                binds.append(("--ro-bind", top, top))
        binds.append(("--ro-bind", "/usr", "/usr"))
        for name in _ETC:
            if os.path.exists(f"/etc/{name}"):
                binds.append(("--ro-bind", f"/etc/{name}", f"/etc/{name}"))
        for path in dict.fromkeys([self.python_prefix, self.venv]):
            binds.append(("--ro-bind", str(path), str(path)))
        if probes:
            binds += _package_binds(self.probe, f"{LIB}/{PROBE_PACKAGE}", hidden_probe)
        if self.course is not None:
            binds += _package_binds(self.course, f"{LIB}/attention_course", hidden_course)
        if self.data is not None:
            binds.append(("--ro-bind", str(self.data), f"{DATA}/{self.data.name}"))
        binds.append(("--bind", str(shared), str(shared)))
        dirs = sorted(
            {str(p) for _, _, dest in binds for p in Path(dest).parents if str(p) != "/"},
            key=lambda p: (p.count("/"), p),
        )
        args = ["--proc", "/proc", "--dev", "/dev"]
        args += ["--perms", "01777", "--size", str(self.scratch_bytes), "--tmpfs", SCRATCH]
        args += ["--perms", "01777", "--size", str(JAIL.shm_bytes), "--tmpfs", "/dev/shm"]
        for d in dirs:
            if d != SCRATCH:
                args += ["--perms", "0755", "--dir", d]
        for option, source, dest in binds:
            args += [option, source, dest]
        args += ["--remount-ro", "/"]
        return args


def _failure(launch: Launch, timeout: float) -> str:
    """Why `launch` did not run to exit code 0 (its last line of stderr), or ""."""
    try:
        done = subprocess.run(
            launch.argv, pass_fds=launch.pass_fds, capture_output=True, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return type(err).__name__
    if done.returncode == 0:
        return ""
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1].strip()[:200] if lines else f"exit code {done.returncode}"


def _hidden_paths(hidden: Iterable[str]) -> tuple[set[str], set[str]]:
    """Split hidden modules into paths relative to the course helpers and to the probe package.

    'attention_course/references/nb05.py' or 'attention_course.references.nb05' is the course
    helpers' 'references/nb05.py'; anything else ('modules.py', 'modules') is the probe
    package's. A name without '.py' hides a package folder of that name too."""
    course: set[str] = set()
    probe: set[str] = set()
    for item in hidden:
        text = str(item).replace("\\", "/")
        if text.endswith(".py"):
            text = text[:-3]
        if "/" not in text:
            text = text.replace(".", "/")
        head, _, rest = text.partition("/")
        target, rel = (course, rest) if head == "attention_course" and rest else (probe, text)
        target |= {f"{rel}.py", rel}
    return course, probe


def _package_binds(
    package: Path, dest: str, hidden: set[str], prefix: str = ""
) -> list[tuple[str, str, str]]:
    """One read-only bind per module of a package, subpackages included: hidden ones (and
    bytecode) never appear; a folder holding a hidden module is bound file by file."""
    binds = []
    for entry in sorted(package.iterdir()):
        rel = prefix + entry.name
        if rel in hidden or entry.name == "__pycache__" or entry.name.startswith("."):
            continue
        if entry.is_symlink() or not (entry.is_file() or entry.is_dir()):
            continue
        if entry.is_dir() and any(h.startswith(rel + "/") for h in hidden):
            binds += _package_binds(entry, f"{dest}/{entry.name}", hidden, rel + "/")
        else:
            binds.append(("--ro-bind", str(entry), f"{dest}/{entry.name}"))
    return binds


# The shell re-executes itself once the maps exist: only an exec as the namespace's root
# gets that root's capabilities (needed to write the namespace's own limit).
_HOLDER = "read _ && exec sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && echo ok && read _'"


def user_namespace(uid: int, timeout: float = LIMITS.jail.userns_timeout) -> int:
    """A file descriptor of a new user namespace mapping root to root (for bwrap's mounts)
    and `uid` to `uid` (for student code), in which no further user namespace can be made."""
    holder = subprocess.Popen(
        ["unshare", "--user", "--", "sh", "-c", _HOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        own = os.readlink("/proc/self/ns/user")
        deadline = time.monotonic() + timeout
        while os.readlink(f"/proc/{holder.pid}/ns/user") == own:
            if holder.poll() is not None or time.monotonic() > deadline:
                raise JailUnavailable("could not create a user namespace (unshare --user)")
            time.sleep(0.0005)
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{holder.pid}/{name}", "w") as f:
                f.write(f"0 0 1\n{uid} {uid} 1\n")
        holder.stdin.write(b"\n")
        holder.stdin.flush()
        if holder.stdout.readline().strip() != b"ok":
            raise JailUnavailable("could not limit nested user namespaces")
        fd = os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        try:
            holder.stdin.close()
        except OSError:
            pass
        try:
            holder.wait(timeout)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
    return fd


def hidden_helpers(notebook: str | None, probes: bool = False) -> list[str]:
    """Modules that give `notebook`'s answers away, hidden from its jails: the course helpers
    `autograder.course.staging.hidden_helpers` names (for a probe jail, `probe_hidden_helpers`: also
    the earlier answers its setup does not hand out), and the probe modules that the probe
    package's `REVEALS` (module file -> last notebook whose answers it holds) marks.

    Without a notebook no helper is hidden.
    """
    from autograder import probe
    from autograder.course import staging  # the jail's command lines need neither

    if not notebook:
        return []
    course = staging.probe_hidden_helpers if probes else staging.hidden_helpers
    hidden = list(course(notebook))

    reveals: dict[str, str] = getattr(probe, "REVEALS", {})
    hidden += [module for module, last in reveals.items() if notebook[:2] <= last[:2]]
    return hidden


def following(notebook: str | None, order: Sequence[str] = ()) -> str | None:
    """The notebook after `notebook` in `order` (the notebooks being graded, in course order;
    all of the course's by default): the first after the last, or with None."""
    from autograder.model.contract import CONTRACT

    order = list(order or CONTRACT)
    if notebook not in order:
        return order[0] if order else None
    return order[(order.index(notebook) + 1) % len(order)]


def guess_next(previous: str | None, current: str | None, order: Sequence[str] = ()) -> str | None:
    """The notebook a jail started ahead of need is made for. Only a lone worker starts one,
    and it gets each submission's notebooks in course order: the notebook after `current` in
    `order` (cyclic; a student who skipped one starts the next notebook they handed in), or
    `current` again after two of the same (a class that hands in one assignment)."""
    if previous is not None and previous == current:
        return current
    return following(current, order)
