"""Timing methods, named and stated.

``cuda_event+l2_flush`` (GPU): before every timed call the L2 cache is flushed by
writing a buffer twice its size, outside the timed region. A CUDA event is recorded
before the call on the current stream; after the call the whole device is synchronized
and a second event is recorded, so work the call left on other streams is inside the
measured interval (the synchronization's own latency, a few microseconds, is in it too,
for reference and candidate alike). Warm-up runs for ``warmup_ms``; the number of timed
calls is chosen so their total is about ``rep_ms`` (within ``min_reps``..``max_reps``).
Several callables are timed interleaved in rounds so that clock and thermal drift affect
them alike. The statistic is the median; IQR and coefficient of variation are reported.

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


class TamperError(Exception):
    """A function the timer relies on was replaced while a timed call ran."""


def _timer_functions() -> tuple[Any, ...]:
    g = globals()
    return (g["_perf_counter"], g["_Event"], g["_event_record"], g["_event_elapsed"], g["_event_sync"],
            g["_cuda_sync"], time.perf_counter, torch.cuda.synchronize, torch.cuda.Event.record,
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
        if self.cuda:
            if l2_bytes is None:
                props = torch.cuda.get_device_properties(torch.cuda.current_device())
                l2_bytes = getattr(props, "L2_cache_size", 64 << 20)
            self.flush: Callable[[], None] | None = L2Flusher(l2_bytes, device)
            self.method = "cuda_event+device_sync+l2_flush"
        else:
            self.flush = None
            self.method = "perf_counter"

    def _check(self) -> None:
        if tuple(id(f) for f in _timer_functions()) != self._ids:
            raise TamperError("a timing function (perf_counter, torch.cuda.Event, synchronize) was replaced "
                              "during a timed call")

    def once(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        """One timed call: (milliseconds, what ``fn`` returned)."""
        if self.cuda:
            assert self.flush is not None
            self.flush()
            start, end = _Event(enable_timing=True), _Event(enable_timing=True)
            _event_record(start)
            out = fn()
            _cuda_sync()
            _event_record(end)
            _event_sync(end)
            self._check()
            return float(_event_elapsed(start, end)), out
        t0 = _perf_counter()
        out = fn()
        t1 = _perf_counter()
        self._check()
        return (t1 - t0) * 1e3, out

    def warmup(self, fn: Callable[[], Any], after: Callable[[Any], None] | None = None,
               before: Callable[[int], None] | None = None) -> float:
        """Run ``fn`` for about ``warmup_ms``; return the estimated time per call (ms).
        ``before(k)`` / ``after(out)`` run around warm-up call ``k`` (0, 1, ...)."""
        spent, count = 0.0, 0
        while True:
            if before is not None:
                before(count)
            ms, out = self.once(fn)
            if after is not None:
                after(out)
            del out
            spent += ms
            count += 1
            if spent >= self.warmup_ms or count >= 10_000:
                break
        return spent / count

    def overhead_ms(self, reps: int = 50) -> float:
        """Median time of an empty call with this method (synchronization and event latency)."""
        return statistics.median(self.once(lambda: None)[0] for _ in range(reps))

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
        samples: dict[str, list[float]] = {name: [] for name in fns}
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
                    ms, out = self.once(fn)
                    samples[name].append(ms)
                    if after is not None:
                        after(name, i, out)
                    del out
                    count[name] += 1
        return {name: stats(xs, self.method) for name, xs in samples.items()}
