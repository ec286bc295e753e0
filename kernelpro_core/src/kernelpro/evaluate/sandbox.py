"""Confining a process that runs candidate code, and noticing what it changed when it
could not be confined.

:func:`confine` is called by the candidate's harness and by the compile stage before the
candidate is imported:

* **Landlock** (Linux 5.13+, ``landlock_restrict_self``): the process and everything it
  starts may create, write, truncate, rename or delete files only beneath the directories
  it is given (its own empty working directory, its build-cache entry) and write only the
  device files CUDA needs and, of ``/proc``, its own entries and the system-wide ones but
  ``/proc/sys`` and a few more (:func:`proc_writable`; the CUDA driver writes there while it
  initializes). Reading stays allowed (torch, headers, the problem file).
  Landlock also stops the process from ptracing or reading the memory of processes
  outside its domain (the judge, the evaluating program), and, where the kernel has ABI 6,
  from signalling them; with ABI 4 it cannot bind or connect TCP sockets.
* ``PR_SET_NO_NEW_PRIVS`` (required by Landlock), and, when running as root, every
  capability dropped, so ``CAP_SYS_PTRACE`` cannot reach the non-dumpable judge.

Without Landlock (older kernels, some container runtimes) writes cannot be prevented:
:class:`FileWatch` records the files a candidate must not touch (the problem, the
candidate's own source, the files beside them and in the evaluation directory) before the
candidate runs and names every one that changed, appeared or vanished afterwards; the
judge then rejects the candidate.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from pathlib import Path
from typing import Any, Iterable

# syscall numbers shared by every architecture (asm-generic)
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

# filesystem rights (linux/landlock.h)
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

#: device files a CUDA process opens for writing (under /dev)
DEVICE_FILES = ("null", "zero", "full", "random", "urandom", "tty")
DEVICE_PREFIXES = ("nvidia",)


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is not available."""
    try:
        libc = _libc()
        v = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                         ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(v))


def _write_rights(abi: int) -> int:
    rights = (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG
              | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM)
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def device_files(dev: str = "/dev") -> list[str]:
    """The character devices a CUDA process writes (``/dev/null``, ``/dev/nvidia*``, ...)."""
    out: list[str] = []
    try:
        names = os.listdir(dev)
    except OSError:
        return out
    for name in sorted(names):
        if name in DEVICE_FILES or name.startswith(DEVICE_PREFIXES):
            path = os.path.join(dev, name)
            try:
                if stat.S_ISCHR(os.stat(path).st_mode):
                    out.append(path)
            except OSError:
                continue
    caps = os.path.join(dev, "nvidia-caps")
    if os.path.isdir(caps):
        out.append(caps)
    return out


def confine(writable: Iterable[str | os.PathLike[str]], *, devices: bool = True, net: bool = True,
            scope: bool = True, caps: bool = True) -> str:
    """Confine this process (and its future children) with Landlock; drop capabilities.

    Returns a short description of what holds ("landlock abi 7: writes beneath 3
    directories; signals scoped; tcp denied; capabilities dropped") or, when Landlock is
    unavailable, a line starting with ``"unconfined:"`` saying why. ``devices``: also allow
    the device files CUDA writes and :func:`proc_writable`; ``net``, ``scope``, ``caps``: deny TCP, scope
    signals and abstract sockets to the domain, drop capabilities (each on by default)."""
    libc = _libc()
    notes: list[str] = []
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"unconfined: PR_SET_NO_NEW_PRIVS failed ({os.strerror(ctypes.get_errno())})"
    abi = landlock_abi()
    dropped = drop_capabilities() if caps else False
    if abi <= 0:
        return "unconfined: this kernel has no Landlock" + ("; capabilities dropped" if dropped else "")
    fs = _write_rights(abi)
    file_rights = FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    fields = [fs]
    if abi >= 4:
        fields.append(NET_BIND_TCP | NET_CONNECT_TCP if net else 0)
    if abi >= 6:
        fields.append(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if scope else 0)
    attr = (ctypes.c_uint64 * len(fields))(*fields)
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        return f"unconfined: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    try:
        # the CUDA driver writes beneath /proc while it initializes (on the H200 machine, cuInit
        # failed with error 304 without it): this process's own /proc entries and the
        # system-wide ones, but not /proc/sys (a uid-0 process without capabilities can still
        # write kernel.core_pattern there, whose "|program" the kernel runs as root on the next
        # core dump), /proc/sysrq-trigger, /proc/irq, nor other processes' entries
        paths = [str(p) for p in writable] + (device_files() + proc_writable() if devices else [])
        n_dirs = 0
        for path in paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                rule = _PathBeneath(fs if is_dir else file_rights, fd)
                if libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    return f"unconfined: landlock_add_rule({path}) failed ({os.strerror(ctypes.get_errno())})"
                n_dirs += is_dir
            finally:
                os.close(fd)
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"unconfined: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    notes.append(f"landlock abi {abi}: writes only beneath {n_dirs} director{'y' if n_dirs == 1 else 'ies'}")
    if abi >= 6 and scope:
        notes.append("signals scoped")
    if abi >= 4 and net:
        notes.append("tcp denied")
    if dropped:
        notes.append("capabilities dropped")
    return "; ".join(notes)


#: /proc entries a confined process may not write beneath, whatever its devices need
PROC_DENIED = frozenset({"sys", "sysrq-trigger", "irq", "sysvipc", "self", "thread-self"})


def proc_writable(proc: str = "/proc") -> list[str]:
    """What of ``/proc`` a confined process may write beneath: its own ``/proc/<pid>`` and
    the top-level entries that are no process's and not in :data:`PROC_DENIED`."""
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    own = [os.path.join(proc, str(os.getpid()))]
    return own + [os.path.join(proc, n) for n in sorted(names) if not n.isdigit() and n not in PROC_DENIED]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> bool:
    """Drop every capability of this process (bounding, ambient, effective, permitted,
    inheritable); True when it had any. A root process keeps its uid, so it still reads and
    writes what root owns, but it can no longer ptrace a non-dumpable process or bypass
    Landlock-independent permission checks."""
    libc = _libc()
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        return False
    had = any(d.effective or d.permitted or d.inheritable for d in data)
    if not had:
        return False
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    empty = (_CapData * 2)()
    return libc.capset(ctypes.byref(header), empty) == 0


def set_undumpable() -> bool:
    """Make this process non-dumpable: processes of the same user without
    ``CAP_SYS_PTRACE`` can no longer ptrace it or open its ``/proc/<pid>/mem`` and ``fd``."""
    try:
        return _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


# --- detection, where writes cannot be prevented ---------------------------------------------


def _state(path: Path) -> tuple[int, int, int] | None:
    """(mtime, size, inode) of a file or link; a directory counts by its presence only (its
    own mtime moves whenever the evaluator adds an entry below it)."""
    try:
        st = path.lstat()
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return (0, 0, st.st_ino)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class FileWatch:
    """The state (mtime, size, inode) of the files a candidate must leave alone: each
    watched file, and every entry of each watched directory (one level), so that a file
    written, replaced, created or deleted there is seen. Python's ``__pycache__`` folders
    and the ``ignore`` paths (what the evaluator itself writes) are not watched."""

    def __init__(self, files: Iterable[Path] = (), dirs: Iterable[Path] = (), ignore: Iterable[Path] = ()) -> None:
        self.ignore = {Path(p).resolve() for p in ignore}
        self.paths: list[Path] = []
        for f in files:
            self.paths.append(Path(f).resolve())
        self.dirs = [Path(d).resolve() for d in dirs]
        self.before = self._snapshot()

    def _entries(self) -> set[Path]:
        out = set(self.paths)
        for d in self.dirs:
            out.add(d)
            try:
                out.update(p.resolve() if not p.is_symlink() else p for p in d.iterdir())
            except OSError:
                continue
        return {p for p in out if p.name != "__pycache__" and not any(p == i or i in p.parents for i in self.ignore)}

    def _snapshot(self) -> dict[Path, tuple[int, int, int] | None]:
        return {p: _state(p) for p in self._entries()}

    def changed(self) -> list[str]:
        """The watched paths that differ from when the watch began."""
        now = self._snapshot()
        out = []
        for path in sorted(set(self.before) | set(now)):
            a, b = self.before.get(path), now.get(path)
            if a != b:
                what = "created" if a is None else "deleted" if b is None else "modified"
                out.append(f"{path} ({what})")
        return out
