"""Example bottleneck classifier: the speed of light of the longest kernel.

Nsight Compute reports how busy the memory system and the SMs were as a percentage of
their peak (``gpu__compute_memory_throughput`` and ``sm__throughput``). The kernel that
took the most time decides: the busier unit names the bottleneck when it is above
``busy_pct``; neither busy means the kernel waits (latency).
"""

from __future__ import annotations

import attrs

from kernelpro.api import Bottleneck, BottleneckClassifier, hookimpl

KERNELPRO_API_VERSION = "1.0"

MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
COMPUTE = "sm__throughput.avg.pct_of_peak_sustained_elapsed"


@attrs.frozen
class SpeedOfLightSettings:
    busy_pct: float = 60.0  # a unit this busy (percent of its peak) is the bottleneck


class SpeedOfLight(BottleneckClassifier):
    name = "speed_of_light"
    description = "the busier of memory and SMs in the longest kernel"
    Settings = SpeedOfLightSettings

    def classify(self, profiles, context):
        profile = profiles.get("kernel")
        timed = [k for k in (profile.kernels if profile else ()) if k.duration_ns is not None
                 and MEMORY in k.metrics and COMPUTE in k.metrics]
        if not timed:
            return None
        top = max(timed, key=lambda k: k.duration_ns * k.invocations)
        mem, sm = top.metrics[MEMORY], top.metrics[COMPUTE]
        where = f" on {context.gpu.name}" if context.gpu is not None else ""
        if max(mem, sm) < self.settings.busy_pct:
            kind, why = "latency", f"neither memory ({mem:.0f}%) nor SMs ({sm:.0f}%) reach {self.settings.busy_pct:g}%"
        elif mem >= sm:
            kind, why = "memory", f"memory {mem:.0f}% of peak, SMs {sm:.0f}%"
        else:
            kind, why = "compute", f"SMs {sm:.0f}% of peak, memory {mem:.0f}%"
        return Bottleneck(kind=kind, summary=f"{top.name[:60]}{where}: {why}", classifier=self.name,
                          evidence={"memory_pct": mem, "sm_pct": sm, "duration_ns": float(top.duration_ns)})


@hookimpl
def kernelpro_register_classifiers(register):
    register(SpeedOfLight)
