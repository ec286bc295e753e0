"""Per-forward statistics of a :class:`Timeline`, the payload the micro-profilers read.

Method, for each forward window (the host-side range of one recorded call):

- *its GPU work* is every kernel/memcpy/memset whose correlation id matches a CUDA API call
  made on the window's thread inside the window (a CUDA-graph replay's kernels carry the
  replay's id); device activity without a correlation id is assigned by start time;
- *span* runs from the window's start to whichever ends last, the host range or its GPU
  work: the time one forward call costs end to end;
- *GPU busy* is the union of its device intervals over all streams; *idle* is span minus
  busy, and *gaps* are the idle intervals inside the span (the first one is the launch
  latency from the start of the call to its first device activity);
- *host* numbers come from the window's thread: top-level operators (not nested in another
  operator), *Python time* = window minus the union of top-level operators and CUDA API
  calls, *host-only operator time* = top-level operators that issued no CUDA call;
- synchronisations, copies and allocator calls are counted from the CUDA API calls and the
  device copies, allocator events from Kineto's ``[memory]`` events in the window.

Per-call values are medians over the recorded forwards (the driver records 3 after 3
warm-up calls), see :meth:`SystemTimeline.per_call`. All times in microseconds, sizes in bytes.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter, defaultdict
from typing import Any, Iterable

import attrs

from kernelpro_plugins_nsys.timeline import (
    ALLOC_APIS,
    GRAPH_LAUNCH_APIS,
    LAUNCH_APIS,
    SYNC_APIS,
    ForwardWindow,
    GpuActivity,
    HostOp,
    Timeline,
)

TOP_GAPS = 5  # gaps kept per forward, largest first
TOP_HOST_OPS = 5
HOST_RANGE_OVER = "host range over"  # Gap.host_context of a gap after the host range ended
EPS_US = 0.5  # tolerance when testing containment: Kineto rounds timestamps to ns


@attrs.frozen
class Gap:
    """An interval inside a forward's span with no device activity."""

    offset_us: float  # from the start of the forward call
    dur_us: float
    host_context: str  # what the host thread was doing at the middle of the gap
    next_activity: str  # the device activity that ended the gap ("" at the end of the span)


@attrs.frozen
class ForwardStats:
    """One recorded forward call. Times in microseconds, sizes in bytes."""

    index: int
    host_us: float  # the host range of the call
    span_us: float  # start of the call to the end of its last device activity (or host range)
    gpu_busy_us: float  # union of device activity intervals
    kernel_us: float  # sum of kernel durations
    kernels: int
    median_kernel_us: float
    launches: int  # kernel launch and graph launch API calls
    graph_launches: int
    idle_us: float  # span - busy
    gaps: tuple[Gap, ...]  # largest first, at most TOP_GAPS
    syncs: int  # host-blocking synchronisations (stream/device/event sync, synchronous copies)
    sync_us: float  # host time blocked in them
    sync_bubble_us: float  # device idle time from each sync's return to the next device activity
    sync_sites: tuple[tuple[str, int], ...]  # (top-level operator, count)
    htod_copies: int
    htod_bytes: int
    htod_us: float
    dtoh_copies: int
    dtoh_bytes: int
    dtoh_us: float
    dtod_copies: int
    memsets: int
    malloc_calls: int  # cudaMalloc-family API calls
    free_calls: int  # cudaFree-family API calls
    alloc_api_us: float
    alloc_events: int  # caching-allocator allocations ([memory], bytes > 0) on the device
    free_events: int
    alloc_bytes: int
    reserved_changes: int  # allocator events where reserved memory changed: segments mapped/unmapped
    ops_union_us: float  # union of top-level host operators
    python_us: float  # host range minus the union of top-level operators and CUDA calls
    host_only_op_us: float  # top-level operators that issued no CUDA call
    runtime_us: float  # CUDA API calls, summed
    top_host_ops: tuple[tuple[str, float, int], ...]  # (name, total us, count), top-level ops


@attrs.frozen
class KernelShare:
    """A distinct kernel name over all recorded forwards."""

    name: str
    total_us: float
    invocations: int
    share: float  # of total kernel time
    mean_us: float


@attrs.frozen
class SystemTimeline:
    """What the timeline collector and trace analyzer hand the micro-profilers
    (``ProfileData.payload``). Compact on purpose: the raw events stay in the trace file."""

    source: str  # "kineto" | "nsys-sqlite"
    device: str  # "cuda" when the trace holds device activity, else "cpu"
    window_kind: str  # "annotation" | "profiler_step" | "whole_trace"
    forwards: tuple[ForwardStats, ...]
    kernels: tuple[KernelShare, ...]  # largest share first
    trace_path: str | None = None
    meta: dict[str, Any] = attrs.field(factory=dict)

    def per_call(self, field: str) -> float:
        """A ForwardStats field for a typical call: the median over the recorded forwards
        (robust to one call disturbed by the profiler starting); 0.0 with none."""
        if not self.forwards:
            return 0.0
        return float(statistics.median(float(getattr(f, field)) for f in self.forwards))

    def typical_forward(self) -> ForwardStats | None:
        """The recorded forward with the median span (the lower middle for an even count):
        the call whose gaps and details a finding quotes."""
        if not self.forwards:
            return None
        ordered = sorted(self.forwards, key=lambda f: f.span_us)
        return ordered[(len(ordered) - 1) // 2]

    @property
    def gpu_busy_share(self) -> float:
        span = self.per_call("span_us")
        return self.per_call("gpu_busy_us") / span if span > 0 else 0.0

    @property
    def gpu_idle_share(self) -> float:
        return 1.0 - self.gpu_busy_share if self.device == "cuda" else 0.0

    def summary_line(self) -> str:
        if not self.forwards:
            return f"{self.source}: no forward calls found"
        return (
            f"{self.source} {self.device}: {len(self.forwards)} forwards ({self.window_kind}), "
            f"span {self.per_call('span_us'):.1f} us, host {self.per_call('host_us'):.1f} us, "
            f"GPU busy {self.per_call('gpu_busy_us'):.1f} us ({100 * self.gpu_busy_share:.1f}%), "
            f"{self.per_call('kernels'):.0f} kernels / {self.per_call('launches'):.0f} launches, "
            f"{self.per_call('syncs'):.1f} syncs, {self.per_call('htod_copies') + self.per_call('dtoh_copies'):.1f} "
            f"host-device copies, {self.per_call('malloc_calls') + self.per_call('free_calls'):.1f} malloc/free calls"
        )


def merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Union of intervals, sorted and non-overlapping."""
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in intervals)


def top_level(ops: list[HostOp]) -> list[HostOp]:
    """Operators not contained in another one (``ops`` sorted by start, longest first)."""
    result: list[HostOp] = []
    end = float("-inf")
    for op in ops:
        if op.start_us >= end - EPS_US:
            result.append(op)
            end = op.end_us
        elif op.end_us > end + EPS_US:  # partial overlap: treat as its own top-level range
            result.append(op)
            end = op.end_us
    return result


def _main_tid(timeline: Timeline) -> Any:
    """The thread with the most operator time: the forward's thread when windows carry none."""
    per_tid: dict[Any, float] = defaultdict(float)
    for op in timeline.host_ops:
        if op.kind == "op":
            per_tid[op.tid] += op.dur_us
    if not per_tid:
        for call in timeline.runtime:
            per_tid[call.tid] += call.dur_us
    return max(per_tid, key=lambda tid: per_tid[tid]) if per_tid else None


class _Locator:
    """Finds the top-level operator covering a time (bisect over sorted, disjoint ops)."""

    def __init__(self, ops: list[HostOp]):
        self.ops = ops
        self.starts = [op.start_us for op in ops]

    def at(self, t: float) -> HostOp | None:
        i = bisect.bisect_right(self.starts, t + EPS_US) - 1
        if i >= 0 and self.ops[i].end_us + EPS_US >= t:
            return self.ops[i]
        return None


class _Index:
    """Sorted views of a timeline so that each window is a slice, not a full scan."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.ops = [o for o in timeline.host_ops if o.kind == "op"]  # sorted by start
        self.op_starts = [o.start_us for o in self.ops]
        self.calls = list(timeline.runtime)
        self.call_starts = [c.start_us for c in self.calls]
        self.by_corr: dict[int, list[GpuActivity]] = defaultdict(list)
        self.uncorrelated: list[GpuActivity] = []
        for a in timeline.gpu:
            if a.correlation is None:
                self.uncorrelated.append(a)
            else:
                self.by_corr[a.correlation].append(a)
        self.uncorrelated_starts = [a.start_us for a in self.uncorrelated]
        dev = "cuda" if timeline.has_gpu else "cpu"
        self.allocs = [a for a in timeline.allocs if a.device == dev]
        self.alloc_ts = [a.ts_us for a in self.allocs]

    @staticmethod
    def between(items: list, starts: list[float], lo: float, hi: float) -> list:
        return items[bisect.bisect_left(starts, lo):bisect.bisect_right(starts, hi)]


def forward_stats(
    index: _Index, window: ForwardWindow, next_start: float | None, tid: Any
) -> tuple[ForwardStats, list[GpuActivity]]:
    """Statistics of one forward window; also returns its device activities."""
    w0, w1 = window.start_us, window.end_us
    lo, hi = w0 - EPS_US, w1 + EPS_US

    ops = [o for o in index.between(index.ops, index.op_starts, lo, hi) if o.tid == tid and o.end_us <= hi]
    tops = top_level(ops)
    locator = _Locator(tops)
    calls = [c for c in index.between(index.calls, index.call_starts, lo, hi) if c.tid == tid and c.end_us <= hi]
    acts = [a for c in calls if c.correlation is not None for a in index.by_corr.get(c.correlation, ())]
    limit = next_start if next_start is not None else float("inf")
    acts += [a for a in index.between(index.uncorrelated, index.uncorrelated_starts, lo, limit) if a.start_us < limit]
    acts.sort(key=lambda a: a.start_us)

    span_end = max([w1] + [a.end_us for a in acts])
    busy = merge((a.start_us, a.end_us) for a in acts)
    busy_us = _length(busy)

    # idle gaps inside [w0, span_end]
    gaps_raw: list[tuple[float, float]] = []
    cursor = w0
    for s, e in busy:
        if s > cursor:
            gaps_raw.append((cursor, s))
        cursor = max(cursor, e)
    if span_end > cursor:
        gaps_raw.append((cursor, span_end))
    idle_us = (span_end - w0) - busy_us
    starts_sorted = sorted(acts, key=lambda a: a.start_us)
    act_starts = [a.start_us for a in starts_sorted]

    def describe(s: float, e: float) -> Gap:
        mid = (s + e) / 2
        op = locator.at(mid)
        call = next((c for c in calls if c.start_us - EPS_US <= mid <= c.end_us + EPS_US), None)
        if op is not None and call is not None:
            context = f"{op.name} > {call.name}"
        elif op is not None:
            context = op.name
        elif call is not None:
            context = call.name
        elif mid <= w1:
            context = "python (no operator running)"
        else:
            context = HOST_RANGE_OVER
        j = bisect.bisect_left(act_starts, e - EPS_US)
        nxt = starts_sorted[j].name if j < len(starts_sorted) else ""
        return Gap(round(s - w0, 3), round(e - s, 3), context, nxt)

    gaps = tuple(describe(s, e) for s, e in sorted(gaps_raw, key=lambda g: g[0] - g[1])[:TOP_GAPS])

    kernels = [a for a in acts if a.kind == "kernel"]
    kernel_durs = [a.dur_us for a in kernels]
    launches = [c for c in calls if c.name in LAUNCH_APIS]

    # synchronisations and the device bubble after each
    syncs = [c for c in calls if c.name in SYNC_APIS]
    sites: Counter[str] = Counter()
    bubble = 0.0
    for c in syncs:
        op = locator.at(c.start_us)
        sites[op.name if op else c.name] += 1
        for s, e in gaps_raw:
            if s - EPS_US <= c.end_us < e:
                bubble += e - c.end_us
                break

    def copies(kind: str) -> list[GpuActivity]:
        return [a for a in acts if a.kind == "memcpy" and a.copy_kind == kind]

    htod, dtoh, dtod = copies("HtoD"), copies("DtoH"), copies("DtoD")

    alloc_calls = [c for c in calls if c.name in ALLOC_APIS]
    malloc_calls = [c for c in alloc_calls if "Free" not in c.name and "Release" not in c.name
                    and "Unmap" not in c.name]
    reserved_changes = alloc_n = free_n = alloc_bytes = 0
    first = bisect.bisect_left(index.alloc_ts, lo)
    # reserved memory before the window: the last event before it that reports it
    prev_reserved = next((a.total_reserved for a in reversed(index.allocs[max(0, first - 64):first])
                          if a.total_reserved is not None), None)
    for a in index.between(index.allocs, index.alloc_ts, lo, hi):
        if a.bytes > 0:
            alloc_n += 1
            alloc_bytes += a.bytes
        elif a.bytes < 0:
            free_n += 1
        if a.total_reserved is not None:
            if prev_reserved is not None and a.total_reserved != prev_reserved:
                reserved_changes += 1
            prev_reserved = a.total_reserved

    ops_union = _length(merge((o.start_us, o.end_us) for o in tops))
    # host time in neither an operator nor a CUDA call (a graph replay, torch.cuda.* helpers
    # call CUDA outside any operator): the interpreter's own time
    host_busy = _length(merge([(o.start_us, o.end_us) for o in tops] + [(c.start_us, c.end_us) for c in calls]))
    call_starts = sorted(c.start_us for c in calls)
    host_only = 0.0
    for o in tops:
        i = bisect.bisect_left(call_starts, o.start_us - EPS_US)
        if not (i < len(call_starts) and call_starts[i] <= o.end_us + EPS_US):
            host_only += o.dur_us
    per_name: dict[str, list[float]] = defaultdict(list)
    for o in tops:
        per_name[o.name].append(o.dur_us)
    top_ops = sorted(((n, sum(d), len(d)) for n, d in per_name.items()), key=lambda x: -x[1])

    stats = ForwardStats(
        index=window.index,
        host_us=w1 - w0,
        span_us=span_end - w0,
        gpu_busy_us=busy_us,
        kernel_us=sum(kernel_durs),
        kernels=len(kernels),
        median_kernel_us=statistics.median(kernel_durs) if kernel_durs else 0.0,
        launches=len(launches),
        graph_launches=sum(1 for c in launches if c.name in GRAPH_LAUNCH_APIS),
        idle_us=idle_us,
        gaps=gaps,
        syncs=len(syncs),
        sync_us=sum(c.dur_us for c in syncs),
        sync_bubble_us=bubble,
        sync_sites=tuple(sites.most_common()),
        htod_copies=len(htod),
        htod_bytes=sum(a.bytes or 0 for a in htod),
        htod_us=sum(a.dur_us for a in htod),
        dtoh_copies=len(dtoh),
        dtoh_bytes=sum(a.bytes or 0 for a in dtoh),
        dtoh_us=sum(a.dur_us for a in dtoh),
        dtod_copies=len(dtod),
        memsets=sum(1 for a in acts if a.kind == "memset"),
        malloc_calls=len(malloc_calls),
        free_calls=len(alloc_calls) - len(malloc_calls),
        alloc_api_us=sum(c.dur_us for c in alloc_calls),
        alloc_events=alloc_n,
        free_events=free_n,
        alloc_bytes=alloc_bytes,
        reserved_changes=reserved_changes,
        ops_union_us=ops_union,
        python_us=max(0.0, (w1 - w0) - host_busy),
        host_only_op_us=host_only,
        runtime_us=sum(c.dur_us for c in calls),
        top_host_ops=tuple((n, round(t, 3), c) for n, t, c in top_ops[:TOP_HOST_OPS]),
    )
    return stats, acts


def kernel_shares(acts: list[GpuActivity]) -> tuple[KernelShare, ...]:
    totals: dict[str, list[float]] = defaultdict(list)
    for a in acts:
        if a.kind == "kernel":
            totals[a.name].append(a.dur_us)
    grand = sum(sum(v) for v in totals.values())
    shares = [
        KernelShare(name, sum(d), len(d), (sum(d) / grand) if grand > 0 else 0.0, statistics.fmean(d))
        for name, d in totals.items()
    ]
    return tuple(sorted(shares, key=lambda k: -k.total_us))


def analyze(timeline: Timeline) -> SystemTimeline:
    """Per-forward statistics and kernel shares of a timeline."""
    main_tid = _main_tid(timeline)
    index = _Index(timeline)
    forwards: list[ForwardStats] = []
    all_acts: list[GpuActivity] = []
    windows = list(timeline.windows)
    for i, window in enumerate(windows):
        next_start = windows[i + 1].start_us if i + 1 < len(windows) else None
        tid = window.tid if window.tid is not None else main_tid
        stats, acts = forward_stats(index, window, next_start, tid)
        if not acts and stats.ops_union_us == 0 and stats.runtime_us == 0 and stats.launches == 0:
            continue  # an empty range (the step torch.profiler opens after the last step())
        forwards.append(stats)
        all_acts += acts
    meta_keys = ("gpu_name", "arch", "torch", "device", "iters", "warmup", "problem", "candidate", "mode")
    return SystemTimeline(
        source=timeline.source,
        device="cuda" if timeline.has_gpu or str(timeline.meta.get("device", "")).startswith("cuda") else "cpu",
        window_kind=timeline.window_kind,
        forwards=tuple(forwards),
        kernels=kernel_shares(all_acts),
        trace_path=timeline.meta.get("trace_path"),
        meta={k: timeline.meta[k] for k in meta_keys if k in timeline.meta},
    )
