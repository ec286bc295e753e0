"""Timing methods, named and stated.

Where each part runs. The reference and the candidate each run in a harness process of
their own (:mod:`kernelpro.evaluate.harness`); the judge (:mod:`kernelpro.evaluate.judge`)
drives both, one call at a time, and trusts only what it measures itself or what the
reference's harness reports.

``cuda_event+l2_flush`` (GPU). Before every timed call the judge fills the harness's input
buffers with the call's values and flushes the L2 by writing a buffer twice its size (its
own kernels, then a device synchronization: outside the timed region). The harness records
three CUDA events on its current stream: ``start`` before the call, ``end`` right after it
returns, and ``after`` once its device is synchronized (:class:`EventTimer`). ``end -
start`` is the call's time on its stream; ``after - end`` (the *gap*) is the
synchronization's latency plus work the call left on streams it never waited for. The
latency alone (``gap0``) is measured on empty calls. When a callable's median gap exceeds
``gap0`` by more than ``max(ESCAPE_ABS_MS, ESCAPE_REL x median stream time)``, the gap is
compared again with that of a one-stream spin kernel as long as the call (the host wakes
later from a long synchronization than from an empty one); if it still exceeds it, the
call left work on other streams: its samples become ``after - start - latency`` and the
method is named ``cuda_event+device_sync+l2_flush`` (:func:`summarize`).

``perf_counter`` (CPU): ``time.perf_counter`` around each call.

Repetitions: warm-up for ``warmup_ms`` (at least 3 calls); then about ``rep_ms`` of calls
per callable (``min_reps``..``max_reps``), the callables' calls spread evenly over the
whole timing and alternating one by one (:func:`interleave`; ``rounds`` > 0: in that many
blocks per callable instead), so the GPU's clock changes and thermal drift affect them
alike. The statistic is the median; IQR and coefficient of variation are reported.

The cross-check (:func:`envelope_excess`). Around every call the judge measures its own
wall clock, from sending the call to receiving its answer (the *envelope*): the call, the
synchronization, the copy of its outputs into the judge's buffers, two socket hops. The
envelope minus the reported time is the protocol's overhead; the reference's harness runs
the same protocol, so its overhead is known from trusted numbers. A candidate's process
that reports shorter times than it took (its timer rewritten) shows a median overhead
larger than the reference's by the time it hid; beyond ``max(envelope_slack_ms,
envelope_slack_fraction x its median)`` plus three standard errors of the difference
(the host's scheduling jitter, large on a busy machine) the judge rejects it.
"""

from __future__ import annotations

import bisect
import math
import statistics
import time
from typing import Any, Callable, Sequence

import attrs

from kernelpro.records import TimingStats

#: side-stream work shorter than this (ms), or than ESCAPE_REL of the call's stream time,
#: is within the jitter of the synchronization's wake-up and is not charged
ESCAPE_ABS_MS = 0.015
ESCAPE_REL = 0.03


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


def charged(st: TimingStats, extra_ms: float, tag: str) -> TimingStats:
    """``st`` with ``extra_ms`` added to every call: a charge for work the judge saw outside them."""
    mean = st.mean_ms + extra_ms
    return attrs.evolve(st, median_ms=st.median_ms + extra_ms, mean_ms=mean, min_ms=st.min_ms + extra_ms,
                        max_ms=st.max_ms + extra_ms, cv=st.cv * st.mean_ms / mean if mean > 0 else 0.0,
                        method=f"{st.method}+{tag}")


def escaped_work(event_ms: Sequence[float], sync_ms: Sequence[float], gap0_ms: float,
                 min_ms: float = ESCAPE_ABS_MS) -> float:
    """Milliseconds the device kept working after the call's stream was done, beyond the
    synchronization latency ``gap0_ms``: the median gap's excess when it is above
    ``max(min_ms, ESCAPE_REL x the median stream time)``, else 0."""
    if not event_ms:
        return 0.0
    excess = statistics.median(s - e for e, s in zip(event_ms, sync_ms)) - gap0_ms
    if excess > max(min_ms, ESCAPE_REL * statistics.median(event_ms)):
        return excess
    return 0.0


# --- harness side: one call at a time --------------------------------------------------------


class EventTimer:
    """Times one call in the harness's process (see the module docstring)."""

    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        self.cuda = device.startswith("cuda")
        self._cycles_per_ms: float | None = None

    def once(self, fn: Callable[[], Any]) -> tuple[float, float, Any]:
        """(stream time, time up to device idle, what ``fn`` returned); on CPU both are the
        ``perf_counter`` time."""
        if self.cuda:
            ev = self.torch.cuda.Event
            start, end, after = ev(enable_timing=True), ev(enable_timing=True), ev(enable_timing=True)
            start.record()
            out = fn()
            end.record()
            self.torch.cuda.synchronize()
            after.record()
            after.synchronize()
            return float(start.elapsed_time(end)), float(start.elapsed_time(after)), out
        t0 = time.perf_counter()
        out = fn()
        ms = (time.perf_counter() - t0) * 1e3
        return ms, ms, out

    def gap_ms(self, fn: Callable[[], Any], reps: int) -> float:
        """Median gap (``after - end``) of ``reps`` timed calls of ``fn``."""
        return statistics.median(sy - ev for ev, sy, _ in (self.once(fn) for _ in range(reps)))

    def spin_gap_ms(self, stream_ms: float, reps: int = 15) -> float | None:
        """Median gap of a one-stream spin kernel lasting about ``stream_ms``; None without
        one in this torch."""
        spin = getattr(self.torch.cuda, "_sleep", None)
        if not self.cuda or spin is None:
            return None
        if self._cycles_per_ms is None:
            probe = 1 << 20
            ms = statistics.median(self.once(lambda: spin(probe))[0] for _ in range(5))
            self._cycles_per_ms = probe / max(ms, 1e-3)
        cycles = max(1, int(self._cycles_per_ms * stream_ms))
        return self.gap_ms(lambda: spin(cycles), reps)


# --- judge side: scheduling and judging the samples ---------------------------------------------


@attrs.frozen
class Sample:
    """One timed call: what its harness reported and what the judge measured around it."""

    event_ms: float  # the call's time on its stream (harness)
    sync_ms: float  # up to its device being idle (harness)
    envelope_ms: float  # the judge's wall clock from sending the call to its answer


def interleave(calls: dict[str, Callable[[int], Sample]], *, warmup_ms: float, rep_ms: float, min_reps: int,
               max_reps: int, rounds: int = 0) -> dict[str, list[Sample]]:
    """Warm each callable up, then time them. ``rounds`` 0: every callable's calls spread
    evenly over the whole timing, one call at a time (call ``k`` of ``n`` at the fraction
    ``(k + 1/2) / n`` of it); ``rounds`` > 0: that many rounds, a block of calls of each
    callable per round. ``calls[name](i)`` makes timed call ``i`` (``i < 0``: warm-up call
    ``-1 - i``) and returns its sample."""
    per_call: dict[str, float] = {}
    for name, call in calls.items():
        spent, times = 0.0, list[float]()
        while True:
            s = call(-1 - len(times))
            spent += s.event_ms
            times.append(s.event_ms)
            if (spent >= warmup_ms and len(times) >= 3) or len(times) >= 10_000:
                break
        # the median: a slow first call (lazy set-up, autotuning) does not shrink the repetitions
        per_call[name] = max(statistics.median(times), 1e-4)
    total = {name: max(1, min_reps, min(max_reps, int(rep_ms / per_call[name]))) for name in calls}
    samples: dict[str, list[Sample]] = {name: [] for name in calls}
    if rounds <= 0:
        names = list(calls)
        order = sorted(((k + 0.5) / total[n], names.index(n), n) for n in names for k in range(total[n]))
        for _due, _idx, name in order:
            samples[name].append(calls[name](len(samples[name])))
        return samples
    reps = {name: max(1, total[name] // rounds) for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            for _i in range(reps[name]):
                samples[name].append(call(len(samples[name])))
    return samples


@attrs.frozen
class Summary:
    stats: TimingStats
    escaped_ms: float = 0.0  # work left on other streams per call (0: none charged)
    gap_matched_ms: float | None = None  # the same-length control's gap, when one was measured


def summarize(samples: list[Sample], *, cuda: bool, gap0_ms: float,
              control: Callable[[float], float | None] | None = None,
              min_escape_ms: float = ESCAPE_ABS_MS) -> Summary:
    """The statistics of one callable's samples and the method they were taken with:
    ``cuda_event+l2_flush``, or ``cuda_event+device_sync+l2_flush`` when it left work on
    other streams (more than ``min_escape_ms`` per call, see :func:`escaped_work`).
    ``control(stream_ms)``: the gap of a one-stream spin of that length."""
    ev = [s.event_ms for s in samples]
    if not cuda:
        return Summary(stats(ev, "perf_counter"))
    sy = [s.sync_ms for s in samples]
    gap, matched = gap0_ms, None
    escaped = escaped_work(ev, sy, gap, min_escape_ms)
    if escaped > 0 and control is not None:
        matched = control(statistics.median(ev))
        if matched is not None:
            gap = max(gap0_ms, matched)
            escaped = escaped_work(ev, sy, gap, min_escape_ms)
    if escaped > 0:
        return Summary(stats([max(s - gap, e) for e, s in zip(ev, sy)], "cuda_event+device_sync+l2_flush"),
                       escaped, matched)
    return Summary(stats(ev, "cuda_event+l2_flush"), 0.0, matched)


def reported(samples: list[Sample], summary: Summary) -> list[float]:
    """Each sample's time as :func:`summarize` counted it."""
    if "device_sync" in summary.stats.method:
        gap = statistics.median(s.sync_ms - s.event_ms for s in samples) - summary.escaped_ms
        return [max(s.sync_ms - gap, s.event_ms) for s in samples]
    return [s.event_ms for s in samples]


def overheads(samples: list[Sample], summary: Summary) -> list[float]:
    """Each call's envelope minus its reported time: what the protocol added around it."""
    return [s.envelope_ms - r for s, r in zip(samples, reported(samples, summary))]


def overhead_ms(samples: list[Sample], summary: Summary) -> float:
    """Median protocol overhead per call."""
    return statistics.median(overheads(samples, summary))


def median_se(xs: Sequence[float]) -> float:
    """Standard error of the median of ``xs``, from a robust spread (IQR / 1.349)."""
    n = len(xs)
    if n < 4:
        return float("inf") if n < 2 else abs(max(xs) - min(xs))
    q = statistics.quantiles(xs, n=4)
    return 1.2533 * (q[2] - q[0]) / 1.349 / n ** 0.5


def envelope_excess(samples: list[Sample], summary: Summary, ref_samples: list[Sample],
                    ref_summary: Summary) -> tuple[float, float]:
    """How much longer per call the judge's clock says the candidate's calls took than its
    harness reported, beyond the protocol's overhead measured the same way on the
    reference; and the standard error of that difference (both in ms)."""
    cand, ref = overheads(samples, summary), overheads(ref_samples, ref_summary)
    return statistics.median(cand) - statistics.median(ref), (median_se(cand) ** 2 + median_se(ref) ** 2) ** 0.5


def exceeds_z(xs: Sequence[float], ys: Sequence[float], margin: float) -> tuple[float, float]:
    """How often an ``x`` exceeds a ``y`` by more than ``margin`` (over every pair, ties half),
    and the z-score of that share against 1/2 (a one-sided rank-sum test). When ``xs`` and
    ``ys`` come from one distribution the share is below 1/2 for any positive margin, however
    heavy the distribution's tail: a few calls slowed by the machine's load move it little."""
    n1, n2 = len(xs), len(ys)
    if not n1 or not n2:
        return 0.5, 0.0
    ordered = sorted(ys)
    wins = 0.0
    for x in xs:
        below = bisect.bisect_left(ordered, x - margin)
        wins += below + 0.5 * (bisect.bisect_right(ordered, x - margin) - below)
    share = wins / (n1 * n2)
    return share, (share - 0.5) / math.sqrt((n1 + n2 + 1) / (12.0 * n1 * n2))
