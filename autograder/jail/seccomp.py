"""The seccomp filter of every jail: system calls a course notebook never needs fail with EPERM.

bwrap loads it (`--seccomp FD`) just before it executes the jail's first program, so every
process of the jail runs under it and cannot remove it. Built once per process with
libseccomp's Python binding (pyseccomp) as a BPF program; each launch gets its own copy in a
memfd (bwrap reads the descriptor to its end).

Denied, as in Docker's default profile and Flatpak's: tracing and reading other processes
(ptrace, process_vm_readv/writev, pidfd_getfd, kcmp), the kernel keyring (keyctl, add_key,
request_key), eBPF and performance counters (bpf, perf_event_open), userfaultfd, mounts and
namespaces (mount, umount2, pivot_root, chroot, the new mount API, unshare, setns, and clone
with a namespace flag; clone3, whose flags a filter cannot see, answers ENOSYS so the C
library falls back to clone), kernel modules and kexec (init_module, finit_module,
delete_module, kexec_load, kexec_file_load), io_uring (io_uring_setup, io_uring_enter,
io_uring_register: a second way to every system call), personality flags that weaken memory
protections (no address randomisation, readable implies executable, page zero, 3 GB or 32-bit
layouts), and the machine's own settings (reboot, swapon, swapoff, acct, settimeofday,
clock_settime, clock_adjtime, adjtimex, syslog, quotactl, open_by_handle_at,
name_to_handle_at, lookup_dcookie, vhangup, iopl, ioperm, uselib, fanotify_init).

memfd_create is allowed where the jail has a cgroup (its pages are charged to the jail's
memory bound) and denied where it has none (no bound would count them).
"""

from __future__ import annotations

import errno
import functools
import os

DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr", "unshare", "setns",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "syslog", "quotactl", "open_by_handle_at", "name_to_handle_at",
    "lookup_dcookie", "vhangup", "iopl", "ioperm", "uselib", "fanotify_init",
)  # fmt: skip
NAMESPACE_FLAGS = {  # clone(2) flags that make a namespace
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
PERSONALITY_FLAGS = {  # personality(2) flags refused (the query 0xffffffff stays allowed)
    "ADDR_NO_RANDOMIZE": 0x0040000,
    "MMAP_PAGE_ZERO": 0x0100000,
    "ADDR_COMPAT_LAYOUT": 0x0200000,
    "READ_IMPLIES_EXEC": 0x0400000,
    "ADDR_LIMIT_32BIT": 0x0800000,
    "ADDR_LIMIT_3GB": 0x8000000,
}
QUERY_BITS = 0xF0000000  # set only in personality's query value
INSTALL = "pip install pyseccomp (requirements.lock) and libseccomp2 (scripts/install_bwrap.sh)"


class SeccompUnavailable(RuntimeError):
    """libseccomp or its Python binding is missing."""


@functools.cache
def program(memfd: bool) -> bytes:
    """The filter as a BPF program; `memfd`: allow memfd_create (the jail has a cgroup)."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as err:  # RuntimeError: no libseccomp.so
        raise SeccompUnavailable(f"no seccomp filter can be built ({err}): {INSTALL}") from None
    deny = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED + (() if memfd else ("memfd_create",)):
        try:
            f.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):  # a call this kernel's tables do not know
            pass
    for flag in NAMESPACE_FLAGS.values():
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in PERSONALITY_FLAGS.values():
        f.add_rule(deny, "personality", sc.Arg(0, sc.MASKED_EQ, flag | QUERY_BITS, flag))
    fd = os.memfd_create("jail-seccomp-build", os.MFD_CLOEXEC)
    with os.fdopen(fd, "w+b") as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


def program_fd(memfd: bool) -> int:
    """A new descriptor (close-on-exec here; pass it to bwrap) holding the program at offset 0."""
    data = program(memfd)
    fd = os.memfd_create("jail-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
