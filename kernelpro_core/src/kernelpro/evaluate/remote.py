"""The judge's handle on a harness process: start it, ask it, time it out, tell how it ended.

Each harness runs under its own reaper (:mod:`kernelpro.evaluate.reaper`), in a new
session, with one end of a socket pair; the judge keeps the other. Every request has a
deadline; a harness that misses it is killed with everything it started, and a harness
that dies answers with the way it died (signal, exit status), read from the reaper's
record of it, not from anything the harness said.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from kernelpro.evaluate import procwatch
from kernelpro.evaluate.reaper import end_reaped, log_tail
from kernelpro.evaluate.protocol import FD_ENV, Channel, Closed, ProtocolError, Timeout

SIGNAL_NAMES = {s.value: s.name for s in signal.Signals}  # canonical names (SIGABRT, not SIGIOT)


class HarnessEnded(Exception):
    """A request got no answer. ``verdict``/``reason`` say why (a Verdict value and a line)."""

    def __init__(self, verdict: str, reason: str) -> None:
        super().__init__(reason)
        self.verdict, self.reason = verdict, reason


class _Idle(Exception):
    """A harness that is waited for did no work for too long."""


class Remote:
    """``hello``: what the harness is told before anything else (its role, device,
    directory, confinement, and variables to add to its environment); None to start it now
    and tell it later (:meth:`tell`), when the process was started ahead of its job: it
    imports torch and waits (:meth:`warm` lets the reference's open its CUDA context)."""

    def __init__(self, role: str, *, workdir: Path, cwd: Path, env: dict[str, str],
                 hello: dict[str, Any] | None) -> None:
        self.role = role
        self.rc_path = workdir / f"{role}_rc"
        self.log_path = workdir / f"{role}.log"
        self.rc_path.unlink(missing_ok=True)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(env)
        env[FD_ENV] = str(theirs.fileno())
        argv = [sys.executable, "-m", "kernelpro.evaluate.reaper", str(self.rc_path), "--",
                sys.executable, "-m", "kernelpro.evaluate.harness"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, cwd=str(cwd), start_new_session=True, pass_fds=(theirs.fileno(),))
        theirs.close()
        self.chan = Channel(mine, accept_fds=False)
        self.pid: int | None = None  # the harness itself, once it said hello (checked against /proc)
        self.confined: str | None = None
        if hello is not None:
            self.chan.send(hello)

    def warm(self, device: str) -> None:
        """Before the hello of a harness started without one: the reference's opens its
        CUDA context while it waits (:func:`kernelpro.evaluate.harness.warm_up`)."""
        self.send({"warm": True, "role": self.role, "device": device})

    def preload(self, device: str) -> None:
        """Before the hello: the reference's harness imports what a baseline job's FLOP
        count and ``torch.compile`` need (:func:`kernelpro.evaluate.harness.preload`)."""
        self.send({"preload": "compile", "role": self.role, "device": device})

    def tell(self, hello: dict[str, Any]) -> None:
        """Send the hello of a harness started without one."""
        self.send(hello)

    # --- requests ---------------------------------------------------------------------------------

    def hello(self, timeout: float) -> dict[str, Any]:
        answer = self.request(None, timeout, "starting")
        kids = procwatch.descendants(self.proc.pid)
        # the harness's word for its pid is believed only when the kernel agrees
        self.pid = int(answer.get("pid", -1)) if int(answer.get("pid", -1)) in kids else (kids[0] if kids else None)
        self.confined = answer.get("confined")
        return answer

    def send(self, msg: dict[str, Any], fds: Sequence[int] = ()) -> None:
        try:
            self.chan.send(msg, fds)
        except OSError:
            raise self.ended("sending a request") from None

    def request(self, msg: dict[str, Any] | None, timeout: float, what: str, fds: Sequence[int] = (),
                idle_s: float | None = None) -> dict[str, Any]:
        """Send ``msg`` (None: just wait) and return the answer; raises :class:`HarnessEnded`
        when none comes within ``timeout`` seconds, or (``idle_s``) when the harness and what
        it started used no CPU for ``idle_s`` seconds while it was being waited for (a long
        first call that compiles works; one that sleeps or waits on nothing is stopped
        early), or when the harness is gone."""
        if msg is not None:
            self.send(msg, fds)
        try:
            answer = self._wait(timeout, idle_s) if idle_s is not None and idle_s < timeout else self.chan.recv(timeout)
        except Timeout:
            self.kill()
            raise HarnessEnded("timeout", f"no answer within {timeout:.3g} s ({what})") from None
        except _Idle:
            self.kill()
            raise HarnessEnded("timeout", f"no answer, and no work done, for {idle_s:.3g} s ({what})") from None
        except Closed:
            raise self.ended(what) from None
        except ProtocolError as exc:
            self.kill()
            raise HarnessEnded("integrity_violation", f"the {self.role}'s process broke the evaluation protocol "
                               f"({exc}; {what})") from None
        return answer

    def _wait(self, timeout: float, idle_s: float) -> dict[str, Any]:
        end = time.monotonic() + timeout
        busy_at, cpu = time.monotonic(), self.cpu_ns(self.processes())
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise Timeout()
            try:
                return self.chan.recv(min(1.0, left))
            except Timeout:
                pass
            now_cpu = self.cpu_ns(self.processes())
            if now_cpu - cpu > 10_000_000:  # 10 ms of CPU since the last look: still working
                busy_at = time.monotonic()
            cpu = now_cpu
            if time.monotonic() - busy_at > idle_s:
                raise _Idle()

    # --- the end ----------------------------------------------------------------------------------

    def ended(self, what: str) -> HarnessEnded:
        """How the harness ended, from its reaper's record."""
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        try:
            rc = int(self.rc_path.read_text().strip())
        except (OSError, ValueError):
            rc = self.proc.returncode if self.proc.returncode is not None else -1
        if rc < 0:
            sig = SIGNAL_NAMES.get(-rc, str(-rc))
            if -rc == signal.SIGKILL:
                return HarnessEnded("oom", f"the {self.role}'s process was killed by SIGKILL ({what}); usually "
                                    "the out-of-memory killer")
            return HarnessEnded("crash", f"the {self.role}'s process died from {sig} ({what})")
        tail = log_tail(self.log_path)
        return HarnessEnded("exited", f"the {self.role}'s process exited with status {rc} without a result ({what})"
                            f"{': ' + tail if tail else ''}")

    def alive(self) -> bool:
        """Whether the harness's process is still running."""
        return self.proc.poll() is None

    def close(self, timeout: float = 5.0) -> None:
        """Ask the harness to leave; kill it (and what it started) if it does not."""
        try:
            self.chan.send({"op": "exit"})
            self.chan.recv(timeout)
        except (OSError, Closed, Timeout, ProtocolError):
            pass
        self.kill()

    def kill(self) -> None:
        end_reaped(self.proc)  # the reaper kills the harness and its descendants
        self.chan.close()

    # --- what /proc says -----------------------------------------------------------------------------

    def processes(self) -> list[int]:
        """Live processes below the reaper: the harness and whatever it left running."""
        return procwatch.descendants(self.proc.pid)

    def pause(self) -> list[int]:
        """Stop the harness and everything below its reaper until :meth:`resume`: while the
        other harness is timed, nothing of this one competes with it for the CPU."""
        return procwatch.stop(self.processes())

    def resume(self, pids: list[int]) -> None:
        procwatch.cont(pids)

    def extra_processes(self) -> list[int]:
        return [p for p in self.processes() if p != self.pid]

    def cpu_ns(self, pids: list[int] | None = None) -> int:
        return procwatch.tree_cpu_ns(pids if pids is not None else ([self.pid] if self.pid else []))


