"""System-level micro-profilers: findings about what happens between and around kernels.

Each reads the :class:`~kernelpro_plugins_nsys.analysis.SystemTimeline` payload of a
``ProfileData(level="system")`` (from the timeline collector or the trace analyzer) and
returns findings with the numbers that justify them. None needs stage-2 metrics
(``metrics = ()``): the timeline is collected once.

Gate. ``applies_to`` names the bottleneck kinds where a finding matters. With no
classified bottleneck at all (a trace analysed on its own with ``kernelpro analyze``, where
no kernel-level counters exist to classify from) there is nothing to gate on, so these
run: see :meth:`SystemMicroProfiler.applies`.
"""

from __future__ import annotations

from typing import ClassVar

from kernelpro.api import ANY, Finding, MicroProfiler, ProfileContext, ProfileData

from kernelpro_plugins_nsys.analysis import HOST_RANGE_OVER, SystemTimeline

LEVEL = "system"
HOST_BOUND_KINDS = frozenset({"too_little_work", "latency", "unknown"})

# --- thresholds (where each comes from) -------------------------------------------------
# A PyTorch eager operator costs roughly 5-20 us of host time to dispatch and launch
# (CUDA launch latency is ~2-5 us; PyTorch dispatch adds the rest; 15.8 us per launch in
# the H200 launch_bound fixture, under the profiler). Kernels shorter than that cannot hide
# the launch cost of the next one.
SHORT_KERNEL_US = 20.0
# Below this many launches per call, launch overhead is a few tens of microseconds at most.
MANY_LAUNCHES = 20
# The GPU idle for 30% of a call is a third of the time recoverable; below it the kernels
# themselves dominate and kernel-level work pays more.
LAUNCH_IDLE_SHARE = 0.30
# Idle-gap finding: 20% idle, with at least one gap longer than a kernel launch (~10 us).
GAP_IDLE_SHARE = 0.20
GAP_MIN_US = 10.0
# CPU overhead: the GPU busy under half of the call while at least half of the host range
# is Python between operators or host-only operators (work that issues no CUDA call).
CPU_BUSY_SHARE = 0.50
CPU_OVERHEAD_SHARE = 0.50
# Allocator: a caching-allocator workload in steady state makes no cudaMalloc; "many"
# allocations means twice as many as kernels (each kernel writing one fresh output is the
# eager norm) and at least 32 per call.
CHURN_EVENTS_MIN = 32
CHURN_EVENTS_PER_KERNEL = 2.0
MAX_GAIN = 0.95  # no estimate claims the whole call


def _payload(profile: ProfileData) -> SystemTimeline | None:
    payload = profile.payload
    if profile.level != LEVEL or not isinstance(payload, SystemTimeline) or not payload.forwards:
        return None
    return payload


def _gain(saved_us: float, span_us: float) -> float:
    if span_us <= 0:
        return 0.0
    return round(min(MAX_GAIN, max(0.0, saved_us / span_us)), 4)


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def _short(name: str, limit: int = 90) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."


def _where(host_context: str) -> str:
    if host_context == HOST_RANGE_OVER:
        return "after the call's host range ended"
    return f"while the host was in {_short(host_context, 50)}"


class SystemMicroProfiler(MicroProfiler):
    """Common base: level "system", no stage-2 metrics."""

    level: ClassVar[str] = LEVEL
    metrics: ClassVar[tuple[str, ...]] = ()

    def finding(self, **kwargs) -> Finding:
        return Finding(tool=self.name, level=LEVEL, **kwargs)


class LaunchBound(SystemMicroProfiler):
    """Many short kernels with the GPU idle between them: launch overhead bounds the call."""

    name = "launch_bound"
    description = "many short kernels, GPU idle between launches (CUDA graphs or fusion)"
    applies_to = HOST_BOUND_KINDS

    def analyze(self, profile, bottleneck, context: ProfileContext) -> list[Finding]:
        tl = _payload(profile)
        if tl is None or tl.device != "cuda":
            return []
        launches = tl.per_call("launches")
        kernels = tl.per_call("kernels")
        median_us = tl.per_call("median_kernel_us")
        idle = tl.gpu_idle_share
        if launches < MANY_LAUNCHES or median_us > SHORT_KERNEL_US or idle < LAUNCH_IDLE_SHARE:
            return []
        span = tl.per_call("span_us")
        busy = tl.per_call("gpu_busy_us")
        host_per_launch = tl.per_call("host_us") / launches
        return [self.finding(
            severity="high" if idle >= 0.6 else "medium",
            title="Launch-bound forward: many short kernels, GPU idle between them",
            message=(
                f"Each forward launches {launches:.0f} kernels ({kernels:.0f} ran) with a median "
                f"duration of {median_us:.1f} us; the GPU is busy {busy:.1f} us of a {span:.1f} us "
                f"call and idle {100 * idle:.1f}% of it. The host spends {host_per_launch:.1f} us "
                f"per launch, longer than the kernels it launches, so the GPU waits on launches."
            ),
            action=(
                "Remove the per-kernel launch cost: capture the forward in a CUDA graph "
                "(torch.cuda.CUDAGraph with static input/output buffers, or "
                "torch.compile(mode='reduce-overhead')), or fuse the chain of small "
                "elementwise operators into one kernel (torch.compile, or a Triton/CUDA kernel "
                "that does all steps per element)."
            ),
            estimated_gain=_gain(span - busy, span),
            evidence={
                "launches_per_forward": launches,
                "kernels_per_forward": kernels,
                "median_kernel_us": median_us,
                "gpu_busy_us": busy,
                "span_us": span,
                "gpu_idle_share": idle,
                "host_us_per_launch": host_per_launch,
            },
        )]


class HostSync(SystemMicroProfiler):
    """Host-device synchronisations inside the forward (``.item()``, ``.cpu()``, sync calls)."""

    name = "host_sync"
    description = "host-device synchronisations inside forward (.item(), .cpu(), synchronize)"
    applies_to = frozenset({ANY})

    def analyze(self, profile, bottleneck, context: ProfileContext) -> list[Finding]:
        tl = _payload(profile)
        if tl is None or tl.device != "cuda":
            return []
        syncs = tl.per_call("syncs")
        if syncs < 1:  # at least one per call on average
            return []
        sites: dict[str, int] = {}
        for f in tl.forwards:
            for site, n in f.sync_sites:
                sites[site] = sites.get(site, 0) + n
        n_fw = len(tl.forwards)
        where = ", ".join(f"{s} x{n / n_fw:g}" for s, n in sorted(sites.items(), key=lambda x: -x[1]))
        span = tl.per_call("span_us")
        blocked = tl.per_call("sync_us")
        bubble = tl.per_call("sync_bubble_us")
        return [self.finding(
            severity="high" if (bubble + blocked) / span >= 0.2 or syncs >= 3 else "medium",
            title="Host-device synchronisation inside forward",
            message=(
                f"Each forward synchronises the host with the GPU {syncs:g} times ({where}). "
                f"The host is blocked {blocked:.1f} us ({100 * blocked / span:.1f}% of the "
                f"{span:.1f} us call), and after each sync the GPU sits idle until the host "
                f"launches again: {bubble:.1f} us per call ({100 * bubble / span:.1f}%)."
            ),
            action=(
                "Keep values on the device: replace .item()/.tolist()/.cpu() and Python "
                "branches on tensor values with tensor ops (torch.where, clamp, masks); compute "
                "host-side constants once in __init__; never call torch.cuda.synchronize() in "
                "forward."
            ),
            estimated_gain=_gain(bubble, span),
            evidence={
                "syncs_per_forward": syncs,
                "sync_blocked_us": blocked,
                "sync_bubble_us": bubble,
                "span_us": span,
                "sync_sites": float(len(sites)),
            },
        )]


class HostDeviceCopies(SystemMicroProfiler):
    """Host-to-device and device-to-host copies inside the forward."""

    name = "host_device_copies"
    description = "host-device memcpy inside forward (bytes, time)"
    applies_to = frozenset({ANY})

    def analyze(self, profile, bottleneck, context: ProfileContext) -> list[Finding]:
        tl = _payload(profile)
        if tl is None or tl.device != "cuda":
            return []
        htod, dtoh = tl.per_call("htod_copies"), tl.per_call("dtoh_copies")
        if htod + dtoh < 1:
            return []
        htod_b, dtoh_b = tl.per_call("htod_bytes"), tl.per_call("dtoh_bytes")
        copy_us = tl.per_call("htod_us") + tl.per_call("dtoh_us")
        span = tl.per_call("span_us")
        share = copy_us / span if span > 0 else 0.0
        return [self.finding(
            severity="medium" if share >= 0.05 or htod + dtoh >= 2 else "low",
            title="Host-device copies inside forward",
            message=(
                f"Each forward copies {htod:g}x host->device ({_fmt_bytes(htod_b)}) and "
                f"{dtoh:g}x device->host ({_fmt_bytes(dtoh_b)}) over PCIe/C2C, {copy_us:.1f} us "
                f"of copy time ({100 * share:.1f}% of the {span:.1f} us call); a copy to "
                f"pageable host memory also blocks the host."
            ),
            action=(
                "Keep tensors on the GPU for the whole forward: drop .cpu()/.numpy()/.tolist() "
                "round trips, create constants directly on the device (torch.tensor(..., "
                "device=x.device)) or once in __init__ as buffers."
            ),
            estimated_gain=_gain(copy_us, span),
            evidence={
                "htod_copies_per_forward": htod,
                "htod_bytes_per_forward": htod_b,
                "dtoh_copies_per_forward": dtoh,
                "dtoh_bytes_per_forward": dtoh_b,
                "copy_us": copy_us,
                "copy_share": share,
            },
        )]


class AllocatorChurn(SystemMicroProfiler):
    """cudaMalloc/cudaFree inside the forward, or far more allocations than kernels."""

    name = "allocator_churn"
    description = "device memory allocation churn inside forward (cudaMalloc/cudaFree, allocator events)"
    applies_to = frozenset({ANY})

    def analyze(self, profile, bottleneck, context: ProfileContext) -> list[Finding]:
        tl = _payload(profile)
        if tl is None or tl.device != "cuda":
            return []
        mallocs, frees = tl.per_call("malloc_calls"), tl.per_call("free_calls")
        reserved = tl.per_call("reserved_changes")
        events = tl.per_call("alloc_events")
        kernels = max(1.0, tl.per_call("kernels"))
        api_us = tl.per_call("alloc_api_us")
        span = tl.per_call("span_us")
        alloc_bytes = tl.per_call("alloc_bytes")
        driver_churn = mallocs + frees >= 1 or reserved >= 1
        event_churn = events >= CHURN_EVENTS_MIN and events >= CHURN_EVENTS_PER_KERNEL * kernels
        if not (driver_churn or event_churn):
            return []
        share = api_us / span if span > 0 else 0.0
        if driver_churn:
            severity = "high" if share >= 0.10 else "medium"
            detail = (
                f"{mallocs:g} cudaMalloc and {frees:g} cudaFree calls per forward "
                f"({api_us:.1f} us, {100 * share:.1f}% of the {span:.1f} us call; cudaFree "
                f"also synchronises the device), and the allocator's reserved memory changed "
                f"{reserved:g} times: the caching allocator is not reusing its blocks"
            )
        else:
            severity = "low"
            detail = (
                f"{events:g} allocations per forward for {kernels:g} kernels: temporaries "
                f"beyond the kernels' outputs"
            )
        return [self.finding(
            severity=severity,
            title="Allocator churn inside forward",
            message=f"{detail}; {_fmt_bytes(alloc_bytes)} allocated per call in {events:g} allocations.",
            action=(
                "Allocate working buffers once (in __init__ or lazily, keyed by shape) and "
                "reuse them (out= variants, in-place ops); keep temporary sizes stable across "
                "calls; never call torch.cuda.empty_cache() inside forward."
            ),
            estimated_gain=_gain(api_us, span),
            evidence={
                "malloc_calls_per_forward": mallocs,
                "free_calls_per_forward": frees,
                "alloc_api_us": api_us,
                "reserved_changes_per_forward": reserved,
                "alloc_events_per_forward": events,
                "alloc_bytes_per_forward": alloc_bytes,
                "kernels_per_forward": tl.per_call("kernels"),
            },
        )]


class CpuOverhead(SystemMicroProfiler):
    """Host-side work (Python, host-only operators) on the critical path of the call."""

    name = "cpu_overhead"
    description = "CPU-side overhead dominating the forward (Python, host-only operators)"
    applies_to = HOST_BOUND_KINDS

    def analyze(self, profile, bottleneck, context: ProfileContext) -> list[Finding]:
        tl = _payload(profile)
        if tl is None:
            return []
        host = tl.per_call("host_us")
        span = tl.per_call("span_us")
        python = tl.per_call("python_us")
        host_only = tl.per_call("host_only_op_us") if tl.device == "cuda" else 0.0
        overhead = python + host_only
        if host <= 0 or span <= 0:
            return []
        overhead_share = overhead / host
        busy_share = tl.gpu_busy_share
        if tl.device == "cuda" and busy_share >= CPU_BUSY_SHARE:
            return []
        if overhead_share < CPU_OVERHEAD_SHARE:
            return []
        typical = tl.typical_forward()
        assert typical is not None  # _payload passes only timelines with forwards
        top = ", ".join(f"{n} {us:.0f} us" for n, us, _ in typical.top_host_ops[:3])
        if tl.device == "cuda":
            gpu_part = (
                f"the GPU is busy {tl.per_call('gpu_busy_us'):.1f} us ({100 * busy_share:.1f}%) of "
                f"the {span:.1f} us call"
            )
        else:
            gpu_part = f"a {span:.1f} us call (CPU trace: no device activity)"
        return [self.finding(
            severity="high" if overhead_share >= 0.8 else "medium",
            title="CPU-side overhead dominates the forward",
            message=(
                f"The host spends {overhead:.1f} us of its {host:.1f} us range "
                f"({100 * overhead_share:.1f}%) outside device work: {python:.1f} us in Python "
                f"between operators and {host_only:.1f} us in host-only operators; {gpu_part}. "
                f"Largest top-level operators in a typical call: {top or 'none'}."
            ),
            action=(
                "Take host work off the call's critical path: precompute constants and tables "
                "in __init__ (or cache them), replace Python loops with tensor operations on "
                "the device, and keep the forward a straight sequence of device operators "
                "(then CUDA graphs or torch.compile can remove what is left)."
            ),
            estimated_gain=_gain(overhead, span),
            evidence={
                "host_us": host,
                "span_us": span,
                "python_us": python,
                "host_only_op_us": host_only,
                "overhead_share": overhead_share,
                "gpu_busy_share": busy_share if tl.device == "cuda" else 0.0,
            },
        )]


class IdleGaps(SystemMicroProfiler):
    """The largest intervals inside the call with no device activity, and what caused them."""

    name = "idle_gaps"
    description = "largest GPU idle gaps inside forward and the total idle share"
    applies_to = HOST_BOUND_KINDS

    def analyze(self, profile, bottleneck, context: ProfileContext) -> list[Finding]:
        tl = _payload(profile)
        if tl is None or tl.device != "cuda":
            return []
        idle = tl.gpu_idle_share
        typical = tl.typical_forward()
        assert typical is not None  # _payload passes only timelines with forwards
        gaps = list(typical.gaps)  # largest first
        if idle < GAP_IDLE_SHARE or not gaps or gaps[0].dur_us < GAP_MIN_US:
            return []
        span = tl.per_call("span_us")
        idle_us = tl.per_call("idle_us")
        listed = "; ".join(
            f"{g.dur_us:.1f} us at +{g.offset_us:.1f} us {_where(g.host_context)}"
            + (f", ended by {_short(g.next_activity, 60)}" if g.next_activity else "")
            for g in gaps[:3]
        )
        return [self.finding(
            severity="medium" if idle >= 0.5 else "low",
            title="GPU idle gaps inside forward",
            message=(
                f"The GPU is idle {idle_us:.1f} us of each {span:.1f} us call "
                f"({100 * idle:.1f}%). Largest gaps in a typical call (#{typical.index}, "
                f"{typical.span_us:.1f} us): {listed}."
            ),
            action=(
                "Close the largest gaps first: move the host work named in each gap out of "
                "forward or overlap it with device work; remove synchronisations before them; "
                "capture the call in a CUDA graph when the gaps are launch latency."
            ),
            estimated_gain=_gain(idle_us, span),
            evidence={
                "gpu_idle_share": idle,
                "idle_us": idle_us,
                "span_us": span,
                "largest_gap_us": gaps[0].dur_us,
                "largest_gap_share": gaps[0].dur_us / typical.span_us if typical.span_us > 0 else 0.0,
            },
        )]


class KernelTimeShare(SystemMicroProfiler):
    """Which kernel to attack first: the distribution of kernel time by kernel."""

    name = "kernel_time_share"
    description = "kernel time share by kernel name (which kernel to attack first)"
    applies_to = frozenset({ANY})

    def analyze(self, profile, bottleneck, context: ProfileContext) -> list[Finding]:
        tl = _payload(profile)
        if tl is None or not tl.kernels:
            return []
        n_fw = len(tl.forwards)
        top = tl.kernels[:5]
        first = top[0]
        listed = "; ".join(
            f"{100 * k.share:.1f}% {_short(k.name, 70)} ({k.invocations / n_fw:g} calls, "
            f"{k.mean_us:.1f} us each)"
            for k in top
        )
        evidence = {"distinct_kernels": float(len(tl.kernels)), "kernel_us_per_forward": tl.per_call("kernel_us")}
        for i, k in enumerate(top[:3], 1):
            evidence[f"top{i}_share"] = k.share
            evidence[f"top{i}_us_per_forward"] = k.total_us / n_fw
        return [self.finding(
            severity="info",
            title="Kernel time share",
            message=(
                f"{len(tl.kernels)} distinct kernels take {tl.per_call('kernel_us'):.1f} us per "
                f"forward. By share: {listed}."
            ),
            action=(
                f"Attack {_short(first.name, 90)} first: it holds {100 * first.share:.1f}% of "
                f"kernel time; profile it at kernel level (ncu) before rewriting the others."
            ),
            # upper bound: the call time saved if this kernel took no time at all
            estimated_gain=_gain(first.total_us / n_fw, tl.per_call("span_us")),
            kernel=first.name,
            evidence=evidence,
        )]


MICRO_PROFILERS = (
    LaunchBound,
    HostSync,
    HostDeviceCopies,
    AllocatorChurn,
    CpuOverhead,
    IdleGaps,
    KernelTimeShare,
)
