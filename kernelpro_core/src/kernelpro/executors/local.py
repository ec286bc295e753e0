"""Built-in executor ``local``: this host, one worker per visible GPU.

Each worker is a thread that runs one job at a time with its GPU pinned: the processes a
job starts (the evaluator's judge and harnesses, the profilers) get
``CUDA_VISIBLE_DEVICES=<that GPU>`` through :attr:`kernelpro.api.Slot.env`, so they see one
device, ``cuda:0``. Jobs of one worker never overlap, and a lock per GPU, shared by every
local executor of the process, keeps an evaluation and a profiling pass off the same GPU
even when two executors name it.

Which GPUs: ``params.devices`` (GPU indices or UUIDs as ``CUDA_VISIBLE_DEVICES`` takes
them), else those in ``CUDA_VISIBLE_DEVICES``, else ``0 .. torch.cuda.device_count()-1``.
With one GPU (or on a CPU run without ``devices``) there is one worker and nothing is
pinned: the behaviour of a run before executors existed.

``params.jobs_per_gpu`` (default 1) runs that many jobs at once on each GPU: in a bench,
several problems share a GPU, so that one's CPU work (starting processes, compiling,
generating, profilers starting) overlaps another's use of the device. The whole-job lock
then gives way to :mod:`kernelpro.gpulock`: each process takes the GPU's lock file for
itself from its first work on the device to its end, so no measurement sees another
job's kernels or the memory another job keeps.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Iterator, Sequence

import attrs

from kernelpro import gpulock
from kernelpro.api import Executor, Job, JobOutcome, Slot
from kernelpro.hookspecs import hookimpl

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def device_lock(key: str) -> threading.Lock:
    """The process-wide lock of one device (``key``: its ``CUDA_VISIBLE_DEVICES`` value,
    ``""`` for an unpinned worker)."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip()]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # no usable torch CUDA: no GPU
        return []


@attrs.frozen
class LocalSettings:
    #: GPUs to run on (indices or UUIDs); null: every visible GPU on a cuda run, one unpinned
    #: worker on a cpu run
    devices: list[str] | None = None
    #: jobs run at once on each GPU (a bench's problems); above 1 they coordinate through
    #: the GPU's lock file (kernelpro.gpulock): one process works on the device at a time
    jobs_per_gpu: int = 1

    def __attrs_post_init__(self) -> None:
        if isinstance(self.jobs_per_gpu, bool) or not isinstance(self.jobs_per_gpu, int) or self.jobs_per_gpu < 1:
            raise ValueError(f"jobs_per_gpu: expected a whole number of at least 1, got {self.jobs_per_gpu!r}")
        if self.devices is not None:
            if not self.devices:
                raise ValueError("devices: expected at least one GPU, or null for every visible one")
            if len(set(self.devices)) != len(self.devices):
                raise ValueError(f"devices: a GPU is named twice: {self.devices}")


class LocalExecutor(Executor):
    name = "local"
    description = "this host: one worker per visible GPU, each job pinned to its GPU"
    Settings = LocalSettings

    def __init__(self, settings: Any = None, env: dict[str, str] | None = None) -> None:
        super().__init__(settings)
        self._slots: list[Slot] = []
        #: added to every slot's variables (a bench's problem passes its worker's GPU lock on)
        self._env = dict(env or {})

    def start(self, device: str) -> None:
        devices = self.settings.devices
        if devices is None and device.startswith("cuda"):
            devices = visible_gpus()
            if len(devices) <= 1:
                devices = None  # one GPU: nothing to pin
        base: list[tuple[str, dict[str, str]]]
        if devices is None:
            base = [("local", {})]
        else:
            base = [(f"gpu{d}", {"CUDA_VISIBLE_DEVICES": str(d)}) for d in devices]
        n = self.settings.jobs_per_gpu
        if n == 1:
            self._slots = [Slot(name=name, device=device, env={**env, **self._env}) for name, env in base]
        else:  # the first job of every GPU before the second of any
            self._slots = [Slot(name=f"{name}.{k}", device=device,
                                env={**env, **self._env,
                                     gpulock.ENV: gpulock.lock_path(env.get("CUDA_VISIBLE_DEVICES", ""))})
                           for k in range(n) for name, env in base]

    def slots(self) -> list[Slot]:
        if not self._slots:
            raise RuntimeError("the local executor was not started")
        return list(self._slots)

    def run(self, jobs: Sequence[Job]) -> Iterator[JobOutcome]:
        jobs = list(jobs)
        if not jobs:
            return
        if len(self.slots()) == 1:
            # one worker: the caller's own thread, as before executors (Ctrl-C reaches the
            # evaluation, which ends its processes itself)
            slot = self.slots()[0]
            for job in jobs:
                yield self._one(slot, job)
            return
        todo: queue.SimpleQueue[Job] = queue.SimpleQueue()
        for job in jobs:
            todo.put(job)
        done: queue.SimpleQueue[JobOutcome] = queue.SimpleQueue()
        workers = [threading.Thread(target=self._work, args=(slot, todo, done), daemon=True,
                                    name=f"kernelpro-{slot.name}")
                   for slot in self.slots()[:len(jobs)]]
        for w in workers:
            w.start()
        finished = False
        try:
            for _ in jobs:
                yield done.get()
            finished = True
        finally:
            if not finished:  # the caller stopped (Ctrl-C, an error): no evaluation goes on behind it
                while True:
                    try:
                        todo.get_nowait()
                    except queue.Empty:
                        break
                from kernelpro.evaluate.runner import stop_judges

                stop_judges(w.ident for w in workers if w.ident is not None)
        for w in workers:
            w.join()

    @staticmethod
    def _one(slot: Slot, job: Job) -> JobOutcome:
        # a whole problem (bench) holds no device lock: its own jobs take it; on a GPU shared
        # by several jobs their processes take the GPU's lock file instead (kernelpro.gpulock)
        lock = device_lock(slot.env.get("CUDA_VISIBLE_DEVICES", "")) \
            if job.kind != "problem" and gpulock.ENV not in slot.env else None
        try:
            if lock is not None:
                lock.acquire()
            try:
                value = job.fn(slot)
            finally:
                if lock is not None:
                    lock.release()
        except Exception as exc:  # the job's failure is its outcome; the worker goes on
            line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            return JobOutcome(id=job.id, error=f"{type(exc).__name__}: {line}", worker=slot.name)
        return JobOutcome(id=job.id, value=value, worker=slot.name)

    @classmethod
    def _work(cls, slot: Slot, todo: "queue.SimpleQueue[Job]", done: "queue.SimpleQueue[JobOutcome]") -> None:
        from kernelpro.evaluate.runner import forget_thread

        while True:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                forget_thread()
                return
            try:
                done.put(cls._one(slot, job))
            except BaseException as exc:  # not an Exception (SystemExit in a job): still an outcome
                done.put(JobOutcome(id=job.id, error=f"{type(exc).__name__}", worker=slot.name))


@hookimpl
def kernelpro_register_executors(register):
    register(LocalExecutor)
