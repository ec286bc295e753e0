"""The judge: one evaluation, decided in a process no candidate code runs in.

    python -m kernelpro.evaluate.judge_main DEVICE      (started by runner.evaluate)

The judge starts two harness processes (:mod:`kernelpro.evaluate.harness`): the
*reference* harness builds the problem's model, the *candidate* harness confines itself
and imports the candidate. The judge draws every input, keeps the reference's outputs,
compares, decides the verdict and reports it over the signed result channel. It holds
the only copies of what decides the verdict; the candidate's process holds none of them.

Stages (each named in the job's status file and timed in
``measurements.evaluator.stage_<name>_s``; docs/evaluation.md states the method):

1. ``reference`` / ``reference_outputs``: the reference harness builds the model after the
   seed (fp32, no TF32); the judge draws each trial's inputs and keeps the reference's
   outputs while they fit in ``device_copy_share`` of the device's memory (the others are
   computed again at correctness). ``degenerate_check``, ``bounds`` (bytes/FLOPs lower bound) and
   ``compile_reference`` (``torch.compile`` of the reference) follow.
2. ``compile`` / ``build``: the source scan, then the candidate harness imports the
   candidate and builds ``ModelNew``.
3. ``correctness``: trial by trial, the candidate's outputs are read back from the judge's
   buffers and compared; inputs unmodified; no threads or processes left working.
4. ``timing``: reference, compiled reference and candidate, interleaved call block by call
   block; before each call the judge refills that harness's inputs with new values and
   flushes the L2; around each call it measures its own clock (the envelope), the
   harness's CPU time between calls and the processes it left.
5. ``verify``: a sample of timed calls re-checked against the reference on the same
   values; the envelope cross-check; ``reverify`` for suspicious speedups; measurements.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import os
import random
import secrets
import statistics
import time
import types
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Callable

import attrs
import torch

from kernelpro import gpulock
from kernelpro.evaluate import bounds, inputs as inp, procwatch, timing, transport
from kernelpro.evaluate import compare as cmp
from kernelpro.evaluate.guard import STRICT, scan_source, strict_differs
from kernelpro.evaluate.harness import one_line
from kernelpro.evaluate.loader import load_module, make_inputs
from kernelpro.evaluate.remote import HarnessEnded, Remote
from kernelpro.records import CompileResult, CorrectnessResult, EvalResult, Verdict

#: default of ``evaluator.device_copy_share``: the share of the GPU's available memory the
#: judge's own copies (the reference's outputs, whole re-check copies) may take
DEVICE_COPY_SHARE = 0.25
#: verdicts a harness may report for a failed request (never "correct")
FAILURE_VERDICTS = {v.value for v in Verdict} - {Verdict.CORRECT.value}


class _CompiledFailed(Exception):
    """A compiled reference failed while it was timed (it is optional); ``args[1]``: which."""


#: the float64 reference's outputs on every input set within this share of their largest
#: value: the function is constant (the row sums of a softmax over 512 columns were within
#: 4.4e-16 of 1 in float64, 2.4e-7 in float32)
CONSTANT_RTOL = 1e-12


class _TimedCallOOM(Exception):
    """A timed call ran out of device memory, the first time in this evaluation: the judge
    sheds its copies and makes the call again."""


class _NoFreshSet(Exception):
    """A new input set could not be drawn (it was drawn before: the device lacks room)."""


@attrs.frozen
class Redraw:
    """An input set the judge does not keep: drawn again from its seed (``other``: the N(0, 1)
    set) where a call needs it. On a GPU that takes milliseconds, where copying a set of
    gigabytes to page-locked host memory took seconds; used only after the set was drawn
    twice with the same bits (:meth:`Judge.redraw_allowed`)."""

    seed: int
    other: bool


#: a second draw slower than this (a ``get_inputs`` that falls back to the CPU) is not used
#: for sets beyond the budget: they wait in host memory instead
REDRAW_MAX_S = 0.5


#: seconds between the envelope's confirming look and the second one that must agree
RECONFIRM_PAUSE_S = 0.2


class Fail(Exception):
    def __init__(self, verdict: Verdict, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.verdict, self.reason, self.extra = verdict, reason, extra


def stage_seconds(stages: list[tuple[str, float]], end: float) -> dict[str, float]:
    """Seconds spent in each stage (a stage entered twice is summed), the last one up to ``end``."""
    out: dict[str, float] = {}
    for (name, t), nxt in zip(stages, [t for _, t in stages[1:]] + [end]):
        out[name] = out.get(name, 0.0) + max(0.0, nxt - t)
    return out


def suspicious_speed(reference_ms: float, candidate_ms: float, bound: Any, ev: dict[str, Any]) -> list[str]:
    """Flags for a speedup above ``max_speedup`` or a time below ``impossible_margin`` x the
    physical lower bound (``bound``: a :class:`kernelpro.evaluate.bounds.Bound` or None)."""
    out = []
    speedup = reference_ms / max(candidate_ms, 1e-9)
    if speedup > float(ev.get("max_speedup", 100.0)):
        out.append(f"suspicious_speedup: {speedup:.1f}x exceeds evaluator.max_speedup")
    margin = float(ev.get("impossible_margin", 0.9))
    if bound is not None and candidate_ms < margin * bound.memory_ms:
        out.append(
            f"physically_impossible: {candidate_ms:.4g} ms is below the {bound.memory_ms:.4g} ms the "
            f"reference's bytes need on {bound.gpu} (its lower bound {bound.lower_ms:.4g} ms, "
            f"compute {bound.compute_ms:.4g} ms)")
    elif bound is not None and candidate_ms < margin * bound.lower_ms:
        # above the time its bytes need, below the time the reference's FLOPs need at peak:
        # possible only with less arithmetic (an algebraic rewrite) or work skipped
        out.append(
            f"fewer_flops_than_reference: {candidate_ms:.4g} ms is below the {bound.compute_ms:.4g} ms "
            f"the reference's FLOPs need on {bound.gpu} at peak (its bytes need {bound.memory_ms:.4g} ms): "
            "less arithmetic than the reference, or work skipped")
    return out


def _number(answer: dict[str, Any], key: str) -> float:
    """A time a harness reported, or a protocol failure when it is not a finite number >= 0."""
    v = answer.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not (0.0 <= float(v) < float("inf")):
        raise Fail(Verdict.INTEGRITY, f"the candidate's process reported an impossible {key}: {v!r}")
    return float(v)


#: CPU a harness may use in each interval between its calls without it counting: its own
#: return from the answer to waiting for the next call. On the CPU machine, honest harnesses
#: used 3-6 us per interval when it was idle, but intervals last only 0.06-0.3 ms there, so
#: the few tens of microseconds a loaded machine defers into them read as 40 % of a core
#: (an honest candidate was rejected so in CI); a thread left working uses the whole interval
IDLE_ALLOWANCE_NS = 100_000
#: seconds of no call at all over which an idle-CPU violation's reason measures the
#: candidate's process (:meth:`Judge._quiet_look`)
IDLE_QUIET_S = 1.0


class IdleMeter:
    """CPU time a harness's processes used between its calls (when only the judge works)."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.pids = [remote.pid] if remote.pid else []
        self.cpu_ns = 0
        self.wall_s = 0.0
        #: each interval's share of a core, beyond IDLE_ALLOWANCE_NS of CPU
        self.intervals: list[float] = []
        self._open: tuple[float, int] | None = None
        #: when set (the second look), CPU between calls per thread name, nanoseconds
        self.by_thread: dict[str, int] | None = None
        self._threads: dict[tuple[int, int], tuple[str, int]] = {}

    def answered(self) -> None:
        """A call's answer arrived: an idle interval begins."""
        if self.by_thread is not None:
            self._threads = procwatch.threads_cpu_ns(self.pids)
        self._open = (time.monotonic(), self.remote.cpu_ns(self.pids))

    def calling(self) -> None:
        """A call is about to be sent: the idle interval ends."""
        if self._open is not None:
            t0, c0 = self._open
            cpu, wall = max(0, self.remote.cpu_ns(self.pids) - c0), time.monotonic() - t0
            self.cpu_ns += cpu
            self.wall_s += wall
            if wall > 0:
                self.intervals.append(max(0, cpu - IDLE_ALLOWANCE_NS) / 1e9 / wall)
            self._open = None
            if self.by_thread is not None:
                for key, (name, ns) in procwatch.threads_cpu_ns(self.pids).items():
                    # a thread started in the interval counts from 0; Python's own threads
                    # all carry the interpreter's name, so the main one is told apart
                    delta = ns - self._threads.get(key, (name, 0))[1]
                    label = f"{name} (main thread)" if key[0] == key[1] else name
                    if delta > 0:
                        self.by_thread[label] = self.by_thread.get(label, 0) + delta

    def restart(self) -> None:
        """Forget what was measured: a second look, on calls made afresh."""
        self.cpu_ns, self.wall_s, self.intervals, self._open = 0, 0.0, [], None
        if self.by_thread is not None:
            self.by_thread = {}

    def busiest(self, n: int = 3) -> str:
        """The threads that used the most CPU between calls while ``by_thread`` was set
        ("name 12.3 ms, ..."); "" when none was measured."""
        top = sorted((self.by_thread or {}).items(), key=lambda kv: -kv[1])[:n]
        return ", ".join(f"{name} {ns / 1e6:.1f} ms" for name, ns in top if ns > 0)

    @property
    def share(self) -> float:
        return self.cpu_ns / 1e9 / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def upper_share(self) -> float:
        """The upper quartile of the intervals' shares: work after a quarter of the calls or
        more shows; a single burst (a library's lazy start-up) does not."""
        if len(self.intervals) < 4:
            return min(self.intervals, default=0.0)
        return statistics.quantiles(self.intervals, n=4)[2]


class _ImportTimeout(BaseException):
    """The problem's import ran past ``load_timeout_s`` (raised by the judge's own timer)."""


def _load_problem_within(path: str, limit_s: float) -> types.ModuleType:
    """Import the problem in the judge, stopped after ``limit_s``: a problem file that never
    finishes importing (a loop or a wait at module level) is the problem's failure, said after
    the load limit and not at the evaluation's backstop (``timeout_s``, a verdict of timeout)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or limit_s <= 0:
        return load_module(path, "kernelpro_problem")

    def expired(_signum: int, _frame: Any) -> None:
        raise _ImportTimeout()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        return load_module(path, "kernelpro_problem")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Judge:
    """One evaluation; ``ref`` and ``cand``: the harnesses, started by
    :mod:`kernelpro.evaluate.judge_main` (``cand`` None for the baseline job)."""

    def __init__(self, job: dict[str, Any], ref: Remote, cand: Remote | None) -> None:
        self.job = job
        self.ev: dict[str, Any] = job["evaluator"]
        self.device: str = job["device"]
        self.cuda = self.device.startswith("cuda")
        self.seed = int(job["seed"])
        # whether the reference writes into its inputs / returns (a view of) one (a candidate may too)
        self.ref_writes_inputs = False
        self.ref_inputs_after: dict[int, list[torch.Tensor]] = {}  # trial -> its inputs after the reference's call
        self.ref_aliases = False
        self.workdir = Path(job["workdir"])
        self.flags: list[str] = []
        self.notes: dict[str, float] = {}
        self.stages: list[tuple[str, float]] = []
        self.t_start = time.monotonic()
        # a GPU shared with other jobs (gpulock): held alone from the first stage on it until
        # the process exits, after both harnesses (and the memory they hold) are gone
        self.gpu_lock = gpulock.from_env()
        self.gpu_name: str | None = None
        self.ref: Remote | None = ref
        self.cand: Remote | None = cand
        self.ref_idle: IdleMeter | None = None
        self.ref_sched: tuple[int | None, str] = (None, "")
        self.cand_idle: IdleMeter | None = None
        self.buffers: list[transport.Buffer] = []
        self.compile_res: CompileResult | None = None
        self.bound: Any = None
        self.ref_call_s = 0.0
        self._calls: dict[str, Callable[..., timing.Sample]] = {}
        self._confirming = False
        self._last_out: Any = None  # the candidate's output of its last call not re-checked
        self.share = float(self.ev.get("device_copy_share", DEVICE_COPY_SHARE))
        self._redraw: bool | None = None  # whether sets beyond the budget are drawn again (decided once)

    # --- small helpers ----------------------------------------------------------------------------

    def status(self, stage: str) -> None:
        Path(self.job["status"]).write_text(stage)
        self.stages.append((stage, time.monotonic()))
        if self.gpu_lock.active:
            self.lock_for(stage)

    def lock_for(self, stage: str) -> None:
        """On a GPU shared with other jobs (:mod:`kernelpro.gpulock`): nothing held while the
        judge starts, then the GPU alone from its first stage on the device until its process
        exits, its harnesses ended (the kernel lets go of the lock with the process).
        Not shared while it only computes: what a job keeps on the device (inputs, kept
        outputs) lowers the free memory another job's measured calls see, and libraries
        choose kernels by free memory (a transposed convolution's reference ran at 17.0 ms
        instead of 5.3 ms with 70 GB of the GPU held by another problem's processes, most
        likely cuDNN without workspace; docs/validation/throughput.md, session 32). Waits
        are in the notes."""
        self.gpu_lock.hold(None if stage == "start" else gpulock.EXCLUSIVE)
        self.notes["gpu_lock_wait_s"] = self.gpu_lock.waited_s

    def fail(self, verdict: Verdict, reason: str, **extra: Any) -> Fail:
        if self.compile_res is not None:
            extra.setdefault("compile", self.compile_res)
        return Fail(verdict, reason, **extra)

    def call_limit(self) -> float:
        """Seconds a call may take: ``call_timeout_factor`` x the reference's call, within
        ``call_timeout_floor_s`` .. ``call_timeout_ceiling_s``."""
        ev = self.ev
        return min(max(float(ev["call_timeout_factor"]) * self.ref_call_s, float(ev["call_timeout_floor_s"])),
                   float(ev["call_timeout_ceiling_s"]))

    def ask(self, remote: Remote, msg: dict[str, Any], timeout: float, what: str, fds: Sequence[int] = (),
            idle_s: float | None = None) -> dict[str, Any]:
        """A request whose failure (timeout, death, a failure answer) ends the evaluation."""
        try:
            answer = remote.request(msg, timeout, what, fds, idle_s=idle_s)
        except HarnessEnded as end:
            raise self.ended(remote, end) from None
        if not answer.get("ok", False):
            verdict = str(answer.get("verdict", "runtime_error"))
            if verdict not in FAILURE_VERDICTS:
                verdict = "runtime_error"
            reason = str(answer.get("reason", "failed"))[:2000]
            if remote is self.ref and answer.get("evaluator"):
                raise Fail(Verdict.CRASH, f"{reason} ({what}, in the reference's process)")
            if remote is self.ref and verdict == "oom" and self.job.get("candidate") is not None:
                # its baseline job ran on its own: beside the candidate's process the device
                # lacked room (the candidate's memory, or the evaluation's), not the problem's fault
                raise self.fail(Verdict.OOM, f"the reference ran out of memory beside the candidate ({what}): "
                                f"{reason}")
            if remote is self.ref:
                raise Fail(Verdict.PROBLEM_ERROR, reason if verdict == "problem_error"
                           else f"the reference failed ({what}): {reason}")
            raise self.fail(Verdict(verdict), reason, log=str(answer.get("log", ""))[:8000])
        return answer

    def ended(self, remote: Remote, end: HarnessEnded) -> Fail:
        stage = self.stages[-1][0] if self.stages else "start"
        if remote is self.ref:
            return Fail(Verdict.PROBLEM_ERROR, f"the reference's process ended ({end.reason}; stage: {stage})")
        verdict = Verdict(end.verdict) if end.verdict in FAILURE_VERDICTS else Verdict.CRASH
        if verdict is Verdict.TIMEOUT and stage in ("compile", "build"):
            verdict = Verdict.COMPILE_TIMEOUT
        return self.fail(verdict, f"{end.reason} (stage: {stage})")

    def allocate(self, specs: list[dict[str, Any]]) -> tuple[list[transport.Buffer], list[dict[str, Any]]]:
        bufs, out = [], []
        for spec in specs:
            buf = transport.Buffer.allocate(spec["nbytes"], self.device)
            self.buffers.append(buf)
            bufs.append(buf)
            out.append({**spec, "buffer": buf.desc})
        return bufs, out

    def lend_inputs(self, remote: Remote, example: list[Any], what: str) -> list[torch.Tensor]:
        """Allocate ``remote``'s input buffers shaped like ``example`` and lend them to it."""
        try:
            tree, tensors, specs = transport.describe_inputs(example)
        except transport.TransportError as exc:
            raise Fail(Verdict.PROBLEM_ERROR, str(exc)) from None
        bufs, sent = self.allocate(specs)
        views = [b.view(transport.dtype_of(s["dtype"]), tuple(s["shape"]), tuple(s["stride"]))
                 for b, s in zip(bufs, specs)]
        self.ask(remote, {"op": "inputs", "tree": tree, "specs": sent}, 60.0, what,
                 fds=[b.fd for b in bufs if b.kind == "host"])
        return views

    def lend_outputs(self, remote: Remote, ref_out: Any, key: str, dtype: Callable[[torch.dtype], torch.dtype]
                     = lambda d: d) -> list[torch.Tensor]:
        """Allocate output buffers for the tensors of ``ref_out`` (dtypes mapped by ``dtype``)."""
        specs: list[dict[str, Any]] = []
        for t in cmp.tensors(ref_out):
            dt = dtype(t.dtype)
            specs.append({"dtype": transport.dtype_name(dt), "shape": list(t.shape),
                          "nbytes": t.numel() * torch.empty((), dtype=dt).element_size()})
        bufs, sent = self.allocate(specs)
        views = [b.view(transport.dtype_of(s["dtype"]), tuple(s["shape"])) for b, s in zip(bufs, specs)]
        self.ask(remote, {"op": "outputs", "key": key, "specs": sent}, 60.0, f"lending {key} output buffers",
                 fds=[b.fd for b in bufs if b.kind == "host"])
        return views

    def read_back(self, answer: dict[str, Any], ref_out: Any, views: list[torch.Tensor],
                  reference: bool = False, check_values: bool = True) -> tuple[Any, Any]:
        leaves = transport.output_leaves(answer.get("out"))
        exported = answer.get("exported") or []
        if not isinstance(exported, list):
            exported = []
        return cmp.read_back(leaves, [bool(x) for x in exported], ref_out, views, torch.device(self.device).type,
                             reference=reference, check_values=check_values,
                             alias_ok=self.ref_aliases)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    # --- the evaluation -----------------------------------------------------------------------------

    def run(self) -> EvalResult:
        baseline_job = self.job.get("candidate") is None
        self.status("start")
        try:
            self.reference()
            self.reference_outputs()
            self.degenerate_check()
            self.estimate_bound()
            self.compile_reference(baseline_job)
            if baseline_job:
                return self.time_baseline()
            self.make_room()
            self.load_candidate()
            self.correctness()
            self.time_all()
            self.verify()
            self.check_fresh_inputs()
            # the cross-checks after the new sets too: work between their calls, or processes
            # left to slow the reference there, count as anywhere else
            self.check_processes("fresh_inputs")
            self.cross_check()
            self.extra_flags()
            self.reverify_if_suspicious()
            self.measure()
            return self.result()
        finally:
            self.stop_candidate()

    def stop_candidate(self) -> None:
        """End the candidate's harness and everything it started (before the verdict is
        sent: the parent checks the files it must leave alone once it has the verdict)."""
        if self.cand is not None:
            self.cand.close()

    def stop_harnesses(self) -> None:
        for r in (self.cand, self.ref):
            if r is not None:
                r.close()

    # 1. reference ---------------------------------------------------------------------------------

    def reference(self) -> None:
        assert self.ref is not None
        load = float(self.ev["load_timeout_s"])
        # the reference harness's answer to its hello before the stage that takes a shared GPU:
        # until it answers it only imports (a baseline job's compiler stack: judge_main's preload)
        try:
            self.ref.hello(load)
        except HarnessEnded as end:
            raise self.ended(self.ref, end) from None
        self.status("reference")
        self.ref_idle = IdleMeter(self.ref)
        # how the reference's harness is scheduled, before any candidate code exists: the
        # candidate's process could lower it (its autogroup is writable by the same user)
        self.ref_sched = procwatch.sched_state(self.ref.pid) if self.ref.pid else (None, "")
        if self.cuda:
            self.gpu_name = torch.cuda.get_device_name()
        try:
            self.problem = _load_problem_within(self.job["problem"], load)
        except _ImportTimeout:
            raise Fail(Verdict.PROBLEM_ERROR, f"the problem itself failed to load: importing it took longer than "
                       f"{load:g} s (evaluator.load_timeout_s)") from None
        except (Exception, SystemExit) as exc:  # sys.exit() in a problem file is its failure, not the judge's
            raise Fail(Verdict.PROBLEM_ERROR, "the problem itself failed to load: " + one_line(exc)) from None
        self.tols, notes = tolerances(self.ev, self.problem)
        if notes:
            self.flags.append("problem_tolerances: " + "; ".join(notes))
        self.ask(self.ref, {"op": "setup", "problem": self.job["problem"], "seed": self.seed}, load,
                 "building the reference")

    def draw_set(self, recipe: Redraw) -> list[Any]:
        values = self.draw_inputs(recipe.seed)
        return inp.other_distribution(values, recipe.seed) if recipe.other else values

    def values_of(self, j: int) -> list[Any]:
        """Input set ``j``'s values: kept (on the device or in host memory), or drawn again."""
        kept = self.input_sets[j]
        return self.draw_set(kept) if isinstance(kept, Redraw) else kept

    def redraw_allowed(self, values: list[Any], recipe: Redraw) -> bool:
        """Whether sets may be drawn again instead of kept (decided on the first set that does
        not fit): on a GPU, where drawing ``recipe`` again gives ``values``' bits within
        ``REDRAW_MAX_S`` (a ``get_inputs`` that draws from an unseeded generator, or on the
        CPU, keeps its sets in host memory)."""
        if self._redraw is None:
            self._redraw = False
            if self.cuda:
                t0 = time.monotonic()
                again = self.draw_set(recipe)
                same = fingerprint(again) == fingerprint(values)
                self.sync()
                took = time.monotonic() - t0
                del again
                self.notes["input_set_redraw_s"] = took
                self._redraw = same and took <= REDRAW_MAX_S
                if not same:
                    self.notes["input_sets_not_reproducible"] = 1.0
        return self._redraw

    def draw_inputs(self, seed: int) -> list[Any]:
        try:
            return make_inputs(self.problem, seed, self.device)
        except torch.OutOfMemoryError as exc:
            # in a candidate's job the candidate's process holds room the baseline job had
            verdict = Verdict.OOM if self.job.get("candidate") is not None else Verdict.PROBLEM_ERROR
            raise Fail(verdict, "the problem's get_inputs() ran out of device memory: " + one_line(exc)) from None
        except (Exception, SystemExit) as exc:
            raise Fail(Verdict.PROBLEM_ERROR, "the problem's get_inputs() failed: " + one_line(exc)) from None

    def reference_outputs(self) -> None:
        """Every trial's inputs (kept) and the reference's outputs on them: kept where they fit
        in ``device_copy_share`` of the device's available memory, else called again on the
        same inputs when the correctness stage needs them (:meth:`trial_reference`). What the
        degenerate check and the constant-output check need of each output is taken here."""
        self.status("reference_outputs")
        ref = self.ref
        assert ref is not None
        trials = int(self.ev["trials"])
        on = self.device if self.cuda else None
        # where this stage's seconds go (notes ref_outputs_<part>_s): on problems with inputs of
        # gigabytes it is the longest stage of a candidate's evaluation
        split = {"draw": 0.0, "lend": 0.0, "fill": 0.0, "call": 0.0, "export": 0.0, "read_back": 0.0,
                 "keep": 0.0, "watch": 0.0}
        clock = [time.monotonic()]

        def lap(part: str) -> None:
            now = time.monotonic()
            split[part] += now - clock[0]
            clock[0] = now

        # the input sets stay on the device while they fit in the copies' share of its memory
        # and leave room for what the evaluation allocates later (the first always stays);
        # the others wait in host memory, copied in when a call needs them: on a GPU of 80 GB
        # six sets of a 7.5-GB KernelBench input did not fit beside the harnesses' buffers
        in_budget = [math.inf]
        self.input_sets: list[Any] = []  # each a list of values, or a Redraw
        self.recipes: list[Redraw] = []  # how each set was drawn
        for t in range(trials):
            recipe = Redraw(self.seed + 1 + t, False)
            values = self.draw_inputs(recipe.seed)
            if t == 0 and self.cuda:
                self.in_bytes = _output_bytes(values)
                # still to come: both harnesses' input and output buffers, the output each
                # model allocates, a fresh input set. The outputs' size is not known before the
                # reference's first call: taken as the inputs' (a reduction's are smaller, so
                # fewer sets stay than could)
                out_guess = self.in_bytes
                in_budget = [self.copies_budget(later=3 * self.in_bytes + 4 * out_guess)]
            self.input_sets.append(self.place_inputs(values, in_budget, recipe))
            self.recipes.append(recipe)
            del values
        self.sync()
        lap("draw")
        self.ref_in = self.lend_inputs(ref, self.input_sets[0], "lending the reference's inputs")
        lap("lend")
        # None where an output is not kept (called again at correctness)
        self.ref_outs: list[Any] = []
        self.ref_watch = ReferenceWatch(self.tols, on, trials)
        self.ref_views: list[torch.Tensor] | None = None
        budget: list[float] = []
        first = float(self.ev["first_call_timeout_s"])
        call_s: list[float] = []

        def keep(out: Any) -> Any:
            nbytes = _output_bytes(out)
            if not budget:
                # still to come: the candidate's input and output buffers, the output its model
                # allocates, a fresh input set at a time
                budget.append(self.copies_budget(later=2 * self.in_bytes + 2 * nbytes) if self.cuda
                              else self.share * _available_bytes(False))
            if nbytes > budget[0]:
                return None
            budget[0] -= nbytes
            return cmp.snapshot(out)

        def one(values: list[Any], other: bool = False) -> None:
            inp.fill(self.ref_in, values)
            self.sync()
            lap("fill")
            t0 = time.monotonic()
            answer = self.ask(ref, {"op": "call", "export": self.ref_views is not None},
                              first if not call_s else max(first, self.call_limit()), "the reference's forward")
            call_s.append(time.monotonic() - t0)
            lap("call")
            if self.ref_views is None:  # the first call tells the output's structure
                self.ref_example = _example(answer.get("out"), self.device)
                self.ref_views = self.lend_outputs(ref, self.ref_example, "main")
                exported = self.ask(ref, {"op": "export"}, 60.0, "handing back the reference's output")
                answer = {**answer, "exported": exported.get("exported")}
                lap("export")
            self.ref_call_s = statistics.median(call_s)
            err, out = self.read_back(answer, self.ref_example, self.ref_views, reference=True)
            if err is not None:
                raise Fail(Verdict.PROBLEM_ERROR, f"the reference's output cannot be read back: {err.message}")
            # what the reference does to its inputs a candidate may do too: write into them,
            # return (a view of) one of them
            if not inp.unchanged(values, self.ref_in):  # the inputs as it left them: part of its result
                self.ref_writes_inputs = True
                self.ref_inputs_after[len(self.ref_outs)] = [t.clone() for t in self.ref_in]
            if not self.ref_aliases:
                self.ref_aliases = any(isinstance(leaf, dict) and isinstance(leaf.get("tensor"), dict)
                                       and bool(leaf["tensor"].get("alias"))
                                       for leaf in transport.output_leaves(answer.get("out")))
            self.sync()
            lap("read_back")
            if other and not all(torch.isfinite(x).all() for x in cmp.tensors(out) if x.is_floating_point()):
                self.flags.append("other_distribution_skipped: reference not finite on N(0,1) inputs")
                return
            kept = keep(out)
            self.sync()
            lap("keep")
            self.ref_watch.add(out, kept)
            self.sync()
            lap("watch")
            if other:
                self.recipes.append(Redraw(self.seed + 1000, True))
                self.input_sets.append(self.place_inputs(values, in_budget, self.recipes[-1]))
            self.ref_outs.append(kept)

        for j in range(len(self.input_sets)):
            one(self.values_of(j))
        self.check_reference_repeats()
        if self.ev.get("other_distribution", True):
            values = inp.other_distribution(self.draw_inputs(self.seed + 1000), self.seed + 1000)
            self.sync()
            lap("draw")
            one(values, other=True)
        self.ref_out_bytes = _output_bytes(self.ref_example)
        self.ref_watch.anchor = None  # compared with later outputs here only; a kept output can be shed
        self.recomputed = 0
        self.notes["reference_outputs_on_device" if self.cuda else "reference_outputs_kept"] = \
            float(sum(o is not None for o in self.ref_outs))
        self.notes["reference_call_s"] = self.ref_call_s
        self.notes.update({f"ref_outputs_{part}_s": v for part, v in split.items()})

    def copies_budget(self, later: float) -> float:
        """Bytes of the device the judge's optional copies (input sets beyond the first, the
        reference's outputs) may take now: ``device_copy_share`` of the available memory, and
        no more than leaves ``later`` bytes (what the evaluation will still allocate) plus a
        margin (a twentieth of the device, at least 1 GiB) free."""
        avail = _available_bytes(True)
        total = torch.cuda.get_device_properties(torch.device(self.device)).total_memory
        margin = max(float(1 << 30), 0.05 * total)
        return max(0.0, min(self.share * avail, avail - later - margin))

    def place_inputs(self, values: list[Any], budget: list[float], recipe: Redraw | None = None) -> Any:
        """The first set as it is; later ones kept where they are while their device bytes fit
        in ``budget[0]`` (taken from it), else drawn again when needed (``recipe``, where
        :meth:`redraw_allowed`; note ``input_sets_redrawn``) or moved to host memory (note
        ``input_sets_on_host``)."""
        if not self.input_sets:
            return values
        nbytes = sum(t.numel() * t.element_size() for t in inp.tensors(values) if t.device.type != "cpu")
        if nbytes <= budget[0]:
            budget[0] -= nbytes
            return values
        return self.set_aside(values, recipe)

    def set_aside(self, values: list[Any], recipe: Redraw | None) -> Any:
        """A set that does not stay on the device: its recipe, or a page-locked host copy."""
        if recipe is not None and self.redraw_allowed(values, recipe):
            self.notes["input_sets_redrawn"] = self.notes.get("input_sets_redrawn", 0.0) + 1.0
            return recipe
        self.notes["input_sets_on_host"] = self.notes.get("input_sets_on_host", 0.0) + 1.0
        t0 = time.monotonic()
        host = inp.to_host(values)
        # part of ref_outputs_draw_s: page-locking gigabytes of host memory is not free
        self.notes["input_sets_to_host_s"] = self.notes.get("input_sets_to_host_s", 0.0) + time.monotonic() - t0
        return host

    def on_device_sets(self) -> list[int]:
        """The input sets the timed calls take their values from: those on the device (the
        first always is; each call scales its set's values by a factor of its own, so one set
        still gives every call new values). A set in host memory would cost a copy of
        gigabytes before each call."""
        every = list(range(len(self.input_sets)))
        if not self.cuda:
            return every
        return [j for j in every if not isinstance(self.input_sets[j], Redraw)
                and all(t.device.type != "cpu" for t in inp.tensors(self.input_sets[j]))]

    def timed_set(self, j: int) -> int:
        """The set a timed or ordinary call takes its values from: ``j``, or the first set where
        ``j`` was set aside since the timed calls began (room made for a float64 opinion or a
        fresh-input set). The first set scaled by the call's own factor is new values too, and
        drawing gigabytes again beside a fresh set could run out of the room just made."""
        return 0 if isinstance(self.input_sets[j], Redraw) else j

    def trim(self) -> None:
        """Both allocators' cached free blocks back to the driver: the judge's (temporaries of
        drawing and checking the inputs and outputs) and the reference's process (its eager,
        compiled and training-mode calls). Cached blocks are room only their own process can
        use; the candidate's process needs it for the output its model allocates."""
        if not self.cuda:
            return
        self.sync()
        torch.cuda.empty_cache()
        if self.ref is not None and self.ref_views is not None:
            answer = self.ask(self.ref, {"op": "trim"}, 60.0, "releasing the reference's cached memory")
            self.notes["reference_reserved_after_trim_bytes"] = float(answer.get("reserved") or 0)

    def shed_copies(self) -> float:
        """Move the judge's optional device copies out of the way: input sets beyond the first
        set aside (:meth:`set_aside`: drawn again, or in page-locked host memory), the
        reference's kept outputs dropped (called again at correctness); then :meth:`trim`.
        The bytes freed on the device (note ``copies_shed_bytes``)."""
        freed = 0.0
        for j in range(1, len(self.input_sets)):
            on_dev = [t for t in inp.tensors(self.input_sets[j]) if t.device.type != "cpu"]
            if on_dev:
                freed += sum(t.numel() * t.element_size() for t in on_dev)
                self.input_sets[j] = self.set_aside(self.input_sets[j], self.recipes[j])
        for t, kept in enumerate(self.ref_outs):
            on_dev = [x for x in cmp.tensors(kept) if x.device.type != "cpu"] if kept is not None else []
            if on_dev:
                freed += sum(x.numel() * x.element_size() for x in on_dev)
                self.ref_outs[t] = None
        if freed:
            self.notes["reference_outputs_on_device"] = float(sum(o is not None for o in self.ref_outs))
        self.trim()
        self.notes["copies_shed_bytes"] = self.notes.get("copies_shed_bytes", 0.0) + freed
        return freed

    def shed_for_retry(self, note: str, value: float = 1.0) -> None:
        """Room for a second try after running out of device memory: garbage collected first
        (called outside the ``except`` clause: while an exception is handled its traceback keeps
        the failed attempt's frames, and so its input set and temporaries, on the device), then
        the judge's copies shed and both caches trimmed (:meth:`shed_copies`); ``note`` set to
        ``value``, which also marks the retry as made."""
        gc.collect()
        self.shed_copies()
        self.notes[note] = value

    def held(self) -> str:
        """What the judge holds on the device, in GiB, for the reason of its own out-of-memory
        verdict: its allocator's live tensors, the input sets and reference outputs among them,
        and the buffers it lends the harnesses (allocated outside the allocator)."""
        gib = float(1 << 30)
        sets = [sum(t.numel() * t.element_size() for t in inp.tensors(s) if t.device.type != "cpu")
                for s in getattr(self, "input_sets", []) if not isinstance(s, Redraw)]
        kept = [sum(x.numel() * x.element_size() for x in cmp.tensors(o) if x.device.type != "cpu")
                for o in getattr(self, "ref_outs", []) if o is not None]
        lent = sum(b.nbytes for b in getattr(self, "buffers", []) if b.kind != "host")
        return (f"judge holds {torch.cuda.memory_allocated() / gib:.2f} GiB of tensors "
                f"({sum(1 for b in sets if b)} input sets {sum(sets) / gib:.2f}, "
                f"{sum(1 for b in kept if b)} kept outputs {sum(kept) / gib:.2f}) "
                f"and {lent / gib:.2f} GiB lent to the harnesses")

    def make_room(self) -> None:
        """Before the candidate's process allocates anything: caches trimmed, and the optional
        copies shed when the device's free memory does not cover what is still to come (the
        candidate's input and output buffers, the output its model allocates, the outputs the
        eager and compiled reference allocate again when timed, a twentieth of the device).
        Budgets taken earlier could not see what the reference's process would keep (on an
        80-GB H100, 19.35 GiB after a 7.5-GB InstanceNorm's eager, compiled and training-mode
        calls)."""
        if not self.cuda:
            return
        self.trim()
        free, total = torch.cuda.mem_get_info()
        need = self.in_bytes + 4 * self.ref_out_bytes + max(float(1 << 30), 0.05 * total)
        self.notes["free_before_candidate_bytes"] = float(free)
        if free < need:
            self.shed_copies()

    def check_reference_repeats(self) -> None:
        """The reference called again on the first trial's inputs must give the same output
        (within the tolerance: atomics may reorder sums): a reference that draws random
        numbers in its forward, or changes its own state between calls, has no output a
        candidate can be checked against (and the float64 second opinion, which draws other
        numbers, would pass anything). Then whether it computes otherwise in training mode:
        models are judged in eval mode, and the flag says so where that matters."""
        kept = self.ref_outs[0] if self.ref_outs else None
        if kept is not None or not cmp.tensors(self.ref_example):  # kept, or nothing to keep (None)
            again = self.reference_on(self.input_sets[0], 0.0, "the reference's forward, repeated")
            c = cmp.compare(again, kept, self.tols, torch.device(self.device).type)
            self.sync()
            if not c.ok:
                raise Fail(Verdict.PROBLEM_ERROR, f"the reference is not deterministic: called twice on the same "
                           f"inputs, its outputs differ ({c.message}); no candidate can be checked against it "
                           f"(random numbers drawn in forward, or state that changes between calls)")
        else:
            self.flags.append("reference_repeat_unchecked: the first trial's output was not kept (memory)")
        if self.ref_writes_inputs:
            self.flags.append("reference_writes_inputs: the reference writes into its inputs; candidates may too")
        inp.fill(self.ref_in, self.input_sets[0])
        self.sync()
        assert self.ref is not None
        answer = self.ask(self.ref, {"op": "mode_check", "tolerances": self.tols}, max(float(self.ev["first_call_timeout_s"]),
                                                              2 * self.call_limit()), "the reference in training mode")
        if answer.get("differs"):
            kinds = [str(k)[:60] for k in answer.get("modules") or []][:6]
            self.flags.append("eval_mode: the model computes otherwise in training mode "
                              f"({', '.join(kinds) if kinds else 'its forward reads self.training'}); "
                              "reference and candidate are judged in eval mode (docs/evaluation.md)")

    def trial_reference(self, t: int, values: list[Any]) -> Any:
        """The reference's output for trial ``t``: the kept copy, or the reference called again
        on the trial's inputs (:meth:`reference_on`), as the verify stage does for the
        re-checked timed calls."""
        kept = self.ref_outs[t]
        if kept is not None:
            return kept
        t0 = time.monotonic()
        out = self.reference_on(values, 0.0, "the reference's forward, again")
        self.sync()
        self.recomputed += 1
        self.notes["reference_outputs_recomputed"] = float(self.recomputed)
        self.notes["ref_recompute_s"] = self.notes.get("ref_recompute_s", 0.0) + time.monotonic() - t0
        return out

    def reference_on(self, values: list[Any], u: float, what: str) -> Any:
        """The reference's output on ``values`` (floating inputs scaled as a timed call's by
        ``u``), in the judge's output buffers: valid until the reference's next call there."""
        assert self.ref is not None and self.ref_views is not None  # set by reference_outputs
        inp.fill(self.ref_in, values, u)
        self.sync()
        answer = self.ask(self.ref, {"op": "call", "export": True}, max(60.0, self.call_limit()), what)
        err, out = self.read_back(answer, self.ref_example, self.ref_views, reference=True)
        if err is not None:
            raise Fail(Verdict.PROBLEM_ERROR, f"the reference's output cannot be read back: {err.message}")
        return out

    def degenerate_check(self) -> None:
        self.status("degenerate_check")
        self.flags += self.ref_watch.flags()

    def estimate_bound(self) -> None:
        """The problem's minimum bytes and FLOPs; the datasheet bound (what a time below it
        triggers: ``impossible_margin``) and, with the run's GPU spec (measured ceilings where
        ``kernelpro calibrate`` ran), the minimum-traffic bound a roofline fraction divides."""
        spec = bounds.gpu_spec_for(self.gpu_name) if self.gpu_name else None
        ceilings = self.job.get("ceilings")
        measured_spec = types.SimpleNamespace(**ceilings) if isinstance(ceilings, dict) else None
        if not self.cuda or (spec is None and measured_spec is None):
            return
        self.status("bounds")
        assert self.ref is not None
        inp.fill(self.ref_in, self.input_sets[0])
        self.sync()
        l2_bytes = spec.l2_bytes if spec is not None else getattr(measured_spec, "l2_bytes", 0)
        answer = self.ask(self.ref, {"op": "bounds", "l2_bytes": l2_bytes, "flops": self.job.get("reference_flops")},
                          max(60.0, 10 * self.call_limit()), "counting the reference's FLOPs")
        work = bounds.Work(flops=float(answer["flops"]), bytes_min=float(answer["bytes_min"]), dtype=answer["dtype"])
        self.notes.update(flops=work.flops, bytes_min=work.bytes_min)
        if spec is not None:
            self.bound = bounds.lower_bound(work, spec)
            self.notes["lower_bound_ms"] = self.bound.lower_ms
        if measured_spec is not None:
            measured = bounds.lower_bound(work, measured_spec)
            self.notes.update(min_traffic_bound_ms=measured.lower_ms, min_traffic_memory_ms=measured.memory_ms,
                              min_traffic_compute_ms=measured.compute_ms,
                              min_traffic_bound_calibrated=float(getattr(measured_spec, "source", "") == "calibrated"))

    def compile_reference(self, baseline_job: bool) -> None:
        self.compiled = False
        self.compiled_autotune = False
        if not (self.cuda and self.ev.get("time_compiled_reference", True)
                and (baseline_job or self.ev.get("compiled_reference_per_candidate", True))):
            return
        self.status("compile_reference")
        assert self.ref is not None
        inp.fill(self.ref_in, self.input_sets[0])
        self.sync()
        answer = self.ask(self.ref, {"op": "compile"}, max(float(self.ev["first_call_timeout_s"]), self.call_limit()),
                          "compiling the reference")
        self.compiled = bool(answer.get("compiled"))
        if not self.compiled:  # the compiled baseline is optional: say why it is missing
            self.flags.append(f"compiled_reference_failed: {str(answer.get('reason', '?'))[:300]}")
        else:
            self.notes["compile_reference_s"] = float(answer.get("compile_s") or 0.0)
        mode = self.ev.get("compiled_autotune_mode")
        if baseline_job and mode:  # an optional third baseline, timed in the baseline job only
            self.status("compile_reference_autotune")
            inp.fill(self.ref_in, self.input_sets[0])
            self.sync()
            answer = self.ask(self.ref, {"op": "compile", "mode": str(mode), "key": "compiled_autotune"},
                              max(float(self.ev.get("autotune_timeout_s", 1800.0)), self.call_limit()),
                              f"compiling the reference with mode={mode}")
            self.compiled_autotune = bool(answer.get("compiled"))
            if self.compiled_autotune:
                self.notes["compile_autotune_s"] = float(answer.get("compile_s") or 0.0)
            else:
                self.flags.append(f"compiled_autotune_failed: {str(answer.get('reason', '?'))[:300]}")

    # 2. candidate -----------------------------------------------------------------------------------

    def load_candidate(self) -> None:
        source = Path(self.job["candidate"]).read_text()
        self.source = source
        why = scan_source(source)
        if why:
            raise Fail(Verdict.INTEGRITY, why)
        self.status("compile")
        assert self.cand is not None
        load = float(self.ev["load_timeout_s"])
        try:
            hello = self.cand.hello(load)
        except HarnessEnded as end:
            raise self.ended(self.cand, end) from None
        confined = str(hello.get("confined") or "")
        self.notes["sandbox_landlock"] = float(confined.startswith("landlock"))
        if self.ev.get("write_guard", "auto") == "landlock" and not confined.startswith("landlock"):
            raise Fail(Verdict.RUNTIME_ERROR, f"evaluator.write_guard is landlock, but the candidate's process "
                       f"could not be confined ({confined})")
        stage = self.job.get("compile") or {}
        t0 = time.monotonic()
        answer = self.ask(self.cand, {"op": "load", "problem": self.job["problem"], "candidate": self.job["candidate"],
                                      "seed": self.seed}, load, "importing the candidate", idle_s=self.call_limit())
        self.compile_res = CompileResult(
            ok=True, seconds=float(stage.get("compile_seconds") or answer.get("load_s") or time.monotonic() - t0),
            cached=bool(stage.get("cached", False)), language=self.job.get("language", "pytorch"))
        self.status("build")
        self.ask(self.cand, {"op": "build"}, load, "constructing ModelNew", idle_s=self.call_limit())
        self.cand_in = self.lend_inputs(self.cand, self.input_sets[0], "lending the candidate's inputs")
        self.cand_views = self.lend_outputs(self.cand, self.ref_example, "main")
        self.cand_idle = IdleMeter(self.cand)

    # 3. correctness ------------------------------------------------------------------------------------

    def cand_call(self, msg: dict[str, Any], timeout: float, what: str, idle_s: float | None = None) -> dict[str, Any]:
        assert self.cand is not None and self.cand_idle is not None
        self.cand_idle.calling()
        answer = self.ask(self.cand, msg, timeout, what, idle_s=idle_s)
        self.cand_idle.answered()
        threads = answer.get("threads") or []
        if threads:
            raise self.fail(Verdict.INTEGRITY, f"{what}: the candidate left Python threads running after forward "
                            f"returned ({', '.join(str(t)[:80] for t in threads[:3])}): work outside the timed call")
        return answer

    def correctness(self) -> None:
        self.status("correctness")
        policy = self.ev.get("call_policy", "any")
        if policy == "own_kernel":
            self.check_own_kernel()
        trials = int(self.ev["trials"])
        max_abs = max_rel = 0.0
        first_out: Any = None
        all_equal = True
        self.exact_passed: list[str] = []
        # (largest error, values outside the tolerance) of each trial the float64 opinion
        # admitted after it failed the fp32 reference's tolerance: the new-input-set look
        # accepts errors like these without running the reference in float64 again (not the
        # N(0,1) trial's: its scale need not be the new sets')
        self.admitted: list[tuple[float, int]] = []
        self.exact_unavailable: str | None = None
        first = float(self.ev["first_call_timeout_s"])
        retried = False
        for t in range(len(self.input_sets)):
            label = f"trial {t}" if t < trials else "N(0,1) trial"
            # the first call may compile for long (first_call_timeout_s) but not sit idle past the call limit
            limits = (first, self.call_limit()) if t == 0 else (self.call_limit(), None)
            again = False
            t0 = time.monotonic()
            try:
                out, c = self.correctness_trial(t, label, policy, *limits)
            except (Fail, torch.OutOfMemoryError) as exc:
                # out of device memory, the candidate's or the judge's: once, with the judge's
                # optional copies moved out of the way, while the candidate's process lives (a
                # model that needs more than the device has left beside the evaluation's buffers
                # fails again, and that is its verdict)
                oom = isinstance(exc, torch.OutOfMemoryError) or exc.verdict is Verdict.OOM
                if not (oom and not retried and self.cand is not None and self.cand.alive()):
                    raise
                again = True
            if again:  # outside the except clause (shed_for_retry)
                retried = True
                self.shed_for_retry("trial_retried_after_oom", float(t))
                out, c = self.correctness_trial(t, label, policy, *limits)
            if t == 0:  # the candidate's first call, its JIT compiles and first-use setup included
                self.notes["first_trial_s"] = time.monotonic() - t0
            if c.n_over and t < trials:  # get_inputs()'s distribution, as the new sets'
                self.admitted.append((c.max_abs_err, c.n_over))
            max_abs, max_rel = max(max_abs, c.max_abs_err), max(max_rel, c.max_rel_err)
            # the first output's copy, or for one of 64 MiB and more its fingerprint (bits
            # equal or not is the question; a copy of gigabytes is room the calls need)
            big = _output_bytes(out) >= 1 << 26
            if first_out is None:
                first_out = fingerprint(out) if big else cmp.snapshot(out)
            elif all_equal:
                all_equal = fingerprint(out) == first_out if big else cmp.same_values(out, first_out)
            del out
        n = len(self.input_sets)
        if n > 1 and all_equal and not self.ref_watch.equal:
            if not self.exact_is_constant():
                raise self.fail(Verdict.INTEGRITY, "the candidate's output is constant across trials while the "
                                "reference's is not")
            self.flags.append("constant_function: the candidate's output is the same on every trial and so is "
                              f"the reference's in float64 (within {CONSTANT_RTOL:g} of its largest value); the fp32 "
                              "reference's varies by rounding only")
        del first_out
        self.check_processes("correctness")
        self.correct = CorrectnessResult(True, n, max_abs, max_rel, "")
        self.compare_backend_flags()

    def correctness_trial(self, t: int, label: str, policy: str, timeout: float, idle_s: float | None
                          ) -> tuple[Any, cmp.Comparison]:
        """Trial ``t``: the candidate called on its inputs, its output read back and compared
        with the reference's; raises :class:`Fail` where it fails. The output (valid until the
        candidate's next call) and the comparison."""
        values = self.values_of(t)
        ref_out = self.trial_reference(t, values)  # one set drawn again at a time
        inp.fill(self.cand_in, values)
        self.sync()
        msg: dict[str, Any] = {"op": "call", "export": True, "prefix": f"{label}: forward failed: "}
        if policy in ("no_torch_compute", "own_kernel"):
            msg["policy"] = policy
        answer = self.cand_call(msg, timeout, label, idle_s=idle_s)
        if answer.get("compute_ops"):
            raise self.fail(Verdict.POLICY, f"call policy {policy}: forward calls PyTorch compute ops: "
                            f"{', '.join(str(o)[:80] for o in answer['compute_ops'][:8])}")
        err, out = self.read_back(answer, ref_out, self.cand_views)
        if err is not None:
            raise self.fail(Verdict.INTEGRITY if err.integrity else Verdict.INCORRECT, f"{label}: {err.message}",
                            correctness=None if err.integrity else CorrectnessResult(False, t + 1, None, None,
                                                                                    err.message))
        after = self.ref_inputs_after.get(t)
        if after is not None:
            # the reference wrote into these inputs: the candidate leaves them as the reference
            # did, or (when the reference also returns a tensor, its result) untouched
            c_in = cmp.compare(list(self.cand_in), after, self.tols, torch.device(self.device).type)
            if not c_in.ok and cmp.tensors(self.ref_example) and inp.unchanged(values, self.cand_in):
                c_in = cmp.Comparison(True)
            if not c_in.ok:
                raise self.fail(Verdict.INCORRECT, f"{label}: its inputs after the call differ from the "
                                f"reference's, which writes into them: {c_in.message}",
                                correctness=CorrectnessResult(False, t + 1, None, None, c_in.message))
        elif not inp.unchanged(values, self.cand_in):
            raise self.fail(Verdict.INTEGRITY, f"{label}: the candidate modified its inputs")
        c = cmp.compare(out, ref_out, self.tols, torch.device(self.device).type)
        if not c.ok and c.integrity:
            raise self.fail(Verdict.INTEGRITY, f"{label}: {c.message}")
        if not c.ok:
            second = self.second_opinion(out, ref_out, label, values)
            if second is None or not second.ok:
                message = c.message if second is None else f"{c.message}; against fp64: {second.message}"
                raise self.fail(Verdict.INCORRECT, f"{label}: {message}",
                                correctness=CorrectnessResult(False, t + 1, c.max_abs_err, c.max_rel_err, message))
        return out, c

    def check_own_kernel(self) -> None:
        from kernelpro.evaluate import policy

        own = policy.own_kernel_names(self.source)
        if not self.cuda:
            self.flags.append("own_kernel_unverified_on_cpu: kernels cannot be observed on a CPU; only "
                              "no_torch_compute was enforced")
            return
        if not own:
            raise self.fail(Verdict.POLICY, "call policy own_kernel: the source defines no __global__ or @triton.jit "
                            "kernel")
        inp.fill(self.cand_in, self.input_sets[0])
        self.sync()
        assert self.cand is not None
        answer = self.ask(self.cand, {"op": "kernels"}, float(self.ev["first_call_timeout_s"]), "listing kernels")
        kernels = [str(k) for k in answer.get("kernels", [])]
        if not policy.uses_own_kernel(kernels, own):
            raise self.fail(Verdict.POLICY, "call policy own_kernel: none of the kernels launched ("
                            f"{', '.join(k[:60] for k in kernels[:5]) or 'none'}) is defined in the candidate "
                            f"({', '.join(sorted(own)[:5])})")

    def compare_backend_flags(self) -> None:
        assert self.cand is not None and self.ref is not None
        cand = self.ask(self.cand, {"op": "flags"}, 30.0, "reading backend flags").get("flags", {})
        answer = self.ask(self.ref, {"op": "flags"}, 30.0, "reading backend flags")
        # the candidate starts from the process's defaults for the precision flags (the
        # reference's harness sits in strict fp32 between calls) and from the reference's others
        ref = dict(answer.get("flags", {}))
        startup = answer.get("startup") or {}
        ref.update({k: startup[k] for k in STRICT if k in startup})
        if isinstance(cand, dict) and cand != ref:
            changed = sorted(k for k in ref if cand.get(k) != ref[k])
            self.flags.append("backend_flags_changed: the candidate set " + ", ".join(changed)
                              + " (it starts from PyTorch's defaults, as the timed baselines run, in their own process)")

    def check_reference_sched(self) -> None:
        """The reference's harness is scheduled as it was when it started."""
        if self.ref is None or not self.ref.pid or self.ref_sched == (None, ""):
            return
        now = procwatch.sched_state(self.ref.pid)
        if now != self.ref_sched:
            raise self.fail(Verdict.INTEGRITY, f"the reference's process was rescheduled while being timed "
                            f"(nice {self.ref_sched[0]} -> {now[0]}; {self.ref_sched[1] or '?'} -> {now[1] or '?'}): "
                            f"only the candidate's process could have done it")

    def check_processes(self, where: str) -> None:
        """No process the candidate started may outlive the call that started it."""
        assert self.cand is not None
        extra = self.cand.extra_processes()
        if extra:
            raise self.fail(Verdict.INTEGRITY, f"{where}: the candidate left processes running "
                            f"({'; '.join(procwatch.command(p) for p in extra[:3])})")

    def second_opinion(self, out: Any, ref_out: Any, label: str, values: list[Any], u: float = 0.0,
                       pick: Any = None) -> cmp.Comparison | None:
        """The reference run in float64 on ``values`` (scaled as a timed call's by ``u``), and
        the candidate judged against it (:func:`kernelpro.evaluate.compare.compare_to_exact`);
        None when not applicable. ``pick``: applied to the float64 output first (the
        positions of a sampled output)."""
        if not self.ev.get("fp64_second_opinion", True) or self.exact_unavailable is not None:
            return None
        if not any(t.dtype == torch.float32 or not (t.is_floating_point() or t.is_complex())
                   for t in cmp.tensors(ref_out)):
            return None
        gold = self.reference_fp64(values, u)
        if gold is None:
            return None
        others = []
        as_run = self.reference_as_run(values, u)  # PyTorch's defaults may be less precise than strict fp32
        if as_run is not None:
            others.append(pick(as_run) if pick is not None else as_run)
        c = cmp.compare_to_exact(out, ref_out, pick(gold) if pick is not None else gold, self.tols,
                                 float(self.ev.get("reference_error_factor", 2.0)), others=others)
        if c.ok:
            self.exact_passed.append(f"{label}: {c.message}")
        return c

    def reference_fp64(self, values: list[Any], u: float = 0.0) -> Any:
        """The reference built in float64 and run on ``values`` (scaled by ``u``): its output in
        the judge's buffers (valid until the next such call), or None where it cannot run in
        float64 (flag ``fp64_second_opinion_unavailable``, once). Out of device memory (its
        float64 copies of a multi-GB problem beside the judge's), once: the judge's optional
        copies shed (:meth:`shed_copies`) and the call tried again (note ``fp64_retried_after_oom``)."""
        if self.exact_unavailable is not None:
            return None
        assert self.ref is not None
        if not hasattr(self, "fp64_views"):
            try:
                self.fp64_views = self.lend_outputs(self.ref, self.ref_example, "fp64",
                                                    lambda d: torch.float64 if d.is_floating_point else d)
            except (transport.TransportError, torch.OutOfMemoryError) as exc:
                # outputs of gigabytes on a GPU already holding the evaluation's buffers
                if "fp64_retried_after_oom" in self.notes or not self.cuda:
                    self.exact_unavailable = f"no room for its outputs in float64 ({one_line(exc)[:200]})"
                    self.flags.append(f"fp64_second_opinion_unavailable: {self.exact_unavailable}")
                    return None
            if not hasattr(self, "fp64_views"):  # shed outside the except clause (see shed_for_retry)
                self.shed_for_retry("fp64_retried_after_oom")
                return self.reference_fp64(values, u)
        inp.fill(self.ref_in, values, u)
        self.sync()
        try:
            answer = self.ref.request({"op": "call", "model": "fp64", "export": True}, max(60.0, 20 * self.call_limit()),
                                      "the reference in float64")
        except HarnessEnded as end:
            raise self.ended(self.ref, end) from None
        if (not answer.get("ok") and answer.get("verdict") == "oom" and self.cuda
                and "fp64_retried_after_oom" not in self.notes):
            self.shed_for_retry("fp64_retried_after_oom")
            return self.reference_fp64(values, u)
        if not answer.get("ok"):  # an op without float64 support: the first verdict stands
            self.exact_unavailable = str(answer.get("reason", "failed"))[:300]
            self.flags.append(f"fp64_second_opinion_unavailable: {self.exact_unavailable}")
            return None
        return cmp.replace_tensors(self.ref_example, self.fp64_views)

    def exact_is_constant(self) -> bool:
        """Whether the reference run in float64 gives the same output on every input set, to
        ``CONSTANT_RTOL`` of its largest value: then the function is constant (the row sums
        of a softmax) and its fp32 outputs vary by rounding alone, so a candidate returning the
        exact constant is right, not a cheat."""
        if not self.ev.get("fp64_second_opinion", True):
            return False
        first: Any = None
        for j in range(len(self.input_sets)):
            gold = self.reference_fp64(self.values_of(j))
            if gold is None:
                return False
            if first is None:
                first = cmp.snapshot(gold)
                continue
            for a, b in zip(cmp.flatten(first), cmp.flatten(gold)):
                if isinstance(a, torch.Tensor) and a.is_floating_point():
                    scale = float(a.abs().max()) if a.numel() else 0.0
                    if a.numel() and float((a - b.to(a.device)).abs().max()) > CONSTANT_RTOL * max(scale, 1e-300):
                        return False
                elif isinstance(a, torch.Tensor):
                    if not torch.equal(a, b.to(a.device)):
                        return False
                elif a != b:
                    return False
        return first is not None

    def reference_as_run(self, values: list[Any], u: float) -> Any:
        """The reference's output on ``values`` under PyTorch's default flags (the baselines'
        settings), where they differ from strict fp32 (on a GPU: cuDNN may use TF32); else
        None. The candidate may be as far from the exact values as this output is."""
        if not strict_differs(self.cuda):
            return None
        assert self.ref is not None
        if not hasattr(self, "as_run_views"):
            self.as_run_views: list[torch.Tensor] | None
            try:
                self.as_run_views = self.lend_outputs(self.ref, self.ref_example, "as_run")
            except (transport.TransportError, torch.OutOfMemoryError) as exc:
                self.as_run_views = None
                self.flags.append(f"default_flags_output_unavailable: no room for it ({one_line(exc)[:200]}); "
                                  f"the candidate is held to strict fp32's error")
        if self.as_run_views is None:
            return None
        inp.fill(self.ref_in, values, u)
        self.sync()
        answer = self.ask(self.ref, {"op": "call", "flags": "default", "export": True, "into": "as_run"},
                          max(60.0, 20 * self.call_limit()), "the reference under default flags")
        if not answer.get("ok"):
            raise self._failed_answer(self.ref, answer, "under default flags")
        return cmp.replace_tensors(self.ref_example, self.as_run_views)

    # 4. timing --------------------------------------------------------------------------------------------

    def flusher(self) -> Callable[[], None]:
        if not self.cuda:
            return lambda: None
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        buf = torch.empty(max(int(getattr(props, "L2_cache_size", 64 << 20)) * 2 // 4, 1 << 20), dtype=torch.int32,
                          device=self.device)
        from kernelpro.evaluate.gpu_state import L2State

        l2 = L2State()

        def flush() -> None:
            l2.reset([torch.cuda.current_stream().cuda_stream, 0])
            buf.zero_()

        return flush

    def timed(self, with_candidate: bool) -> tuple[dict[str, timing.Summary], dict[str, list[timing.Sample]]]:
        """The interleaved timing; a compiled reference that fails while timed is left out
        (with a flag) and the others are timed again without it."""
        try:
            return self.time_callables(with_candidate)
        except _CompiledFailed as exc:
            if exc.args[1:] == ("compiled_autotune",):
                self.flags.append(f"compiled_autotune_failed: {exc.args[0]}")
                self.compiled_autotune = False
            else:
                self.flags.append(f"compiled_reference_failed: {exc.args[0]}")
                self.compiled = False
            return self.timed(with_candidate)

    def strict_columns(self, with_candidate: bool) -> bool:
        """Whether the baselines are timed in strict fp32 as well as with PyTorch's defaults:
        in the baseline job (what ``bench`` and the report show), where the two differ."""
        return (not with_candidate and bool(self.ev.get("time_strict_baselines", True))
                and strict_differs(self.cuda))

    def time_baseline(self) -> EvalResult:
        self.status("timing")
        summaries, _ = self.timed(with_candidate=False)
        self.finish_notes()
        autotune = summaries.get("compiled_autotune")
        strict = summaries.get("reference_strict")
        strict_c = summaries.get("compiled_strict")
        return EvalResult(verdict=Verdict.CORRECT, reason="reference", baseline=summaries["reference"].stats,
                          timing=summaries["reference"].stats,
                          baseline_compiled=summaries["compiled"].stats if "compiled" in summaries else None,
                          baseline_strict=strict.stats if strict is not None else None,
                          baseline_compiled_strict=strict_c.stats if strict_c is not None else None,
                          baseline_compiled_autotune=autotune.stats if autotune is not None else None,
                          flags=tuple(self.flags), device=self.device, gpu_name=self.gpu_name,
                          measurements={"evaluator": self.notes}, wall_s=time.monotonic() - self.t_start)

    def time_all(self) -> None:
        self.status("timing")
        self.summaries, self.samples = self.timed(with_candidate=True)
        if os.environ.get("KERNELPRO_KEEP_SAMPLES"):  # every timed call's (event, sync, envelope) ms
            (self.workdir / "timing_samples.json").write_text(json.dumps(
                {name: [[s.event_ms, s.sync_ms, s.envelope_ms] for s in xs] for name, xs in self.samples.items()}))


    def time_callables(self, with_candidate: bool) -> tuple[dict[str, timing.Summary], dict[str, list[timing.Sample]]]:
        ev = self.ev
        assert self.ref is not None
        t_setup = time.perf_counter()
        flush = self.flusher()
        sets = self.on_device_sets()
        k_sets = len(sets)
        rng = random.Random(secrets.randbits(64))  # which calls see which values, and which are re-checked
        picks = [rng.randrange(k_sets) for _ in range(4096)]
        for i in range(1, len(picks)):  # consecutive calls always see different values
            if k_sets > 1 and picks[i] == picks[i - 1]:
                picks[i] = (picks[i] + 1) % k_sets
        order = [sets[k] for k in picks]
        warm_u, timed_u = inp.scale_draws(rng)
        self.kept: list[tuple[int, int, float, Any]] = []
        recheck_n = max(1, int(ev.get("recheck_calls", 8)))
        mode = ev.get("recheck_copies", "auto")
        fits = self.cuda and mode != "sampled" and self.ref_out_bytes * (recheck_n + 1) <= \
            self.share * _available_bytes(True)
        self.sampler: Any = None
        if mode == "sampled" or (mode == "auto" and self.cuda and not fits):
            gen = torch.Generator(device=self.device)
            gen.manual_seed(secrets.randbits(63))  # positions the candidate cannot predict
            k_sample = max(1, int(ev.get("recheck_sample_elements", 1 << 20)))
            self.sampler = lambda out: cmp.sample(out, k_sample, gen)
            self.notes["recheck_sampled_elements"] = float(k_sample)
        keep_copy = self.sampler or (cmp.snapshot if fits else cmp.to_cpu)
        self.notes["recheck_copies_on_device"] = float(fits)
        seen = {"n": 0}
        probe_after: dict[str, list[float]] = {}
        probe = torch.zeros(1, device=self.device) if self.cuda else None
        l2_found: list[str] = []
        limit = self.call_limit()
        limit_first = max(float(ev["first_call_timeout_s"]), limit)
        # where this stage's seconds go (notes timing_<part>_s, summed over every call, warm-ups
        # included): the inputs filled and L2 flushed before a call, the candidate's processes
        # stopped and resumed around the reference's, the call's round trip, the checks after it
        split = {"prepare": 0.0, "pause": 0.0, "call": 0.0, "after": 0.0}
        t_stage = time.perf_counter()

        def call(name: str, remote: Remote, views_in: list[torch.Tensor], model: str,
                 flags: str = "default") -> Callable[..., timing.Sample]:
            meter = self.cand_idle if remote is self.cand else self.ref_idle
            warmed = {"n": 0}

            def one(i: int, values: list[Any] | None = None) -> timing.Sample:
                """Timed call ``i`` (< 0: warm-up) on a kept trial's values, scaled; or on
                ``values`` as they are (a set no call has seen: :meth:`check_fresh_inputs`).
                Out of device memory the first time in the evaluation (the reference's or the
                candidate's process, beside the judge's copies: a multi-GB level-1 problem on an
                80-GB card), the judge's copies are shed and the call is made again (note
                ``timed_call_retried_after_oom``: the call's index); the failed call is no sample."""
                try:
                    return attempt(i, values)
                except _TimedCallOOM:
                    pass
                self.shed_for_retry("timed_call_retried_after_oom", float(i))  # outside the except clause
                return attempt(i, values)

            def attempt(i: int, values: list[Any] | None) -> timing.Sample:
                t_in = time.perf_counter()
                j = order[(-1 - i) % len(order)] if i < 0 else order[i % len(order)]
                u = warm_u[(-1 - i) % len(warm_u)] if i < 0 else timed_u[i % len(timed_u)]
                if values is None:
                    j = self.timed_set(j)
                else:
                    j, u = -1, 0.0
                inp.fill(views_in, self.values_of(j) if values is None else values, u)
                flush()
                self.sync()
                t_filled = time.perf_counter()
                # while the reference is timed, the candidate's processes are stopped: nothing
                # of theirs can compete with it for the CPU
                paused = self.cand.pause() if (remote is not self.cand and self.cand is not None
                                               and ev.get("stop_candidate", True)) else []
                if meter is not None:
                    meter.calling()
                msg = {"op": "call", "model": model, "time": True, "export": True, "reset_l2": True,
                       "prefix": "timed run failed: ", "flags": flags}
                t0 = time.perf_counter()
                try:
                    answer = remote.request(msg, limit_first if warmed["n"] == 0 else limit,
                                            f"timed call of the {name}")
                    t1 = time.perf_counter()
                except HarnessEnded as end:
                    raise self.ended(remote, end) from None
                finally:
                    if paused:
                        assert self.cand is not None
                        self.cand.resume(paused)
                t_resumed = time.perf_counter()
                split["prepare"] += t_filled - t_in
                split["call"] += t1 - t0
                split["pause"] += (t0 - t_filled) + (t_resumed - t1)
                if remote is self.ref:
                    self.check_reference_sched()
                if meter is not None:
                    meter.answered()
                if probe is not None:  # before any work of the judge's: a one-element kernel's round trip
                    t_q = time.perf_counter()
                    probe.add_(1.0)
                    torch.cuda.synchronize()
                    probe_after.setdefault(name, []).append((time.perf_counter() - t_q) * 1e3)
                warmed["n"] += 1
                if not answer.get("ok"):
                    if answer.get("verdict") == "oom" and "timed_call_retried_after_oom" not in self.notes:
                        raise _TimedCallOOM()
                    if model in ("compiled", "compiled_autotune"):
                        raise _CompiledFailed(str(answer.get("reason", "failed"))[:300], model)
                    raise self._failed_answer(remote, answer, "timed call")
                sample = timing.Sample(_number(answer, "event_ms"), _number(answer, "sync_ms"), (t1 - t0) * 1e3)
                if remote is self.cand:
                    self.after_candidate_call(answer, i, j, u, keep_copy, seen, recheck_n, rng, l2_found)
                split["after"] += time.perf_counter() - t_resumed
                return sample

            return one

        calls: dict[str, Callable[..., timing.Sample]] = {"reference": call("reference", self.ref, self.ref_in, "main")}
        if self.compiled:
            calls["compiled"] = call("compiled", self.ref, self.ref_in, "compiled")
        if self.compiled_autotune and not with_candidate:
            calls["compiled_autotune"] = call("compiled_autotune", self.ref, self.ref_in, "compiled_autotune")
        if self.strict_columns(with_candidate):  # the baselines in strict fp32 too: a second column
            calls["reference_strict"] = call("reference_strict", self.ref, self.ref_in, "main", "strict")
            if self.compiled:
                calls["compiled_strict"] = call("compiled_strict", self.ref, self.ref_in, "compiled", "strict")
        if with_candidate:
            assert self.cand is not None
            calls["candidate"] = call("candidate", self.cand, self.cand_in, "main")
        self._calls = calls
        samples = timing.interleave(calls, warmup_ms=float(ev["warmup_ms"]), rep_ms=float(ev["rep_ms"]),
                                    min_reps=int(ev["min_reps"]), max_reps=int(ev["max_reps"]),
                                    rounds=int(ev["rounds"]))
        t_timed = time.perf_counter()
        if with_candidate:
            self.check_processes("timing")
        summaries = {}
        for name in calls:
            remote = self.cand if name == "candidate" else self.ref
            assert remote is not None
            gap0 = _number(self.ask(remote, {"op": "gap0", "reps": 30}, 60.0, "measuring the sync latency"), "ms") \
                if self.cuda else 0.0

            def control(stream_ms: float) -> float | None:
                """The end-to-idle gap of a trusted one-stream call of ``stream_ms``, timed as
                the calls were: the judge's flush and synchronization right before each, one
                at a time (taken back to back, it came out about 0.02 ms shorter on the H200
                than the short calls' own gap, and honest calls were charged the difference)."""
                assert self.ref is not None
                gaps = []
                for _ in range(15):
                    flush()
                    self.sync()
                    a = self.ask(self.ref, {"op": "spin", "stream_ms": stream_ms}, max(60.0, 50 * stream_ms / 1e3),
                                 "timing a same-length control")
                    if a.get("ms") is None:
                        return None
                    gaps.append(_number(a, "ms"))
                return statistics.median(gaps)

            # side-stream work is charged above the envelope's slack: below it the gap the
            # harness reports cannot be told from the synchronization's jitter (honest 16-50 us
            # calls on the H200 were charged 0.016-0.023 ms over three control designs), and
            # the envelope cross-check, which bounds what a candidate can leave uncharged,
            # allows as much (docs/evaluation.md)
            summaries[name] = timing.summarize(samples[name], cuda=self.cuda, gap0_ms=gap0, control=control,
                                               min_escape_ms=max(timing.ESCAPE_ABS_MS,
                                                                 float(ev["envelope_slack_ms"])))
            if name == "reference" or (name == "candidate" and self.cuda):
                self.notes["sync_gap_ms" if name == "reference" else "candidate_sync_gap_ms"] = gap0
        for name, s in summaries.items():
            if s.escaped_ms > 0:
                self.notes[f"{name}_escaped_ms"] = s.escaped_ms
            if s.gap_matched_ms is not None:
                self.notes[f"{name}_sync_gap_matched_ms"] = s.gap_matched_ms
            self.notes[f"{name}_overhead_ms"] = timing.overhead_ms(samples[name], s)
        self.probe_after = {k: v for k, v in probe_after.items() if v}
        # and: the set-up before the first call (the flush buffer, the re-check sampler), the
        # time between calls outside them (a failed attempt, the schedule), and the statistics
        # after the last (sync gaps, same-length controls); summed over the stage's attempts (a
        # failing compiled reference has everything timed again without it)
        split["between"] = (t_timed - t_stage) - sum(split.values())
        split["setup"] = t_stage - t_setup
        split["summaries"] = time.perf_counter() - t_timed
        for part, v in split.items():
            self.notes[f"timing_{part}_s"] = self.notes.get(f"timing_{part}_s", 0.0) + v
        self.notes["timing_timed_calls"] = self.notes.get("timing_timed_calls", 0.0) + float(
            sum(len(x) for x in samples.values()))
        if l2_found:
            self.flags.append("l2_persistence_reset: the candidate left " + "; ".join(l2_found[:3])
                              + " (reset before every timed call)")
        return summaries, samples

    def _failed_answer(self, remote: Remote, answer: dict[str, Any], what: str) -> Fail:
        verdict = str(answer.get("verdict", "runtime_error"))
        verdict = verdict if verdict in FAILURE_VERDICTS else "runtime_error"
        reason = str(answer.get("reason", "failed"))[:2000]
        if remote is self.ref and verdict == "oom" and self.job.get("candidate") is not None:
            # the evaluation's memory (the judge's copies, the candidate's process), not the
            # problem's fault: its baseline job ran alone (as in ask)
            retried = " after the judge's copies were shed" if "timed_call_retried_after_oom" in self.notes else ""
            held = f"; {self.held()}" if self.cuda else ""
            return self.fail(Verdict.OOM, f"the reference ran out of memory in the evaluation ({what}{retried}"
                             f"{held}): {reason}")
        if remote is self.ref:
            return Fail(Verdict.PROBLEM_ERROR, f"the reference failed ({what}): {reason}")
        return self.fail(Verdict(verdict), reason)

    def after_candidate_call(self, answer: dict[str, Any], i: int, j: int, u: float, keep_copy: Any,
                             seen: dict[str, int], recheck_n: int, rng: random.Random, l2_found: list[str]) -> None:
        """Checks after each timed call of the candidate, and the re-check reservoir."""
        threads = answer.get("threads") or []
        if threads:
            raise self.fail(Verdict.INTEGRITY, f"the candidate left Python threads running after a timed call "
                            f"({', '.join(str(t)[:80] for t in threads[:3])})")
        for f in answer.get("l2") or []:
            if str(f) not in l2_found:
                l2_found.append(str(f)[:200])
        if i < 0:
            return
        # the timed calls' inputs are scaled: a number, a bool among the outputs is checked
        # when the call is re-checked (verify), not against the correctness trial's value here
        err, out = self.read_back(answer, self.ref_example, self.cand_views, check_values=False)
        if err is not None:
            raise self.fail(Verdict.INTEGRITY, f"timed call {i} returned a wrong output: {err.message}")
        if self._confirming:  # calls made after the re-checks were drawn: not re-checked
            self._last_out = out
            return
        # reservoir sample of the timed calls; the latest always in the last slot
        seen["n"] += 1
        item = (i, j, u)
        copy = self.sampler or cmp.snapshot
        if len(self.kept) < recheck_n:
            self.kept.append((*item, keep_copy(out)))
            return
        r = rng.randrange(seen["n"])
        if r < recheck_n - 1:
            *prev, prev_out = self.kept[-1]
            self.kept[r] = (*prev, keep_copy(prev_out) if keep_copy is cmp.to_cpu else prev_out)
        self.kept[-1] = (*item, copy(out))

    # 5. after timing ------------------------------------------------------------------------------------------

    def verify(self) -> None:
        """Re-check the kept timed calls."""
        self.status("verify")
        for i, j, u, kept in self.kept:
            expected = self.reference_on(self.values_of(j), u, "the reference's re-check")
            pick: Callable[[Any], Any] | None = None
            if self.sampler is not None:
                want, why = cmp.values_at(expected, kept)
                if why:
                    raise self.fail(Verdict.INTEGRITY, f"timed call {i} returned a wrong output: {why}")
                got, expected_at = cmp.sampled_values(kept), want
                pick = functools.partial(_values_at, kept)
            else:
                got, expected_at = kept, expected
            c = cmp.compare(got, expected_at, self.tols, compute_device=self.device if self.cuda else None)
            if not c.ok and not c.integrity:
                second = self.second_opinion(got, expected_at, f"timed call {i}", self.values_of(j), u, pick)
                c = second if second is not None and second.ok else c
            if not c.ok:
                raise self.fail(Verdict.INTEGRITY, f"timed call {i} returned a wrong output (results cached across "
                                f"calls or an input-dependent shortcut): {c.message}")
        self.notes["rechecked_calls"] = float(len(self.kept))

    def cross_check(self) -> None:
        """What the candidate's process said, against what the judge saw from outside: its CPU
        between calls, the GPU after its answers, and the time its calls took."""
        idle_charge_ms = self.check_idle_cpu()
        self.check_gpu_after_answer()
        self.check_envelope()
        if idle_charge_ms > 0:
            cand = self.summaries["candidate"]
            self.summaries["candidate"] = attrs.evolve(cand, stats=timing.charged(cand.stats, idle_charge_ms,
                                                                                   "idle_cpu_charge"))

    def check_idle_cpu(self) -> float:
        """The candidate's CPU between calls, against the reference's; the milliseconds to charge
        each of its calls. An excess is confirmed on calls alternating one by one with the
        reference's before it counts: on a shared CI machine an honest harness once showed a
        quarter of its intervals at 26 % of a core where the reference's showed none. Not
        confirmed (the machine's noise, or a candidate that stopped once it saw the second look
        begin), its calls are charged the CPU per interval it used beyond the reference's, so
        work done between calls gains nothing."""
        if not self._idle_excess():
            return 0.0
        assert self.cand_idle is not None and self.ref_idle is not None
        first = (self.cand_idle.cpu_ns, self.cand_idle.wall_s, self.cand_idle.upper_share, self.ref_idle.upper_share)
        n_first = len(self.cand_idle.intervals)
        per_call_ms = max(0.0, self.cand_idle.cpu_ns / max(n_first, 1)
                          - self.ref_idle.cpu_ns / max(len(self.ref_idle.intervals), 1)) / 1e6
        # the second look also reads each thread's CPU: the verdict names the threads that worked
        self.cand_idle.by_thread = {}
        self.cand_idle.restart()
        self.ref_idle.restart()
        base = 1 + max(len(xs) for xs in self.samples.values()) + 4096
        self._confirming = True
        try:
            for k in range(max(24, min(n_first, 200))):
                self._calls["reference"](base + k)
                self._calls["candidate"](base + k)
        finally:
            self._confirming = False
        self.notes["candidate_idle_cpu_confirm_upper_share"] = self.cand_idle.upper_share
        self.notes["reference_idle_cpu_confirm_upper_share"] = self.ref_idle.upper_share
        busiest = self.cand_idle.busiest()
        self.cand_idle.by_thread = None
        named = f"; its busiest threads then: {busiest}" if busiest else ""
        seen = (f"{first[0] / 1e6:.1f} ms of CPU in {first[1] * 1e3:.0f} ms when it should have been idle (a "
                f"quarter of its idle intervals at {first[2]:.0%} of a core or more; the reference's {first[3]:.0%})")
        # the floor of CPU that counts, in proportion to the calls of the second look
        if self._idle_excess(min_cpu_ns=5e6 * len(self.cand_idle.intervals) / max(n_first, 1)):
            raise self.fail(Verdict.INTEGRITY, f"the candidate's process kept working between calls: {seen}, and "
                            f"again on calls alternating with the reference's ({self.cand_idle.upper_share:.0%}; the "
                            f"reference's {self.ref_idle.upper_share:.0%}{named}){self._quiet_look()}: threads or "
                            "processes working outside its calls")
        self.notes["idle_cpu_charged_ms"] = per_call_ms
        self.flags.append(f"idle_cpu_charged: the candidate's process used {seen}; not confirmed on calls "
                          f"alternating with the reference's ({self.cand_idle.upper_share:.0%}{named}), so each of its "
                          f"timed calls carries the {per_call_ms:.3g} ms of CPU per interval it used beyond the "
                          "reference's")
        return per_call_ms

    def _quiet_look(self) -> str:
        """For the reason of an idle-CPU violation: the candidate's process over
        ``IDLE_QUIET_S`` with no call at all (notes ``candidate_quiet_cpu_share`` and, per
        thread, the busiest). A thread that works then does so on its own, whatever the calls:
        a pool left spinning or a worker computing ahead; one that does not worked because of
        the calls. An honest generated candidate was rejected here on an H100 (2 of 6
        evaluations of L2 44 with channels-last convolutions; its busiest thread, unnamed,
        used 40 % of a core in both looks), and the reason named nothing that told which."""
        pids = getattr(self.cand_idle, "pids", None)
        if self.cand is None or not pids:
            return ""
        before, c0, t0 = procwatch.threads_cpu_ns(pids), self.cand.cpu_ns(pids), time.monotonic()
        time.sleep(IDLE_QUIET_S)
        after, cpu, wall = procwatch.threads_cpu_ns(pids), self.cand.cpu_ns(pids) - c0, time.monotonic() - t0
        share = max(0, cpu) / 1e9 / wall if wall > 0 else 0.0
        self.notes["candidate_quiet_cpu_share"] = share
        used = sorted(((ns - before.get(key, (name, 0))[1], f"{name} (main thread)" if key[0] == key[1] else name)
                       for key, (name, ns) in after.items()), reverse=True)[:3]
        busy = ", ".join(f"{label} {ns / 1e6:.1f} ms" for ns, label in used if ns > 0)
        return (f"; with no call for {wall:.1f} s it used {share:.0%} of a core" + (f" ({busy})" if busy else ""))

    def _idle_excess(self, min_cpu_ns: float | None = None) -> bool:
        """Whether the candidate's intervals exceed the reference's by ``idle_cpu_share`` of a
        core, with more than 5 ms of CPU in all (``min_cpu_ns``); the first look records its notes."""
        if min_cpu_ns is None:
            for who, meter in (("candidate", self.cand_idle), ("reference", self.ref_idle)):
                if meter is not None:
                    self.notes[f"{who}_idle_cpu_share"] = meter.share
                    self.notes[f"{who}_idle_cpu_upper_share"] = meter.upper_share
        if self.ref_idle is None or self.cand_idle is None or self.cand_idle.wall_s <= 0:
            return False
        extra = self.cand_idle.upper_share - self.ref_idle.upper_share
        return extra > float(self.ev["idle_cpu_share"]) and self.cand_idle.cpu_ns > (min_cpu_ns or 5e6)

    def check_gpu_after_answer(self) -> None:
        if not (self.cuda and "candidate" in self.probe_after and "reference" in self.probe_after):
            return
        ref, cand = self.probe_after["reference"], self.probe_after["candidate"]
        late, se, base = self._probe_late(cand, ref)
        self.notes["gpu_busy_after_answer_ms"] = late
        self.notes["gpu_busy_after_answer_se_ms"] = se
        if late <= self._probe_allowed(base, se):
            return
        # A GPU that just ran a long call (H200: an honest candidate's 10 ms side-stream calls)
        # answers the judge's probe later than after the reference's short calls. The control:
        # the reference's trusted process spins one stream as long as the candidate's calls
        # took to the GPU's idle, synchronizes, answers, and the judge probes right after.
        control = self.probe_control(statistics.median(s.sync_ms for s in self.samples["candidate"]))
        if control:
            late, se, base = self._probe_late(cand, control)
            self.notes["gpu_busy_after_control_ms"] = late
        if late > self._probe_allowed(base, se):
            raise self.fail(Verdict.INTEGRITY, f"the GPU was still busy after the candidate's process answered: "
                            f"a one-element kernel the judge ran right after each answer took {late:.3g} ms "
                            f"longer after the candidate's calls than after "
                            f"{'a same-length control call' if control else 'the reference' + chr(39) + 's'} "
                            f"(median {base:.3g} ms): work left running past the call")

    def probe_control(self, stream_ms: float, n: int = 20) -> list[float]:
        """The judge's probe right after ``n`` same-length control calls of the reference's
        process (empty when its torch has no spin kernel)."""
        assert self.ref is not None
        control: list[float] = []
        probe = torch.zeros(1, device=self.device)
        for _ in range(n):
            answer = self.ask(self.ref, {"op": "spin", "stream_ms": stream_ms}, max(60.0, 50 * stream_ms / 1e3),
                              "timing the GPU probe's control")
            if answer.get("ms") is None:
                return []
            t_q = time.perf_counter()
            probe.add_(1.0)
            torch.cuda.synchronize()
            control.append((time.perf_counter() - t_q) * 1e3)
        return control

    @staticmethod
    def _probe_late(cand: list[float], ref: list[float]) -> tuple[float, float, float]:
        base = statistics.median(ref)
        se = (timing.median_se(cand) ** 2 + timing.median_se(ref) ** 2) ** 0.5
        return statistics.median(cand) - base, se, base

    def _probe_allowed(self, base: float, se: float) -> float:
        return max(float(self.ev["envelope_slack_ms"]), 0.25 * base) + 3 * se

    def check_envelope(self) -> None:
        """The candidate's reported times against the judge's clock. A shortfall beyond the slack
        is confirmed on calls alternating one by one with the reference's before it counts:
        over blocks of calls a change of the machine's load between the blocks could fake it."""
        cand, ref = self.summaries["candidate"], self.summaries["reference"]
        excess, se = timing.envelope_excess(self.samples["candidate"], cand, self.samples["reference"], ref)
        self.notes["envelope_excess_ms"] = excess
        self.notes["envelope_excess_se_ms"] = se
        # Two views of the same question. The medians' difference against its standard error,
        # and a rank test (how often a candidate call's overhead, less the allowance, exceeds a
        # reference call's): when the machine is loaded, a third of the calls of either can
        # carry milliseconds of scheduling delay, which widens the standard error until it
        # hides a shortfall the rank test still sees.
        margin = self.envelope_allowed(0.0)
        z_needed = 3.4
        share, z = timing.exceeds_z(timing.overheads(self.samples["candidate"], cand),
                                    timing.overheads(self.samples["reference"], ref), margin)
        self.notes["envelope_share"] = share
        # a claim past max_speedup is looked at on alternating calls whatever the first look
        # said: on a loaded machine the reference's overheads can scatter by milliseconds, and
        # a process reporting 0.001-ms calls passed the first look there (excess 0.67 ms, its
        # standard error 1.6 ms) with a 9000x claim
        claimed = ref.stats.median_ms / max(cand.stats.median_ms, 1e-9)
        extreme = claimed > float(self.ev.get("max_speedup", 100.0))
        first_passed = excess <= self.envelope_allowed(se) and z < z_needed
        if first_passed and not extreme:
            return
        # Confirmed on calls alternating one by one with the reference's, in up to three looks
        # while the evidence leans that way, each look at about 1e-3 / 3
        pairs = max(10, min(30, int(2000.0 / max(ref.stats.median_ms + cand.stats.median_ms, 1e-3))))
        new_r: list[timing.Sample] = []
        new_c: list[timing.Sample] = []
        for _look in range(3):
            self._alternate(pairs, new_r, new_c)
            oc, orf = timing.overheads(new_c, cand), timing.overheads(new_r, ref)
            share, z = timing.exceeds_z(oc, orf, margin)
            if z >= z_needed or share <= 0.5:
                break
        main_excess = excess
        excess = statistics.median(oc) - statistics.median(orf)
        self.notes["envelope_excess_confirmed_ms"] = excess
        self.notes["envelope_confirm_share"] = share
        self.notes["envelope_confirm_z"] = z
        calls = len(new_c)
        if z >= z_needed:
            # Once more, on calls of their own after a pause: a process that reports less than
            # its calls take does so on every call, while a passing state of the machine (a core
            # busy for the tens of milliseconds one look lasts) can fill a single look. An honest
            # candidate's process was seen so once on an idle H100 (0.15 ms per call on 0.04-ms
            # calls, z 5.9), its three reruns clean. Not confirmed again, the excess is charged.
            time.sleep(RECONFIRM_PAUSE_S)
            again_r: list[timing.Sample] = []
            again_c: list[timing.Sample] = []
            self._alternate(pairs, again_r, again_c)
            share2, z2 = timing.exceeds_z(timing.overheads(again_c, cand), timing.overheads(again_r, ref), margin)
            self.notes["envelope_reconfirm_share"] = share2
            self.notes["envelope_reconfirm_z"] = z2
            if z2 < z_needed:
                excess, z, calls = (statistics.median(timing.overheads(again_c, cand))
                                    - statistics.median(timing.overheads(again_r, ref))), z2, pairs
                main_excess = max(main_excess, self.notes["envelope_excess_confirmed_ms"])
        if z >= z_needed:
            raise self.fail(Verdict.INTEGRITY, f"the candidate's process reported {cand.stats.median_ms:.4g} ms per "
                            f"call, but the judge's clock around its calls allows no less than "
                            f"{cand.stats.median_ms + excess:.4g} ms (the protocol's overhead measured on the "
                            f"reference removed, over {calls} calls alternating with the reference's): {excess:.4g} "
                            f"ms per call unaccounted for, more than the {margin:.3g} ms allowed in {share:.0%} of "
                            f"the comparisons (z {z:.1f}); again on {pairs} more after a pause (z "
                            f"{self.notes['envelope_reconfirm_z']:.1f})")
        # Not confirmed: the machine's load may have changed between blocks, or the candidate
        # behaved differently once calls alternated. Either way its timed calls are charged
        # what the judge's clock saw, so a shortfall gains nothing.
        if extreme:  # the alternating calls' excess, paired call by call, counts too
            main_excess = max(main_excess, self.notes["envelope_excess_confirmed_ms"])
            if first_passed and main_excess <= 0.0:
                return  # nothing unaccounted for on either look: the claim stands as timed
        main_excess = max(main_excess, 0.0)
        charged = [t + main_excess for t in timing.reported(self.samples["candidate"], cand)]
        self.summaries["candidate"] = attrs.evolve(
            cand, stats=timing.stats(charged, cand.stats.method + "+envelope_charge"))
        self.notes["envelope_charged_ms"] = main_excess
        again = (f"seen on {len(new_c)} alternating calls (z {self.notes['envelope_confirm_z']:.1f}) but not "
                 f"on {calls} more after a pause" if "envelope_reconfirm_z" in self.notes
                 else f"not confirmed on {calls} alternating calls")
        self.flags.append(f"envelope_charged: the judge's clock around the candidate's timed calls exceeded its "
                          f"reported times by {main_excess:.3g} ms per call more than the reference's; {again} "
                          f"({excess:.3g} ms, z {z:.1f}), so its times carry that excess")

    def _alternate(self, pairs: int, ref_out: list[timing.Sample], cand_out: list[timing.Sample]) -> None:
        """``pairs`` more calls of the reference and the candidate, one by one in turn (the
        envelope's confirmation), appended to ``ref_out`` and ``cand_out``."""
        base = 1 + max(len(self.samples["candidate"]), len(self.samples["reference"])) \
            + int(self.notes.get("envelope_alternating_calls", 0.0))
        self._confirming = True
        try:
            for k in range(pairs):
                ref_out.append(self._calls["reference"](base + k))
                cand_out.append(self._calls["candidate"](base + k))
        finally:
            self._confirming = False
            self.notes["envelope_alternating_calls"] = self.notes.get("envelope_alternating_calls", 0.0) + pairs

    def draw_fresh(self, seed: int) -> list[Any]:
        """A new input set for the fresh-input look. It was drawn before, so only room (one
        more set on the device) can lack: then, once, the judge's copies are shed (the calls
        on the timed sets beyond the first take the first's values: :meth:`timed_set`) and
        both caches trimmed, and
        it is drawn again (note ``fresh_input_room_made``); else :class:`_NoFreshSet`. On an
        80-GB H100 every candidate of four 6.4-GB level-1 problems skipped the look."""
        reason = ""
        for attempt in range(2):
            try:
                return self.draw_inputs(seed)
            except Fail as exc:
                reason = exc.reason
            if attempt or not self.cuda or "fresh_input_room_made" in self.notes:
                break
            self.shed_for_retry("fresh_input_room_made")
        raise _NoFreshSet(reason)

    def check_fresh_inputs(self) -> None:
        """Calls on input sets no call has seen, against calls on values it has. Every timed
        call sees a kept trial's values, scaled by a factor of its own: a candidate that keeps
        its outputs (and their change along that one scale) can correct them instead of
        computing, and pass every re-check. On ``fresh_input_calls`` sets (more for short calls)
        drawn from seeds it cannot predict, each called once right after ordinary calls (seen
        sets, scaled as the timed calls' are), it must compute: their outputs are checked, and
        when its calls on them take more than ``fresh_input_factor`` times its ordinary calls beside them (the
        reference's own ratio divided out, and more than the envelope's slack), a second look
        on new sets confirms it. Its timed median is a second yardstick for the new sets (the
        larger factor counts): a candidate that keeps outputs while timed and computes from
        the first set it has not seen on, seen values included, is as slow beside the new sets
        as on them, but not as fast as when timed. Confirmed at ``fresh_input_reject`` times or
        more: an integrity violation; below that, the candidate is charged the difference.
        A look takes as many sets as fit in ``fresh_input_max_s`` at its first set's pace; an
        output off the fp32 reference by no more than the float64 opinion admitted on the
        trials is not sent to that opinion again."""
        ev = self.ev
        n_min = int(ev.get("fresh_input_calls", 3))
        if n_min <= 0 or "candidate" not in self._calls:
            return
        self.status("fresh_inputs")
        cand_s, ref_s = self.summaries["candidate"], self.summaries["reference"]
        cand_med = statistics.median(timing.reported(self.samples["candidate"], cand_s))
        ref_med = statistics.median(timing.reported(self.samples["reference"], ref_s))
        factor_limit = float(ev.get("fresh_input_factor", 1.5))
        slack = float(ev["envelope_slack_ms"] if self.cuda else ev.get("envelope_slack_ms_cpu", 0.25))
        # before each new set the candidate makes as many calls on seen values as it made per
        # reference call while timed (up to 8), so that it is as warm as it was then
        burst = max(1, min(8, round(ref_med / cand_med) if cand_med > 0 else 1))
        # short calls: more sets, so that a look holds about fresh_input_min_ms of timed calls,
        # as long as a look's calls (the reference's three a set: ordinary, timed, the output
        # to compare with) stay within about fresh_input_max_ms; the slack (meant for the
        # median of three) shrinks as the median's error does
        wanted = math.ceil(float(ev.get("fresh_input_min_ms", 30.0)) / max(cand_med, 1e-3))
        affordable = int(float(ev.get("fresh_input_max_ms", 500.0)) / max(3 * ref_med + (burst + 1) * cand_med, 1e-3))
        # fixed during the first look's first set (see look)
        sets = max(n_min, min(int(ev.get("fresh_input_max_calls", 24)), wanted, affordable))
        max_s = float(ev.get("fresh_input_max_s", 2.0))
        set_s: float | None = None
        fp64_checks = admitted_checks = 0
        single = len(cmp.flatten(getattr(self, "ref_example", None))) == 1
        admitted = getattr(self, "admitted", [])
        rng = random.Random(secrets.randbits(64))
        base = 1 + max(len(xs) for xs in self.samples.values()) + 2 * 4096

        def ratio(new: float, old: float) -> float:
            # the machine slower for both is divided out, up to 2x (the candidate is stopped during
            # the reference's calls, so it cannot slow them; beyond that it is not trusted)
            return min(2.0, max(1.0, new / old)) if old > 0 else 1.0

        def slack_now() -> float:
            return slack * math.sqrt(n_min / sets)

        def like_admitted(c: cmp.Comparison) -> bool:
            """A single output that failed the fp32 tolerance on finite values alone, by no more
            than twice the largest error (and count of values) the float64 opinion admitted on
            the correctness trials: the candidate computed on this set as it did there. What
            this look checks is that it computed at all (kept outputs are off by the outputs'
            own size); its accuracy was settled on the trials."""
            if not (single and admitted and c.n_over > 0):
                return False
            return (c.max_abs_err <= 2.0 * max(a for a, _ in admitted)
                    and c.n_over <= 2 * max(k for _, k in admitted) + 16)

        def look(first: int) -> dict[str, float]:
            """The medians of one look (ms): ``new`` / ``ref_new`` on the new sets, ``seen`` /
            ``ref_seen`` on the ordinary calls right before them; ``beside_factor`` and
            ``beside_excess``: the candidate on the new sets against those calls, the reference's
            ratio divided out; ``timed_factor`` and ``timed_excess``: the same against its timed
            median; ``factor`` and ``excess``: the larger of the two; ``values`` 1.0 where the
            new sets alone are slower (the calls beside them over the limit)."""
            c_ms: list[float] = []
            r_ms: list[float] = []
            c_seen: list[float] = []
            r_seen: list[float] = []
            nonlocal sets, set_s, fp64_checks, admitted_checks
            self._confirming = True
            try:
                # a pair of ordinary calls first: the device comes back from the checks' pause
                self._calls["reference"](first)
                self._calls["candidate"](first)
                k = 0
                started = time.monotonic()
                while k < sets:
                    values = self.draw_fresh(rng.randrange(1 << 31))  # a seed the candidate cannot know
                    i = first + 1 + (burst + 2) * k
                    r_seen += timing.reported([self._calls["reference"](i)], ref_s)
                    r_sample = self._calls["reference"](i + 1, values)
                    expected = self.reference_on(values, 0.0, "the reference on a new input set")
                    # the candidate's calls on seen values right before its call on the new set,
                    # as many as it made per reference call while timed (up to 8): a 0.05 ms
                    # candidate beside a 20 ms reference was timed in runs of warm calls, and a
                    # single call after the reference's took 3x as long
                    for b in range(burst):
                        last = self._calls["candidate"](i + 2 + b)
                    c_seen += timing.reported([last], cand_s)
                    c_sample = self._calls["candidate"](i + 2 + burst, values)
                    out = self._last_out
                    c = cmp.compare(out, expected, self.tols, compute_device=self.device if self.cuda else None)
                    if not c.ok and not c.integrity and like_admitted(c):
                        admitted_checks += 1
                        c = cmp.Comparison(True)
                    if not c.ok and not c.integrity:
                        fp64_checks += 1
                        second = self.second_opinion(out, expected, f"new input set {k}", values)
                        c = second if second is not None and second.ok else c
                    if not c.ok:
                        raise self.fail(Verdict.INTEGRITY, f"a call on an input set no call had seen (drawn after "
                                        f"timing) returned a wrong output (outputs kept from earlier calls?): "
                                        f"{c.message}")
                    r_ms += timing.reported([r_sample], ref_s)
                    c_ms += timing.reported([c_sample], cand_s)
                    if set_s is None:
                        # the look's seconds: as many sets as fit in fresh_input_max_s at the first
                        # set's pace (drawing inputs of gigabytes, a float64 opinion), never fewer
                        # than fresh_input_calls
                        set_s = time.monotonic() - started
                        if set_s > 0:
                            sets = max(n_min, min(sets, int(max_s / set_s)))
                    k += 1
            finally:
                self._confirming = False
            m = {"new": statistics.median(c_ms), "ref_new": statistics.median(r_ms),
                 "seen": statistics.median(c_seen), "ref_seen": statistics.median(r_seen)}
            beside = m["seen"] * ratio(m["ref_new"], m["ref_seen"])
            timed = cand_med * ratio(m["ref_new"], ref_med)
            m.update(beside_factor=m["new"] / beside if beside > 0 else 1.0, beside_excess=m["new"] - beside,
                     timed_factor=m["new"] / timed if timed > 0 else 1.0, timed_excess=m["new"] - timed)
            larger = "beside" if m["beside_factor"] >= m["timed_factor"] else "timed"
            m.update(factor=m[f"{larger}_factor"], excess=m[f"{larger}_excess"],
                     values=float(m["beside_factor"] > factor_limit and m["beside_excess"] > slack_now()))
            return m

        def over(m: dict[str, float]) -> bool:
            return m["factor"] > factor_limit and m["excess"] > slack_now()

        try:
            m1 = look(base)
        except _NoFreshSet as exc:
            self.flags.append(f"fresh_inputs_skipped: {exc}")
            return
        self.notes.update(fresh_input_sets=float(sets), fresh_input_slack_ms=slack_now(),
                          fresh_input_burst=float(burst), fresh_input_set_s=set_s or 0.0,
                          fresh_input_fp64_checks=float(fp64_checks),
                          fresh_input_admitted_checks=float(admitted_checks),
                          fresh_input_ms=m1["new"], reference_fresh_input_ms=m1["ref_new"],
                          fresh_input_seen_ms=m1["seen"], fresh_input_factor=m1["factor"],
                          fresh_input_beside_factor=m1["beside_factor"], fresh_input_timed_factor=m1["timed_factor"])
        if not over(m1):
            return
        seen = (f"on {sets} input sets no call had seen it took {m1['new']:.4g} ms per call (median), on values it "
                f"had seen beside them {m1['seen']:.4g} ms, on the timed calls {cand_med:.4g} ms: {m1['factor']:.2f}x "
                f"(the reference: {m1['ref_new']:.4g}, {m1['ref_seen']:.4g} and {ref_med:.4g} ms)")
        try:
            m2 = look(base + (burst + 2) * sets + 2)
        except _NoFreshSet as exc:  # not confirmed, not cleared: charged what the first look saw
            self._charge_fresh(m1["excess"], f"{seen}; no more sets to confirm it ({exc})", bool(m1["values"]))
            return
        self.notes.update(fresh_input_confirm_ms=m2["new"], reference_fresh_input_confirm_ms=m2["ref_new"],
                          fresh_input_confirm_seen_ms=m2["seen"], fresh_input_confirm_factor=m2["factor"])
        if not over(m2):
            self.flags.append(f"fresh_inputs_unconfirmed: {seen}; not again on {sets} more ({m2['factor']:.2f}x)")
            return
        values = bool(m1["values"] and m2["values"])
        if min(m1["factor"], m2["factor"]) >= float(ev.get("fresh_input_reject", 3.0)):
            # work its process left running between calls slows whatever call follows: where
            # the judge saw that, it is the verdict's reason, not values kept from earlier calls
            if self._idle_excess():
                self.check_idle_cpu()
            if values:
                raise self.fail(Verdict.INTEGRITY, f"the candidate is fast only on values it has seen: {seen}, and "
                                f"{m2['factor']:.2f}x on {sets} more: outputs kept from earlier calls and reused")
            raise self.fail(Verdict.INTEGRITY, f"the candidate's timed calls were faster than any call after them: "
                            f"{seen}, and {m2['factor']:.2f}x on {sets} more: it did not compute on the timed calls "
                            "what it computes after them (outputs kept while timed?)")
        self._charge_fresh(m2["excess"], f"{seen}, and {m2['factor']:.2f}x on {sets} more", values)

    def _charge_fresh(self, excess: float, seen: str, values: bool) -> None:
        """Charge the timed calls ``excess`` ms each: flagged ``fresh_inputs_charged`` where the
        candidate was slower on the new sets than on seen values beside them, else
        ``speed_changed_after_timing`` (as slow on both after timing: on the 2-core CPU machine
        an honest process's two threads losing a core does that, and the charge corrects a
        speedup its timed calls did not earn)."""
        now = self.summaries["candidate"]  # charged already, perhaps, by the cross-checks
        self.summaries["candidate"] = attrs.evolve(now, stats=timing.charged(now.stats, excess, "fresh_input_charge"))
        self.notes["fresh_input_charged_ms"] = excess
        name = "fresh_inputs_charged" if values else "speed_changed_after_timing"
        self.flags.append(f"{name}: {seen}: its timed calls are charged {excess:.3g} ms each")

    def envelope_allowed(self, se: float) -> float:
        ev = self.ev
        slack = float(ev["envelope_slack_ms"] if self.cuda else ev.get("envelope_slack_ms_cpu", 0.25))
        return max(slack, float(ev["envelope_slack_fraction"]) * self.summaries["candidate"].stats.median_ms) + 3 * se

    def extra_flags(self) -> None:
        cand = self.summaries["candidate"]
        if cand.escaped_ms > 0:
            self.flags.append(f"side_stream_work: the candidate left about {cand.escaped_ms:.3f} ms of work per call "
                              "on streams its own stream never waited for; its time runs to device idle")
        noisy = float(self.ev.get("noisy_cv", 0.2))
        loud = [f"{name} cv {s.stats.cv:.2f}" for name, s in self.summaries.items()
                if name in ("reference", "candidate") and s.stats.cv > noisy]
        if loud:
            self.flags.append(f"noisy_timing: {', '.join(loud)} above evaluator.noisy_cv {noisy:g}; the speedup is "
                              "not reliable until the candidate is timed again")

    def reverify_if_suspicious(self) -> None:
        suspicious = suspicious_speed(self.summaries["reference"].stats.median_ms,
                                      self.summaries["candidate"].stats.median_ms, self.bound, self.ev)
        if not suspicious:
            return
        self.status("reverify")
        n = int(self.ev.get("reverify_trials", 10))
        rng = random.Random(secrets.randbits(64))  # seeds the candidate cannot know ahead (it knows the run's)
        for t in range(n):
            values = self.draw_inputs(rng.randrange(1 << 31))
            ref = cmp.snapshot(self.reference_on(values, 0.0, "the reference's re-verification"))
            inp.fill(self.cand_in, values)
            self.sync()
            answer = self.cand_call({"op": "call", "export": True, "prefix": "re-verification: forward failed: "},
                                    self.call_limit(), f"re-verification trial {t}")
            err, out = self.read_back(answer, ref, self.cand_views)
            c = err if err is not None else cmp.compare(out, ref, self.tols, torch.device(self.device).type)
            if not c.ok and not c.integrity and err is None:
                second = self.second_opinion(out, ref, f"re-verification trial {t}", values)
                c = second if second is not None and second.ok else c
            if not c.ok:
                raise self.fail(Verdict.INTEGRITY, f"{suspicious[0].split(':')[0]}: re-verification trial {t} "
                                f"failed: {c.message}")
        self.flags += [s + f" (re-verified with {n} more trials)" for s in suspicious]

    def measure(self) -> None:
        """Extra measurements (energy, ...): the judge runs them, the harnesses make the calls."""
        self.measurements: dict[str, dict[str, float]] = {}
        limit = self.job.get("measure_max_ms")
        median = self.summaries["candidate"].stats.median_ms
        if limit is not None and self.job.get("measurements") and median > limit:
            for spec in self.job["measurements"]:
                self.flags.append(f"measurement_skipped: {spec['name']}: {median:.4g} ms is more than "
                                  f"{limit:.4g} ms (evaluator.measure_within over the fastest candidate so far)")
            return
        for spec in self.job.get("measurements", []):
            self.status(f"measure:{spec['name']}")
            try:
                m = _load_measurement(spec)
                reason = m.unavailable_reason(self.device)
                if reason:
                    self.flags.append(f"measurement_unavailable: {spec['name']}: {reason}")
                    continue
                inp.fill(self.ref_in, self.input_sets[0])
                inp.fill(self.cand_in, self.input_sets[0])
                self.sync()
                assert self.ref is not None and self.cand is not None
                ref_m = dict(m.measure_reference(*self.remote_calls(self.ref), self.earlier(spec["name"])))
                # when it ended, on this host's clock: a later evaluation on this worker passes
                # it back as an earlier measurement of the same reference (loop.py)
                ref_m["measured_at_unix_s"] = time.time()
                cand_m = m.measure(*self.remote_calls(self.cand))
                self.measurements[spec["name"]] = {**{f"{k}": v for k, v in cand_m.items()},
                                                   **{f"reference_{k}": v for k, v in ref_m.items()}}
            except Fail:
                raise
            except Exception as exc:
                self.flags.append(f"measurement_failed: {spec['name']}: {one_line(exc)}")

    def earlier(self, name: str) -> list[Any]:
        """The earlier measurements ``name`` of this reference on this worker, newest first,
        with their age: the job's ``reference_history`` and, read now, the loop's latest
        ``reference_history_file`` (records written after this job was: the second candidate
        of a batch is started before the first's record exists), where the candidate's
        process is confined by Landlock: unconfined, it could have written that file."""
        from kernelpro.api import EarlierMeasurement

        entries = list((self.job.get("reference_history") or {}).get(name) or [])
        path, worker = self.job.get("reference_history_file"), self.job.get("worker")
        # read after the candidate's code has run: only where Landlock kept it from writing there
        if path and worker and self.notes.get("sandbox_landlock") == 1.0:
            try:
                latest = json.loads(Path(path).read_text())
                entries += list(((latest.get(worker) or {}).get(name) or []) if isinstance(latest, dict) else [])
            except (OSError, ValueError, AttributeError, TypeError):
                pass  # not written yet, or on another host (a cluster's worker): the job's alone
        out = []
        seen: set[float] = set()
        now = time.time()
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            values = {k: float(v) for k, v in entry.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            at = values.pop("measured_at_unix_s", None)
            if at is not None and now >= at and at not in seen:
                seen.add(at)
                out.append(EarlierMeasurement(values=values, age_s=now - at))
        return sorted(out, key=lambda e: e.age_s)

    def remote_calls(self, remote: Remote) -> tuple[Callable[[], None], Callable[[], None]]:
        """``call``: queue one call in ``remote`` (no answer awaited); ``sync``: wait until the
        calls queued so far are done (a failure among them ends the evaluation)."""
        limit = max(60.0, self.call_limit())

        def call() -> None:
            remote.send({"op": "run", "flags": "default"})  # the reference as users run it

        def sync() -> None:
            self.ask(remote, {"op": "sync"}, limit * 20, "a measurement's calls")

        return call, sync

    def finish_notes(self) -> None:
        self.notes.update({f"stage_{name}_s": v for name, v in stage_seconds(self.stages, time.monotonic()).items()})
        if self.gpu_lock.active:  # the device time this evaluation took from the jobs sharing the GPU
            self.notes["gpu_lock_held_s"] = self.gpu_lock.held_s()

    def result(self) -> EvalResult:
        if self.exact_passed:
            self.flags.append(f"fp64_second_opinion: {len(self.exact_passed)} check(s) failed the tolerance against "
                              f"the fp32 reference and passed against the reference in float64 (first: "
                              f"{self.exact_passed[0]})")
        self.finish_notes()
        measurements = dict(self.measurements)
        measurements["evaluator"] = self.notes
        return EvalResult(
            verdict=Verdict.CORRECT, compile=self.compile_res, correctness=self.correct,
            timing=self.summaries["candidate"].stats, baseline=self.summaries["reference"].stats,
            baseline_compiled=self.summaries["compiled"].stats if "compiled" in self.summaries else None,
            flags=tuple(self.flags), measurements=measurements, device=self.device, gpu_name=self.gpu_name,
            wall_s=time.monotonic() - self.t_start)


# --- helpers ---------------------------------------------------------------------------------------------


def _values_at(sampled: Any, gold: Any) -> Any:
    """``gold``'s values (the float64 reference's output) at the positions of ``sampled``."""
    return cmp.values_at(gold, sampled, same_dtype=False)[0]


def _available_bytes(cuda: bool) -> int:
    """Memory the judge's copies may take a share of: on a GPU the driver's free memory plus
    the allocator cache's free blocks; on a CPU the host's available memory."""
    if not cuda:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    free, _total = torch.cuda.mem_get_info()
    return free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()


def _output_bytes(out: Any) -> int:
    return sum(t.numel() * t.element_size() for t in cmp.tensors(out))


def _example(desc: Any, device: str) -> Any:
    """An output value of the described structure (empty tensors of its shapes and dtypes,
    values as given): what the judge allocates buffers after."""
    if isinstance(desc, dict) and ("list" in desc or "tuple" in desc):
        items = [_example(x, device) for x in (desc["list"] if "list" in desc else desc["tuple"])]
        return items if "list" in desc else tuple(items)
    if isinstance(desc, dict) and isinstance(desc.get("tensor"), dict):
        t = desc["tensor"]
        return torch.empty(tuple(t["shape"]), dtype=transport.dtype_of(t["dtype"]), device="meta")
    if isinstance(desc, dict) and "v" in desc:
        return desc["v"]
    raise Fail(Verdict.PROBLEM_ERROR, f"the reference returned something that is not a tensor, a number or a list "
               f"of them ({desc.get('other') if isinstance(desc, dict) else desc!r})")


def tolerances(ev: dict[str, Any], problem: Any) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """Per-dtype (atol, rtol): the config's, overridden by the problem's
    ``KERNELPRO_TOLERANCES = {"float32": (atol, rtol), ...}``."""
    tol = {k: (float(v["atol"]), float(v["rtol"])) for k, v in ev["tolerances"].items()}
    notes: list[str] = []
    own = getattr(problem, "KERNELPRO_TOLERANCES", None)
    if own is not None:
        if not isinstance(own, dict):
            raise Fail(Verdict.PROBLEM_ERROR, "the problem's KERNELPRO_TOLERANCES must be a dict "
                       "{dtype name: (atol, rtol)}")
        for key, value in own.items():
            try:
                atol, rtol = (float(v) for v in value)
            except (TypeError, ValueError):
                raise Fail(Verdict.PROBLEM_ERROR, f"KERNELPRO_TOLERANCES[{key!r}]: expected (atol, rtol)") from None
            if atol < 0 or rtol < 0:
                raise Fail(Verdict.PROBLEM_ERROR, f"KERNELPRO_TOLERANCES[{key!r}]: atol and rtol must be >= 0")
            tol[str(key).replace("torch.", "")] = (atol, rtol)
            notes.append(f"{key}: atol={atol:g} rtol={rtol:g}")
    return tol, notes


class ReferenceWatch:
    """What the degenerate-reference flags and the constant-output check need of the
    reference's outputs, taken as each one comes (the judge may not keep them): whether all
    equal the first (compared with the first's kept copy, or by :func:`fingerprint` when it
    was not kept), and whether an all-zeros or a constant output (its mean) would pass
    against every floating-point one. Each question stops costing anything once answered
    "no"."""

    def __init__(self, tols: dict[str, tuple[float, float]], on: str | None, trials: int) -> None:
        self.tols, self.on, self.trials = tols, on, trials
        self.seen = 0
        self.anchor: Any = None
        self.anchor_print = False
        self.equal = True  # every output seen equals the first
        self.equal_trials = True  # ... among the first ``trials``
        self.zeros: bool | None = None  # None: no floating-point output seen
        self.const: bool | None = None

    def add(self, out: Any, kept: Any) -> None:
        """``out``: the output (valid during the call); ``kept``: the judge's copy, or None."""
        if self.seen == 0:
            self.anchor_print = kept is None
            self.anchor = fingerprint(out) if kept is None else kept
        elif self.equal:
            self.equal = fingerprint(out) == self.anchor if self.anchor_print else cmp.same_values(self.anchor, out)
        self.seen += 1
        if self.seen <= self.trials:
            self.equal_trials = self.equal
        if any(x.is_floating_point() for x in cmp.tensors(out)):
            if self.zeros is not False:
                self.zeros = cmp.compare(cmp.map_tensors(out, _zeros_of), out, self.tols, stop_early=True,
                                         compute_device=self.on).ok
            # one value per output is its own mean: the question means nothing there
            if self.const is not False and any(x.is_floating_point() and x.numel() > 1 for x in cmp.tensors(out)):
                self.const = cmp.compare(cmp.map_tensors(out, _mean_of), out, self.tols, stop_early=True,
                                         compute_device=self.on).ok

    def flags(self) -> list[str]:
        flags = []
        if self.trials > 1 and self.equal_trials:
            flags.append("degenerate_reference: the reference output does not depend on the inputs")
        if self.zeros:
            flags.append("degenerate_reference: an all-zeros output passes the tolerance")
        elif self.const:
            flags.append("degenerate_reference: a constant output (the mean) passes the tolerance")
        return flags


def _mean_of(x: torch.Tensor) -> torch.Tensor:
    """``x``'s mean (summed in float64, piece by piece: no float64 copy of a multi-GB output)
    as a tensor of ``x``'s shape that takes no memory (one value, expanded)."""
    if not x.is_floating_point() or x.numel() == 0:
        return x
    flat = x.detach().reshape(-1)
    total = sum(float(piece.sum(dtype=torch.float64)) for piece in flat.split(cmp.CHUNK))
    return _filled(x, total / x.numel())


def _zeros_of(x: torch.Tensor) -> torch.Tensor:
    return _filled(x, 0.0)


def _filled(x: torch.Tensor, value: float) -> torch.Tensor:
    return torch.full((), value, dtype=x.dtype, device=x.device).expand(x.shape)


def fingerprint(out: Any) -> tuple[Any, ...]:
    """Per tensor: dtype, shape and two wrapping 64-bit sums over its bytes read as 32-bit
    words (plain and position-weighted); other values as they are. Computed where the
    tensor lies, in pieces of 2**24 words, with one synchronisation per tensor."""
    parts: list[Any] = []
    piece = 1 << 24
    for x in cmp.flatten(out):
        if not isinstance(x, torch.Tensor):
            parts.append(("value", repr(x)))
            continue
        raw = x.detach().contiguous().reshape(-1).view(torch.uint8)
        pad = (-raw.numel()) % 4
        if pad or raw.storage_offset() % 4:
            raw = torch.cat([raw, raw.new_zeros(pad)])
        words = raw.view(torch.int32)
        plain = torch.zeros((), dtype=torch.int64, device=words.device)
        weighted = torch.zeros((), dtype=torch.int64, device=words.device)
        pos = torch.arange(1, min(piece, words.numel()) + 1, device=words.device, dtype=torch.int64)
        for start in range(0, words.numel(), piece):
            w = words[start:start + piece].to(torch.int64)
            s = w.sum()
            plain += s
            weighted += (w * pos[:w.numel()]).sum() + start * s
        parts.append((str(x.dtype), tuple(x.shape), int(plain), int(weighted)))
    return tuple(parts)


def _load_measurement(spec: dict[str, Any]) -> Any:
    import importlib

    from kernelpro.config import structure

    mod_name, _, qual = spec["import"].partition(":")
    cls = getattr(importlib.import_module(mod_name), qual)
    settings_cls = getattr(cls, "Settings", None)
    settings = structure(spec.get("settings") or {}, settings_cls) if settings_cls else None
    return cls(settings)
