"""One GPU shared by several jobs at once, without letting them disturb each other's numbers.

When a local executor runs more than one job per GPU (``executor.params.jobs_per_gpu``),
every process that runs kernels on that GPU for KernelPro takes the GPU's lock, a file
locked with ``flock(2)``, named in the variable ``KERNELPRO_GPU_LOCK`` that the worker's
:class:`~kernelpro.api.Slot` passes on. The built-in processes hold it

- **exclusive** from their first work on the device until they exit (the kernel lets go of
  a ``flock`` when the process is gone, its memory freed): the judge from the reference's
  first call (correctness, timing and every check, its harnesses ended), a profiled
  forward from building the model. Exclusive even where nothing is timed:
  what a job keeps on the device lowers the free memory another job's measured calls see,
  and libraries choose kernels by free memory (docs/validation/throughput.md, session 32);
- **shared** only to open CUDA contexts (a judge started ahead): not while one measures;
- **nothing** while they start, import and wait for their job: the work that overlaps.

So what runs beside a measurement is what also runs beside one in a run of its own
(processes started ahead, holding CUDA contexts only): the generator, compiles in the
loop's pool, processes starting, profilers starting, reports being read.

Without the variable (one job per GPU, the default) :func:`from_env` gives a lock that does
nothing, and a process behaves as it always did. The lock coordinates KernelPro's own
processes (of one or several runs on the host); it cannot keep other programs off the GPU.

Moving between modes releases the lock and takes it again in the new mode (``flock``'s own
conversion is not atomic either), so two processes that both hold it shared and both want
it exclusive cannot deadlock: each gives up its share first.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

#: the variable naming the lock file of the GPU a process runs on
ENV = "KERNELPRO_GPU_LOCK"

SHARED = "shared"
EXCLUSIVE = "exclusive"
_FLAGS = {SHARED: fcntl.LOCK_SH, EXCLUSIVE: fcntl.LOCK_EX}


def lock_path(gpu: str) -> str:
    """The lock file of the GPU that ``CUDA_VISIBLE_DEVICES=<gpu>`` names (``""``: a worker
    not pinned to one), shared by every KernelPro process of this user on the host."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in (gpu or "all"))
    folder = Path(tempfile.gettempdir()) / f"kernelpro-gpu-locks-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return str(folder / f"gpu-{name}.lock")


class GpuLock:
    """The lock of one GPU as one process holds it: :meth:`hold` moves between ``None``
    (not held), :data:`SHARED` and :data:`EXCLUSIVE`; ``waited_s`` sums the seconds spent
    waiting for it, :meth:`held_s` those it was held alone. With ``path`` None every call
    does nothing."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.mode: str | None = None
        self.waited_s = 0.0
        self._exclusive_s = 0.0  # closed spells of exclusive holding
        self._since: float | None = None  # when the current exclusive spell began
        self._fd: int | None = None

    @property
    def active(self) -> bool:
        return self.path is not None

    def hold(self, mode: str | None) -> None:
        if self.path is None or mode == self.mode:
            return
        if mode is not None and mode not in _FLAGS:
            raise ValueError(f"lock mode {mode!r}: expected {SHARED!r}, {EXCLUSIVE!r} or None")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        if self.mode is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            if self._since is not None:
                self._exclusive_s += time.monotonic() - self._since
                self._since = None
            self.mode = None
        if mode is None:
            return
        t0 = time.monotonic()
        fcntl.flock(self._fd, _FLAGS[mode])
        now = time.monotonic()
        self.waited_s += now - t0
        self.mode = mode
        if mode == EXCLUSIVE:
            self._since = now

    def held_s(self) -> float:
        """Seconds this process has held the GPU alone so far (the spell under way included):
        on a shared GPU, the device time a job takes from the others."""
        return self._exclusive_s + (time.monotonic() - self._since if self._since is not None else 0.0)

    def release(self) -> None:
        self.hold(None)

    def close(self) -> None:
        self.release()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @contextmanager
    def held(self, mode: str) -> Iterator["GpuLock"]:
        """Hold it in ``mode`` for a block, then as before."""
        before = self.mode
        self.hold(mode)
        try:
            yield self
        finally:
            self.hold(before)


def from_env(env: "os._Environ[str] | dict[str, str] | None" = None) -> GpuLock:
    """The lock named by ``KERNELPRO_GPU_LOCK`` (in ``env``, by default this process's), or
    one that does nothing when it is unset or empty."""
    path = (os.environ if env is None else env).get(ENV) or None
    return GpuLock(path)
