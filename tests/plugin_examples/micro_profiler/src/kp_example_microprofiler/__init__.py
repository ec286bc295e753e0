"""Example micro-profiler: a forward that launches many short kernels.

Each launch costs a few microseconds of host and GPU time whatever the kernel does, so a
forward made of many small kernels is bound by launches; the remedy is fusion. Runs on the
kernel-level profile (Nsight Compute) for every bottleneck kind.
"""

from __future__ import annotations

import attrs

from kernelpro.api import ANY, Finding, MicroProfiler, hookimpl

KERNELPRO_API_VERSION = "1.0"


@attrs.frozen
class LaunchCountSettings:
    max_kernels: int = 4  # more launches than this per forward is a finding
    short_us: float = 10.0  # kernels shorter than this count as "short"


class LaunchCount(MicroProfiler):
    name = "launch_count"
    description = "many kernel launches per forward: fuse them"
    level = "kernel"
    applies_to = frozenset({ANY})
    Settings = LaunchCountSettings

    def analyze(self, profile, bottleneck, context):
        launches = sum(k.invocations for k in profile.kernels)
        if launches <= self.settings.max_kernels:
            return []
        durations = [k.duration_ns / 1e3 for k in profile.kernels if k.duration_ns is not None]
        short = sum(1 for d in durations if d < self.settings.short_us)
        total_us = sum(durations)
        return [Finding(
            tool=self.name, severity="medium", title="Many kernel launches per forward",
            message=(f"{launches} kernel launches in one forward ({len(profile.kernels)} distinct kernels, "
                     f"{short} of them under {self.settings.short_us:g} us; {total_us:.1f} us of kernel time "
                     f"in all), more than the {self.settings.max_kernels} allowed."),
            action=("Fuse consecutive elementwise and reduction steps into one kernel (one Triton or CUDA "
                    "kernel that reads the inputs once), or capture the forward in a CUDA graph."),
            evidence={"launches": float(launches), "short_kernels": float(short), "kernel_time_us": total_us},
        )]


@hookimpl
def kernelpro_register_micro_profilers(register):
    register(LaunchCount)
