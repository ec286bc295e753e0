"""The judge's result channel to the parent, made hard to forge.

The parent creates a pipe and a random 32-byte token. The judge's process inherits the
pipe's write end (its number in ``KERNELPRO_RESULT_FD``) and receives the token on stdin
before it starts anything else, then (a judge started ahead of its job, see
:mod:`kernelpro.evaluate.runner`) the path of its job as one line, after which stdin is
closed; it keeps only an HMAC object keyed with the token. The result is sent once, as
``KPR1 <hmac-sha256 hex> <length>\\n<json>``. The parent accepts exactly one message
with a valid MAC; a forged or second message is an integrity violation, and files in the
work directory are never read as results. No candidate code runs in the judge's process
and its harnesses do not inherit the pipe; the signature is what remains between a
process that could reach the pipe's descriptor and a verdict (docs/evaluation.md).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading

MAGIC = b"KPR1"
FD_ENV = "KERNELPRO_RESULT_FD"


class ChannelError(Exception):
    """The result message is missing, malformed, forged or duplicated."""


# --- parent ---------------------------------------------------------------------------------


class ParentEnd:
    def __init__(self) -> None:
        self.token = secrets.token_bytes(32)
        self.read_fd, self.write_fd = os.pipe()
        os.set_inheritable(self.write_fd, True)
        self._chunks: list[bytes] = []
        self._reader: threading.Thread | None = None
        #: set when the pipe reached EOF: every holder of the write end closed it (the judge
        #: does right after sending its result)
        self.closed = threading.Event()
        self._abandoned = False

    def start_reading(self) -> None:
        """Close our copy of the write end and drain the pipe on a thread until EOF."""
        os.close(self.write_fd)

        def drain() -> None:
            while True:
                try:
                    chunk = os.read(self.read_fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                self._chunks.append(chunk)
            self.closed.set()
            if self._abandoned:
                fd, self.read_fd = self.read_fd, -1
                if fd >= 0:
                    os.close(fd)

        self._reader = threading.Thread(target=drain, daemon=True, name="kernelpro-result-reader")
        self._reader.start()

    def finish(self, timeout_s: float = 5.0) -> bytes:
        """What was read, after waiting up to ``timeout_s`` for EOF; closes the read end
        (once: its number may belong to another file afterwards)."""
        if self._reader is not None:
            self._reader.join(timeout_s)
            if self._reader.is_alive():  # still reading: closing under it could read another file
                self._abandoned = True  # the reader closes it at EOF
                return b"".join(self._chunks)
        fd, self.read_fd = self.read_fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        return b"".join(self._chunks)

    def verify(self, data: bytes) -> str | None:
        """The JSON payload of the one valid message; None when nothing was sent.
        Raises ChannelError for anything else."""
        if not data:
            return None
        head, sep, rest = data.partition(b"\n")
        parts = head.split(b" ")
        if not sep or len(parts) != 3 or parts[0] != MAGIC or not parts[2].isdigit():
            raise ChannelError("the result channel carried a malformed message")
        n = int(parts[2])
        payload, extra = rest[:n], rest[n:]
        if len(payload) != n:
            raise ChannelError("the result message was cut short")
        expected = hmac.new(self.token, payload, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(expected, parts[1]):
            raise ChannelError("the result message is not signed by the evaluator (forged)")
        if extra:
            raise ChannelError("more than one message on the result channel")
        return payload.decode()


# --- the judge's side ---------------------------------------------------------------------


TOKEN_BYTES = 32


def _read_exactly(fd: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            break
        out += chunk
    return out


class WorkerEnd:
    """Created before the candidate is imported; reads the token from stdin. Unless
    ``job_follows``, stdin is closed at once; otherwise :meth:`line` reads what follows."""

    def __init__(self, job_follows: bool = False) -> None:
        fd = os.environ.pop(FD_ENV, None)
        self.fd = int(fd) if fd is not None else None
        token = _read_exactly(0, TOKEN_BYTES) if self.fd is not None else b""
        if not job_follows:
            self._close_stdin()
        self._mac = hmac.new(token, digestmod=hashlib.sha256) if token else None
        del token
        self.sent = False
        self._pending = b""

    @staticmethod
    def _close_stdin() -> None:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)

    def line(self) -> str | None:
        """The next line on stdin (a judge started ahead reads ``warm``, then the path of its
        job.json); None when stdin ends first (the parent discarded this judge, or is gone)."""
        while b"\n" not in self._pending:
            chunk = os.read(0, 4096)
            if not chunk:
                self._pending = b""
                return None
            self._pending += chunk
        head, _, self._pending = self._pending.partition(b"\n")
        return head.decode(errors="replace").strip()

    def close_stdin(self) -> None:
        self._close_stdin()

    def send(self, payload: str) -> None:
        if self.fd is None or self._mac is None or self.sent:
            return
        body = payload.encode()
        mac = self._mac.copy()
        mac.update(body)
        msg = MAGIC + b" " + mac.hexdigest().encode() + b" " + str(len(body)).encode() + b"\n" + body
        view = memoryview(msg)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        os.close(self.fd)
        self.sent = True
