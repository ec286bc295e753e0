"""Messages between the judge and a harness process, over a Unix socket pair.

A message is a 4-byte big-endian length and a UTF-8 JSON object; file descriptors (the
host-memory buffers of :mod:`kernelpro.evaluate.transport`) travel beside a message as
``SCM_RIGHTS``. The judge reads what a candidate's process sends as untrusted data: JSON
only (never pickle), at most :data:`MAX_MESSAGE` bytes, and every read has a deadline, so
a harness that stops answering is a timeout of the stage it was in, not a hung judge.
"""

from __future__ import annotations

import array
import json
import select
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

MAX_MESSAGE = 16 << 20  # bytes of one message: larger ones are a protocol error
FD_ENV = "KERNELPRO_HARNESS_FD"  # the harness's end of the socket pair (a descriptor number)
MAX_FDS = 64


class ProtocolError(Exception):
    """The other side sent something that is not a message of this protocol."""


class Closed(ProtocolError):
    """The other side closed the connection (its process ended)."""


class Timeout(Exception):
    """No message arrived before the deadline."""


class Channel:
    """One end of a socket pair speaking this protocol."""

    def __init__(self, sock: socket.socket, accept_fds: bool = True) -> None:
        """``accept_fds`` False: descriptors the other side sends are closed on arrival (the
        judge takes none from a harness)."""
        self.sock = sock
        self.accept_fds = accept_fds
        self._buf = bytearray()
        self._fds: list[int] = []

    @classmethod
    def from_fd(cls, fd: int) -> "Channel":
        return cls(socket.socket(fileno=fd))

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        body = json.dumps(message, separators=(",", ":")).encode()
        data = struct.pack(">I", len(body)) + body
        if fds:
            sent = socket.send_fds(self.sock, [data[:1]], list(fds))
            data = data[sent:]
        if data:
            self.sock.sendall(data)

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message; raises :class:`Timeout` after ``timeout`` seconds (None: wait),
        :class:`Closed` at end of stream, :class:`ProtocolError` for anything malformed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            msg = self._take()
            if msg is not None:
                return msg
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout()
                ready, _, _ = select.select([self.sock], [], [], left)
                if not ready:
                    raise Timeout()
            self._fill()

    def take_fds(self, n: int) -> list[int]:
        """The first ``n`` file descriptors that arrived with messages (in order)."""
        if len(self._fds) < n:
            raise ProtocolError(f"expected {n} file descriptor(s), got {len(self._fds)}")
        out, self._fds = self._fds[:n], self._fds[n:]
        return out

    def _fill(self) -> None:
        fds = array.array("i")
        try:
            data, ancdata, _flags, _addr = self.sock.recvmsg(1 << 20, socket.CMSG_LEN(MAX_FDS * fds.itemsize))
        except ConnectionResetError:
            data, ancdata = b"", []
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(payload[: len(payload) - (len(payload) % got.itemsize)])
                if self.accept_fds:
                    self._fds.extend(got)
                else:
                    for fd in got:
                        _close(fd)
        if not data:
            raise Closed("the other process closed the connection")
        self._buf += data

    def _take(self) -> dict[str, Any] | None:
        if len(self._buf) < 4:
            return None
        (n,) = struct.unpack(">I", self._buf[:4])
        if n > MAX_MESSAGE:
            raise ProtocolError(f"message of {n} bytes (more than {MAX_MESSAGE})")
        if len(self._buf) < 4 + n:
            return None
        body = bytes(self._buf[4:4 + n])
        del self._buf[:4 + n]
        try:
            msg = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProtocolError(f"unreadable message: {exc}") from None
        if not isinstance(msg, dict):
            raise ProtocolError("a message must be a JSON object")
        return msg

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _close(fd: int) -> None:
    import os

    try:
        os.close(fd)
    except OSError:
        pass
