"""Built-in executor ``ray``: a Ray cluster, one actor per GPU.

Needs the optional extra (``pip install 'kernelpro-core[ray]'``); without it the run stops
before it starts, with one line naming the extra. ``params.address``: ``auto`` joins the
cluster ``ray start`` started on this host (``ray start --head`` here, ``ray start
--address=HEAD:6379`` on the others), ``HOST:PORT`` a given one, null starts a Ray of this
process's own (this host only); a process that already called ``ray.init`` keeps its Ray.

Workers: one actor per GPU of the cluster (``num_gpus=1``; Ray sets each actor's
``CUDA_VISIBLE_DEVICES``, which the processes its jobs start inherit), or ``params.workers``
of them. A cluster without GPUs gets ``params.workers`` (default one) CPU actors, for a
``cpu`` run only. Each actor runs one job at a time.

A job's ``fn`` is pickled to the actor: the loop sends self-contained calls. Run and bench
directories must be on a file system every node sees (one host: any directory).

Failure: an actor that dies during a job (``ray.kill``, out of memory, a crashed GPU) is
replaced by a new one and its job runs once more (on the first free actor); lost a second
time, the job's outcome carries the error and the others go on.
"""

from __future__ import annotations

import collections
import importlib.util
from typing import Any, Iterator, Sequence

import attrs

from kernelpro.api import Executor, Job, JobOutcome, Slot
from kernelpro.hookspecs import hookimpl

INSTALL = "pip install 'kernelpro-core[ray]'"
#: attempts per job: the first, and one retry after its worker was lost
ATTEMPTS = 2


@attrs.frozen
class RaySettings:
    #: auto: the cluster `ray start` runs; HOST:PORT; null: a Ray of this process's own
    address: str | None = None
    #: actors; 0: one per GPU of the cluster (one CPU actor when it has no GPU)
    workers: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    #: GPUs each actor holds (1: one actor per GPU)
    gpus_per_worker: float = attrs.field(default=1.0, validator=attrs.validators.gt(0))


def _first_line(text: str) -> str:
    text = str(text).strip()
    return text.splitlines()[0] if text else ""


class _Worker:
    """The actor's body (made a Ray actor class at start)."""

    def __init__(self, device: str, index: int) -> None:
        self.device = device
        self.index = index

    def call(self, fn: Any) -> tuple[str, Any]:
        import socket

        import ray

        gpus = ",".join(str(g) for g in ray.get_gpu_ids())
        slot = Slot(name=f"ray{self.index}@{socket.gethostname()}" + (f":gpu{gpus}" if gpus else ""),
                    device=self.device, env={})
        try:
            return "ok", fn(slot)
        except Exception as exc:
            return "error", f"{type(exc).__name__}: {_first_line(str(exc))}"

    def where(self) -> str:
        import os

        return f"pid {os.getpid()}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}"


class RayExecutor(Executor):
    name = "ray"
    description = "a Ray cluster: one actor per GPU, jobs retried once when their actor is lost"
    Settings = RaySettings
    in_process = False

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        if importlib.util.find_spec("ray") is None:
            raise OSError(f"executor 'ray' needs Ray, which is not installed: {INSTALL}")
        self._actors: list[Any] = []
        self._device = "cpu"
        self._gpus = 0.0
        self._next_index = 0
        self._own_ray = False
        #: job id -> the actor running it now (a test kills one through this)
        self.in_flight: dict[str, Any] = {}
        self.lost: list[str] = []  # one line per actor lost during a job

    def start(self, device: str) -> None:
        import ray

        self._device = device
        if not ray.is_initialized():
            try:
                ray.init(address=self.settings.address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            except Exception as exc:  # no cluster at the address, a version mismatch
                raise OSError(f"executor 'ray': cannot connect to Ray"
                              f"{' at ' + self.settings.address if self.settings.address else ''}: "
                              f"{type(exc).__name__}: {_first_line(str(exc))}") from None
            self._own_ray = True
        cluster_gpus = float(ray.cluster_resources().get("GPU", 0))
        per = self.settings.gpus_per_worker
        if cluster_gpus >= per:
            self._gpus = per
            count = self.settings.workers or int(cluster_gpus // per)
        elif device.startswith("cuda"):
            raise OSError("executor 'ray': the Ray cluster has no GPU (start it with GPUs, or run with --device cpu)")
        else:
            self._gpus = 0.0
            count = self.settings.workers or 1
        self._actors = [self._new_actor() for _ in range(count)]

    def _new_actor(self) -> Any:
        import ray

        cls = ray.remote(_Worker)
        index = self._next_index
        self._next_index += 1
        # an actor holds its GPU(s) only: CPU stays free for the compiles and profilers it starts
        return cls.options(num_gpus=self._gpus, num_cpus=0 if self._gpus else 1).remote(self._device, index)

    def slots(self) -> list[Slot]:
        return [Slot(name=f"ray{i}", device=self._device, env={}) for i in range(len(self._actors))]

    def run(self, jobs: Sequence[Job]) -> Iterator[JobOutcome]:
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        if not self._actors:
            raise RuntimeError("the ray executor was not started")
        todo = collections.deque(jobs)
        attempts: dict[str, int] = collections.Counter()
        idle = list(self._actors)
        running: dict[Any, tuple[Job, Any]] = {}
        while todo or running:
            while todo and idle:
                job, actor = todo.popleft(), idle.pop(0)
                attempts[job.id] += 1
                running[actor.call.remote(job.fn)] = (job, actor)
                self.in_flight[job.id] = actor
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                job, actor = running.pop(ref)
                self.in_flight.pop(job.id, None)
                try:
                    status, value = ray.get(ref)
                except RayActorError as exc:  # the actor died with the job (ActorDiedError among them)
                    why = _first_line(str(exc)) or type(exc).__name__
                    self.lost.append(f"{job.id}: worker lost ({type(exc).__name__})")
                    replacement = self._replace(actor)
                    idle.append(replacement)
                    if attempts[job.id] < ATTEMPTS:
                        todo.appendleft(job)
                    else:
                        yield JobOutcome(id=job.id, error=f"its worker was lost {ATTEMPTS} times "
                                         f"({type(exc).__name__}: {why})", attempts=attempts[job.id])
                    continue
                except RayTaskError as exc:  # fn could not be unpickled or its value pickled
                    idle.append(actor)
                    yield JobOutcome(id=job.id, error=f"{type(exc).__name__}: {_first_line(str(exc))}",
                                     attempts=attempts[job.id])
                    continue
                idle.append(actor)
                name = self._name(actor)
                if status == "ok":
                    yield JobOutcome(id=job.id, value=value, worker=name, attempts=attempts[job.id])
                else:
                    yield JobOutcome(id=job.id, error=value, worker=name, attempts=attempts[job.id])

    def _name(self, actor: Any) -> str:
        return f"ray{self._actors.index(actor)}" if actor in self._actors else "ray"

    def _replace(self, dead: Any) -> Any:
        """A new actor in the place of one that died (its GPU is free again)."""
        new = self._new_actor()
        self._actors = [new if a is dead else a for a in self._actors]
        return new

    def shutdown(self) -> None:
        import ray

        for actor in self._actors:
            try:
                ray.kill(actor)
            except Exception:
                pass
        self._actors = []
        if self._own_ray:
            ray.shutdown()
            self._own_ray = False


@hookimpl
def kernelpro_register_executors(register):
    register(RayExecutor)
