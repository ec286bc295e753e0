"""Turn a timeline into the ``ProfileData`` record the core passes to micro-profilers."""

from __future__ import annotations

from kernelpro.api import KernelProfile, ProfileData

from kernelpro_plugins_nsys.analysis import SystemTimeline, analyze
from kernelpro_plugins_nsys.timeline import Timeline

LEVEL = "system"
RANGES = {"annotation": "kernelpro:forward", "profiler_step": "ProfilerStep"}


def to_profile_data(timeline: Timeline, collector: str, notes: tuple[str, ...] = ()) -> ProfileData:
    """ProfileData(level="system"): one KernelProfile per distinct kernel name, with its
    total duration over the recorded forwards (``duration_ns``), its invocation count over
    them, and ``metrics`` ``time_share`` (0..1 of kernel time), ``mean_duration_ns`` and
    ``forwards`` (how many calls the totals cover); the payload is a SystemTimeline."""
    system: SystemTimeline = analyze(timeline)
    n = len(system.forwards)
    kernels = tuple(
        KernelProfile(
            name=k.name,
            duration_ns=k.total_us * 1e3,
            invocations=k.invocations,
            metrics={
                "time_share": k.share,
                "mean_duration_ns": k.mean_us * 1e3,
                "forwards": float(n),
            },
        )
        for k in system.kernels
    )
    extra = []
    if not system.forwards:  # one note saying why, not "analysed as one call" beside it
        extra.append("timeline: no call to analyse: no kernelpro:forward or ProfilerStep range, and no CPU "
                     "operator or CUDA launch to attribute the GPU work to" if system.window_kind == "whole_trace"
                     else f"timeline: every {RANGES.get(system.window_kind, system.window_kind)} range of the trace is "
                     "empty: no call to analyse")
    elif system.window_kind == "whole_trace":
        extra.append("timeline: no kernelpro:forward or ProfilerStep ranges; the whole trace is analysed as one call")
    return ProfileData(level=LEVEL, collector=collector, kernels=kernels, payload=system,
                       notes=tuple(notes) + tuple(extra), device_name=system.meta.get("gpu_name"))
