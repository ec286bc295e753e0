"""Example vendor package: a GPU spec and an architecture heuristic for Hopper.

The spec describes a made-up device, "KernelPro Example Hopper" (claimed by that exact name,
at priority 1 over any table entry that would also match it); its figures are the built-in
H200's, copied, so that the example runs on real profiles. A vendor package puts its own
datasheet or measured ceilings there, and its devices' driver names in ``match``. Select it
with ``--gpu "Example Hopper"`` (or ``gpu:`` in the config).

The heuristic speaks only for this package's own device (``applies``), an sm_90 part:
memory-bound kernels there can stage tiles with the Tensor Memory Accelerator, and
generators are told so before they write code. A heuristic for every Hopper GPU would
rely on ``archs`` alone.
"""

from __future__ import annotations

import attrs

from kernelpro.api import BUILTIN_GPU_SPECS, ArchHeuristic, Finding, gpu_spec_matches, hookimpl

KERNELPRO_API_VERSION = "1.0"

_H200 = next(s for s in BUILTIN_GPU_SPECS if gpu_spec_matches(s, "NVIDIA H200", "sm_90"))
EXAMPLE_HOPPER = attrs.evolve(_H200, name="Example Hopper", match=("KernelPro Example Hopper",), exact=True,
                               priority=1)


@attrs.frozen
class HopperTmaSettings:
    min_memory_pct: float = 50.0  # advise when the memory system is at least this busy


class HopperTma(ArchHeuristic):
    name = "example_hopper_tma"
    description = "Hopper: stage memory-bound tiles with TMA"
    archs = ("sm_90", "sm_90a")
    Settings = HopperTmaSettings

    def applies(self, gpu):
        return super().applies(gpu) and gpu is not None and gpu.name == EXAMPLE_HOPPER.name

    def advise(self, bottleneck, profiles, context):
        if bottleneck is None or bottleneck.kind != "memory":
            return []
        pct = bottleneck.evidence.get("memory_pct")
        if pct is not None and pct < self.settings.min_memory_pct:
            return []
        gpu = context.gpu.name if context.gpu is not None else "this GPU"
        return [Finding(
            tool=self.name, severity="info", title="Hopper: bulk tile copies with TMA",
            message=f"The kernel is memory-bound on {gpu} ({bottleneck.summary}).",
            action=("Load tiles with the Tensor Memory Accelerator (cp.async.bulk.tensor, or CuTe's "
                    "SM90_TMA_LOAD) into shared memory, double-buffered, so the SMs issue no per-element loads."),
            evidence={"memory_pct": pct} if pct is not None else {},
        )]

    def prompt_notes(self, gpu):
        return [f"{gpu.name} is a Hopper GPU ({gpu.arch}): for memory-bound tiles prefer TMA bulk copies "
                "into shared memory over per-thread loads."]


@hookimpl
def kernelpro_register_gpu_specs(register):
    register(EXAMPLE_HOPPER)


@hookimpl
def kernelpro_register_heuristics(register):
    register(HopperTma)
