"""Timing methods, named and stated.

``cuda_event+l2_flush`` (GPU): before every timed call the L2 cache is flushed by
writing a buffer twice its size, outside the timed region. Three CUDA events are recorded
on the current stream: ``start`` before the call, ``end`` right after it returns, and
``after`` once the whole device has been synchronized. ``end - start`` is the call's time
on its stream, without host round trips; ``after - end`` (the *gap*) is how long the
device kept working on other streams after the call's own stream was done, plus the
synchronization's latency. The latency alone is measured first on empty calls (``gap0``).
For each callable, when the median gap exceeds ``gap0`` by more than
``max(ESCAPE_ABS_MS, ESCAPE_REL x median stream time)``, the call left work on other
streams that its stream never waited for: its samples become ``after - start - gap0``
(everything up to the device being idle) and the method is named
``cuda_event+device_sync+l2_flush``; :attr:`Timer.escaped_ms` records the excess. Work on
a side stream that the call joins back (an event wait) is inside ``end - start`` anyway.
Warm-up runs for ``warmup_ms``; the number of timed calls is chosen so their total is
about ``rep_ms`` (within ``min_reps``..``max_reps``). Several callables are timed
interleaved in rounds so that clock and thermal drift affect them alike. The statistic is
the median; IQR and coefficient of variation are reported.

The synchronization's latency grows with how long the host waited: on the H200, plain
one-kernel Triton candidates of 0.8-3 ms showed gaps 0.05-0.12 ms above ``gap0`` in some
worker processes, and were charged as if they had left work on other streams. So a
callable whose gap passes the thresholds is compared again with a control of the same
length: a one-stream spin kernel (``torch.cuda._sleep``) lasting the callable's median
stream time, timed the same way; only the excess over the larger of the two latencies
counts (:meth:`Timer.sync_gap_at_ms`).

``perf_counter`` (CPU): the same scheme with ``time.perf_counter`` around each call.

Every function this module needs is captured at import time, before candidate code is
imported into the process, so a candidate that patches ``torch.cuda.Event`` or
``time.perf_counter`` does not change the measurement; after every timed call the timer
also checks that neither its captured functions nor the public ones were replaced
(:class:`TamperError`), and the worker compares a snapshot of all of torch's callables.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

import torch

from kernelpro.records import TimingStats

_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_event_sync = torch.cuda.Event.synchronize
_cuda_sync = torch.cuda.synchronize
_spin = getattr(torch.cuda, "_sleep", None)  # a one-stream kernel that spins for N clock cycles
_empty = torch.empty


def stats(samples_ms: Sequence[float], method: str) -> TimingStats:
    xs = sorted(samples_ms)
    n = len(xs)
    med = statistics.median(xs)
    if n >= 4:
        q = statistics.quantiles(xs, n=4)
        iqr = q[2] - q[0]
    else:
        iqr = xs[-1] - xs[0]
    mean = statistics.fmean(xs)
    sd = statistics.pstdev(xs) if n > 1 else 0.0
    return TimingStats(
        median_ms=med, iqr_ms=iqr, mean_ms=mean, min_ms=xs[0], max_ms=xs[-1],
        cv=(sd / mean) if mean > 0 else 0.0, n=n, method=method,
    )


class L2Flusher:
    def __init__(self, l2_bytes: int, device: str) -> None:
        n = max(int(l2_bytes) * 2 // 4, 1 << 20)
        self.buf = _empty(n, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


#: side-stream work shorter than this (ms), or than ESCAPE_REL of the call's stream time,
#: is within the jitter of the synchronization's wake-up and is not charged
ESCAPE_ABS_MS = 0.015
ESCAPE_REL = 0.03


def escaped_work(event_ms: Sequence[float], sync_ms: Sequence[float], gap0_ms: float) -> float:
    """Milliseconds the device kept working after the call's stream was done, beyond the
    synchronization latency ``gap0_ms``: the median gap's excess when it is above the
    thresholds, else 0."""
    if not event_ms:
        return 0.0
    excess = statistics.median(s - e for e, s in zip(event_ms, sync_ms)) - gap0_ms
    if excess > max(ESCAPE_ABS_MS, ESCAPE_REL * statistics.median(event_ms)):
        return excess
    return 0.0


class TamperError(Exception):
    """A function the timer relies on was replaced while a timed call ran."""


def _timer_functions() -> tuple[Any, ...]:
    g = globals()
    return (g["_perf_counter"], g["_Event"], g["_event_record"], g["_event_elapsed"], g["_event_sync"],
            g["_cuda_sync"], g["_spin"], time.perf_counter, torch.cuda.synchronize, torch.cuda.Event.record,
            torch.cuda.Event.elapsed_time)


class Timer:
    """Times callables on one device; see the module docstring for the method."""

    def __init__(self, device: str, warmup_ms: float, rep_ms: float, min_reps: int, max_reps: int,
                 l2_bytes: int | None = None) -> None:
        self.device = device
        self.cuda = device.startswith("cuda")
        self.warmup_ms = warmup_ms
        self.rep_ms = rep_ms
        self.min_reps = min_reps
        self.max_reps = max_reps
        self._ids = tuple(id(f) for f in _timer_functions())
        #: per callable, ms of work it left on other streams (only callables that did)
        self.escaped_ms: dict[str, float] = {}
        self.gap0_ms = 0.0
        #: per flagged callable, the gap of its same-length one-stream control
        self.gap_matched_ms: dict[str, float] = {}
        self._cycles_per_ms: float | None = None
        if self.cuda:
            if l2_bytes is None:
                props = torch.cuda.get_device_properties(torch.cuda.current_device())
                l2_bytes = getattr(props, "L2_cache_size", 64 << 20)
            self.flush: Callable[[], None] | None = L2Flusher(l2_bytes, device)
            self.method = "cuda_event+l2_flush"
        else:
            self.flush = None
            self.method = "perf_counter"

    def _check(self) -> None:
        if tuple(id(f) for f in _timer_functions()) != self._ids:
            raise TamperError("a timing function (perf_counter, torch.cuda.Event, synchronize) was replaced "
                              "during a timed call")

    def once(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        """One timed call: (milliseconds up to the device being idle, what ``fn`` returned)."""
        (_ev, ms), out = self.once2(fn)
        return ms, out

    def once2(self, fn: Callable[[], Any]) -> tuple[tuple[float, float], Any]:
        """One timed call: ((stream time, time up to device idle) in ms, what ``fn`` returned).
        On CPU both are the perf_counter time."""
        if self.cuda:
            assert self.flush is not None
            self.flush()
            start, end, after = _Event(enable_timing=True), _Event(enable_timing=True), _Event(enable_timing=True)
            _event_record(start)
            out = fn()
            _event_record(end)
            _cuda_sync()
            _event_record(after)
            _event_sync(after)
            self._check()
            return (float(_event_elapsed(start, end)), float(_event_elapsed(start, after))), out
        t0 = _perf_counter()
        out = fn()
        t1 = _perf_counter()
        self._check()
        ms = (t1 - t0) * 1e3
        return (ms, ms), out

    def warmup(self, fn: Callable[[], Any], after: Callable[[Any], None] | None = None,
               before: Callable[[int], None] | None = None) -> float:
        """Run ``fn`` for about ``warmup_ms`` (at least 3 calls); return the estimated time per call (ms): the
        median warm-up call, so a slow first call (lazy initialization, autotuning) does not
        shrink the number of timed calls. ``before(k)`` / ``after(out)`` run around warm-up
        call ``k`` (0, 1, ...)."""
        spent, times = 0.0, []
        while True:
            if before is not None:
                before(len(times))
            ms, out = self.once(fn)
            if after is not None:
                after(out)
            del out
            spent += ms
            times.append(ms)
            if (spent >= self.warmup_ms and len(times) >= 3) or len(times) >= 10_000:
                break
        return statistics.median(times)

    def overhead_ms(self, reps: int = 50) -> float:
        """Median stream time of an empty call (event latency)."""
        return statistics.median(self.once2(lambda: None)[0][0] for _ in range(reps))

    def _median_gap(self, fn: Callable[[], Any], reps: int) -> float:
        """Median gap (``after - end``) of ``reps`` timed calls of ``fn``."""
        return statistics.median(sy - ev for (ev, sy), _out in (self.once2(fn) for _ in range(reps)))

    def sync_gap_ms(self, reps: int = 50) -> float:
        """Median gap (``after - end``) of an empty call: the synchronization latency."""
        return self._median_gap(lambda: None, reps)

    def sync_gap_at_ms(self, stream_ms: float, reps: int = 15) -> float | None:
        """Median gap of a one-stream spin kernel whose stream time is about ``stream_ms``:
        the synchronization's latency after the host waited that long. None without a
        spin kernel in this torch."""
        if not self.cuda or _spin is None:
            return None
        if self._cycles_per_ms is None:
            probe = 1 << 20
            ms = statistics.median(self.once2(lambda: _spin(probe))[0][0] for _ in range(5))
            self._cycles_per_ms = probe / max(ms, 1e-3)
        cycles = max(1, int(self._cycles_per_ms * stream_ms))
        return self._median_gap(lambda: _spin(cycles), reps)

    def interleaved(self, fns: dict[str, Callable[[], Any]], rounds: int,
                    before: Callable[[str, int], None] | None = None,
                    after: Callable[[str, int, Any], None] | None = None) -> dict[str, TimingStats]:
        """Time each callable, alternating between them in ``rounds`` rounds.

        ``before(name, i)`` runs before and ``after(name, i, output)`` after each timed
        call, both outside the timed region (the worker refreshes inputs, re-checks outputs,
        poisons the reference's outputs and resets device state there); ``i`` counts the
        timed calls of one callable from 0; warm-up calls get ``before(name, -1 - k)`` and
        ``after(name, -1, output)``."""
        per_call = {}
        for name, fn in fns.items():
            warm_before = (lambda k, n=name: before(n, -1 - k)) if before else None
            warm_after = (lambda out, n=name: after(n, -1, out)) if after else None
            per_call[name] = max(self.warmup(fn, warm_after, warm_before), 1e-4)
        gap0 = self.sync_gap_ms(30) if self.cuda else 0.0
        self.gap0_ms = gap0
        ev_samples: dict[str, list[float]] = {name: [] for name in fns}
        sy_samples: dict[str, list[float]] = {name: [] for name in fns}
        rounds = max(1, rounds)
        reps = {name: max(1, max(self.min_reps, min(self.max_reps, int(self.rep_ms / per_call[name]))) // rounds)
                for name in fns}
        count = {name: 0 for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                for _i in range(reps[name]):
                    i = count[name]
                    if before is not None:
                        before(name, i)
                    (ev, sy), out = self.once2(fn)
                    ev_samples[name].append(ev)
                    sy_samples[name].append(sy)
                    if after is not None:
                        after(name, i, out)
                    del out
                    count[name] += 1
        result = {}
        for name in fns:
            if not self.cuda:
                result[name] = stats(ev_samples[name], self.method)
                continue
            gap = gap0
            escaped = escaped_work(ev_samples[name], sy_samples[name], gap)
            if escaped > 0:
                matched = self.sync_gap_at_ms(statistics.median(ev_samples[name]))
                if matched is not None:
                    self.gap_matched_ms[name] = matched
                    gap = max(gap0, matched)
                    escaped = escaped_work(ev_samples[name], sy_samples[name], gap)
            if escaped > 0:
                self.escaped_ms[name] = escaped
                result[name] = stats([max(sy - gap, ev) for ev, sy in zip(ev_samples[name], sy_samples[name])],
                                     "cuda_event+device_sync+l2_flush")
            else:
                result[name] = stats(ev_samples[name], self.method)
        return result
