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
``time.perf_counter`` cannot change the measurement.
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
        if self.cuda:
            if l2_bytes is None:
                props = torch.cuda.get_device_properties(torch.cuda.current_device())
                l2_bytes = getattr(props, "L2_cache_size", 64 << 20)
            self.flush: Callable[[], None] | None = L2Flusher(l2_bytes, device)
            self.method = "cuda_event+device_sync+l2_flush"
        else:
            self.flush = None
            self.method = "perf_counter"

    def once(self, fn: Callable[[], Any]) -> float:
        """One timed call in milliseconds."""
        if self.cuda:
            assert self.flush is not None
            self.flush()
            start, end = _Event(enable_timing=True), _Event(enable_timing=True)
            _event_record(start)
            fn()
            _cuda_sync()
            _event_record(end)
            _event_sync(end)
            return float(_event_elapsed(start, end))
        t0 = _perf_counter()
        fn()
        return (_perf_counter() - t0) * 1e3

    def warmup(self, fn: Callable[[], Any]) -> float:
        """Run ``fn`` for about ``warmup_ms``; return the estimated time per call (ms)."""
        est = self.once(fn)
        spent = est
        count = 1
        while spent < self.warmup_ms and count < 10_000:
            spent += self.once(fn)
            count += 1
        return spent / count

    def interleaved(self, fns: dict[str, Callable[[], Any]], rounds: int,
                    on_call: Callable[[str, int], None] | None = None) -> dict[str, TimingStats]:
        """Time each callable, alternating between them in ``rounds`` rounds.

        ``on_call(name, i)`` runs before each timed call, outside the timed region (used to
        rotate inputs)."""
        per_call = {name: max(self.warmup(fn), 1e-4) for name, fn in fns.items()}
        samples: dict[str, list[float]] = {name: [] for name in fns}
        for name in fns:
            total = int(self.rep_ms / per_call[name])
            per_call[name] = max(self.min_reps, min(self.max_reps, total))
        rounds = max(1, rounds)
        for r in range(rounds):
            for name, fn in fns.items():
                reps = max(1, int(per_call[name]) // rounds)
                for i in range(reps):
                    if on_call is not None:
                        on_call(name, r * reps + i)
                    samples[name].append(self.once(fn))
        return {name: stats(xs, self.method) for name, xs in samples.items()}
