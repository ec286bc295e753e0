"""What a harness process and its descendants are doing, read by the judge from ``/proc``.

The kernel's accounts cannot be rewritten by the process they describe, so they are how
the judge checks, from outside, that a candidate did no work where none is allowed:

* :func:`cpu_ns`: CPU time (nanoseconds) of a whole process, threads that already ended
  included (its CPU-time clock, ``clock_gettime`` on ``(~pid << 3) | 2``): read when a
  call's answer arrives and again just before the next call, the difference is work the
  candidate's threads did between calls;
* :func:`descendants`: the processes below the harness's reaper (re-parented orphans
  included), so a process the candidate started and left running is seen.
"""

from __future__ import annotations

import os
import time


def cpu_ns(pid: int) -> int:
    """CPU time of process ``pid`` in nanoseconds, every thread it ever ran included (0 when
    it is gone)."""
    try:
        return time.clock_gettime_ns((~pid << 3) | 2)  # the kernel's per-process CPUCLOCK_SCHED clock
    except OSError:
        pass
    # no such clock readable: the live threads' accounts (threads that ended are missed)
    return sum(ns for _name, ns in threads_cpu_ns([pid]).values())


def tree_cpu_ns(pids: list[int]) -> int:
    return sum(cpu_ns(p) for p in pids)


def threads_cpu_ns(pids: list[int]) -> dict[tuple[int, int], tuple[str, int]]:
    """Per live thread of the processes ``pids``: (pid, tid) -> (its name, its CPU time in
    nanoseconds); what is unreadable is left out (a name that cannot be read is "?")."""
    out: dict[tuple[int, int], tuple[str, int]] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                    ns = int(fh.read().split(maxsplit=1)[0])
            except (OSError, ValueError, IndexError):
                continue
            try:
                with open(f"/proc/{pid}/task/{tid}/comm", "rb") as fh:
                    name = fh.read().strip().decode("utf-8", "replace")
            except OSError:
                name = "?"
            out[(pid, int(tid))] = (name, ns)
    return out


def _stat_fields(path: str) -> list[bytes]:
    """The fields of a ``stat`` file after the command name (state, ppid, ...); [] when
    unreadable. The name may hold spaces and parentheses: it ends at the last ')'."""
    try:
        with open(path, "rb") as fh:
            stat = fh.read()
    except OSError:
        return []
    return stat[stat.rfind(b")") + 2:].split()


def _threads_state(pid: int | str) -> list[bytes]:
    """The state letter of each thread of the process."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return [f[0] for f in (_stat_fields(f"/proc/{pid}/task/{tid}/stat") for tid in tids) if f]


def _parents() -> dict[int, int]:
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(f"/proc/{name}/stat")
        if len(fields) > 1 and (fields[0] != b"Z" or _threads_alive(name)):
            out[int(name)] = int(fields[1])
    return out


def _threads_alive(pid: str) -> bool:
    """Whether a process whose first thread has ended (state Z) still runs other threads:
    a leader that leaves by the raw exit system call reads as a zombie while its threads
    go on working, and is as alive as any process."""
    return any(state not in (b"Z", b"X") for state in _threads_state(pid))


def descendants(root: int) -> list[int]:
    """Live processes below ``root``, nearest first: not zombies, unless a zombie's other
    threads still run (:func:`_threads_alive`). Walked down from ``root`` through each
    thread's ``children`` file where the kernel has them (a harness's pause before every
    timed call of the reference read only its own tree, not every process of the host);
    else from the parent of every process in ``/proc``."""
    if not _HAS_CHILDREN:
        return _descendants_by_scan(root)
    out: list[int] = []
    todo = _children(root)
    while todo:
        pid = todo.pop(0)
        fields = _stat_fields(f"/proc/{pid}/stat")
        if len(fields) < 2 or (fields[0] == b"Z" and not _threads_alive(str(pid))):
            continue  # gone, or ended
        out.append(pid)
        todo.extend(_children(pid))
    return out


def _children(pid: int) -> list[int]:
    """The children of every thread of process ``pid`` (a child is listed under the thread
    that started it, or the one it was handed to when that thread ended)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return out


def _descendants_by_scan(root: int) -> list[int]:
    """:func:`descendants` from every process's parent (kernels without ``children`` files)."""
    parents = _parents()
    kids: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        kids.setdefault(ppid, []).append(pid)
    out: list[int] = []
    todo = list(kids.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


#: whether this kernel lists each thread's children (CONFIG_PROC_CHILDREN)
_HAS_CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def command(pid: int) -> str:
    """The process's command line; its name and pid where it has none (a zombie's)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            text = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        text = ""
    if text:
        return text
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        name = stat[stat.find(b"(") + 1:stat.rfind(b")")].decode(errors="replace")[:40]
    except OSError:
        name = "?"
    return f"pid {pid} ({name})"


def stop(pids: list[int], wait_s: float = 0.05) -> list[int]:
    """Stop ``pids`` (SIGSTOP: every thread of each) and wait, up to ``wait_s``, until the
    kernel shows each thread stopped; the pids that were signalled."""
    import signal

    sent = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGSTOP)
            sent.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    end = time.monotonic() + wait_s
    pending = list(sent)
    while pending and time.monotonic() < end:
        pending = [p for p in pending if not _all_stopped(p)]
    return sent


def cont(pids: list[int]) -> None:
    """Let processes stopped by :func:`stop` run again."""
    import signal

    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            continue


def _all_stopped(pid: int) -> bool:
    return all(state in (b"T", b"t", b"Z", b"X") for state in _threads_state(pid))  # [] : gone


def sched_state(pid: int) -> tuple[int | None, str]:
    """What decides how much CPU the process gets when others compete: its nice value and
    its autogroup's (``/proc/<pid>/autogroup``, which another process of the same user
    can write). (None, "") where unreadable."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    nice = int(fields[16]) if len(fields) > 16 and fields[16].lstrip(b"-").isdigit() else None
    try:
        with open(f"/proc/{pid}/autogroup") as fh:
            group = fh.read().strip()
    except OSError:
        group = ""
    return nice, group
