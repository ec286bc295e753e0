"""A small parent for the worker that leaves no process behind.

    python -m kernelpro.evaluate.reaper RC_FILE -- WORKER ARGV...

It marks itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so every process
the candidate starts, even one that double-forks and calls ``setsid`` to leave the
process group, is re-parented to it rather than to init. It runs the worker, writes the
worker's exit status (negative: the signal) to RC_FILE, then kills and reaps every
remaining descendant. SIGTERM (sent by the parent on a timeout) kills the worker first.
It also asks the kernel for a signal when its own parent dies (``PR_SET_PDEATHSIG``), so an
evaluating process killed outright (SIGKILL, a CI time limit) leaves no worker holding the
GPU behind. The kernel sends that signal when the parent *thread* that started the reaper
ends, too (the reaper then belongs to another thread of the same process): the reaper ends
its worker only when its parent process has changed. A judge started ahead by an executor's
worker thread that then finished was killed that way in the middle of its evaluation,
which read as an out-of-memory kill.
It imports nothing heavy, so it costs a few milliseconds.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
#: what the kernel sends when the reaper's parent thread ends (not SIGTERM: that one is the
#: parent's own request to stop, honoured whatever the parent is)
PARENT_DEATH_SIGNAL = signal.SIGUSR1


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _set_subreaper() -> bool:
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(name))
    return out


def reap_all(deadline_s: float = 5.0) -> int:
    """Kill every child (re-parented orphans included) until none is left; return how many."""
    me = os.getpid()
    killed = 0
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        kids = _children(me)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            if not _children(me):
                break
        if not kids:
            break
        time.sleep(0.02)
    return killed


def main(argv: list[str]) -> int:
    rc_file, sep, cmd = argv[0], argv[1], argv[2:]
    assert sep == "--" and cmd
    parent = os.getppid()
    _set_subreaper()
    state: dict[str, Any] = {"proc": None, "stop": False}

    def on_term(signum, frame):  # noqa: ARG001
        state["stop"] = True
        if state["proc"] is not None:
            try:
                os.kill(state["proc"].pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def on_parent_death(signum, frame):  # noqa: ARG001
        if os.getppid() != parent:  # the parent process is gone (a thread of it ending changes nothing)
            on_term(signum, frame)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(PARENT_DEATH_SIGNAL, on_parent_death)
    _prctl(PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL)
    if os.getppid() != parent:  # the parent died before the request took effect
        return 1
    proc = subprocess.Popen(cmd, close_fds=False)
    state["proc"] = proc
    if state["stop"]:  # SIGTERM arrived while the worker was being started
        on_term(signal.SIGTERM, None)
    # our copies of inherited descriptors (the result pipe) must not hold it open
    for fd in range(3, 256):
        try:
            os.close(fd)
        except OSError:
            pass

    rc = proc.wait()
    try:
        with open(rc_file + ".tmp", "w") as fh:
            fh.write(str(rc))
        os.replace(rc_file + ".tmp", rc_file)
    except OSError:  # its directory is gone (no one reads the record any more): still reap
        pass
    reap_all()
    return 0


# --- helpers for the processes that start reapers (runner, remote, compile) --------------------


def signal_pid(pid: int, sig: int) -> None:
    """Send ``sig`` to ``pid`` if it still exists."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (a process started in a new session)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def end_reaped(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """End a process started under a reaper (a new session) and everything it started:
    SIGTERM to the reaper (it kills its worker and reaps every descendant), up to
    ``grace_s`` for that, then SIGKILL to its group and to the reaper itself."""
    if proc.poll() is None:
        signal_pid(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    kill_group(proc.pid)
    if proc.poll() is None:
        signal_pid(proc.pid, signal.SIGKILL)
        proc.wait()


def log_tail(path: Any, n: int = 1) -> str:
    """The last ``n`` non-blank lines of a log, joined, at most 300 characters."""
    try:
        with open(path, errors="replace") as fh:
            lines = [ln for ln in fh.read().splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])[:300]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
