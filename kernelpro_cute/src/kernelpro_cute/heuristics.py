"""Hopper heuristic that hands CuTe reading pointers to generators.

Off by default: it speaks only when the run asks for CuTe output: the ``cute_output``
setting (``heuristic_params.<name>.cute_output`` in the config), which defaults to the
environment variable ``KERNELPRO_CUTE_OUTPUT`` (1/true/yes).
``prompt_notes`` (no bottleneck known yet) names the WGMMA+TMA material for
compute-bound matrix work and the tiled-copy material for memory-bound tiles, the build
flags, and the corpus tools; ``advise`` (after profiling) gives the presets of the
classified bottleneck as an info finding.
"""

from __future__ import annotations

import os
from typing import Mapping

import attrs
from kernelpro.api import ArchHeuristic, Bottleneck, Finding, GpuSpec, ProfileContext, ProfileData

from kernelpro_cute.corpus import CorpusError, locate
from kernelpro_cute.presets import presets_for


def _env_flag() -> bool:
    return os.environ.get("KERNELPRO_CUTE_OUTPUT", "").strip().lower() in ("1", "true", "yes")


@attrs.frozen
class CutePresetSettings:
    cute_output: bool = attrs.field(factory=_env_flag)  # the run generates CuTe candidates
    cutlass_path: str | None = None


def _corpus(path: str | None):
    try:
        return locate(path)
    except CorpusError:
        return None


class CutePresetHeuristic(ArchHeuristic):
    name = "cute_presets"
    Settings = CutePresetSettings
    description = "CUTLASS/CuTe files to read first on Hopper, by bottleneck (when CuTe output is on)"
    archs = ("sm_90",)

    def prompt_notes(self, gpu: GpuSpec) -> list[str]:
        if not self.settings.cute_output:
            return []
        corpus = _corpus(self.settings.cutlass_path)
        notes = [
            "CuTe kernels: compile with torch.utils.cpp_extension.load_inline(..., "
            "**kernelpro_cute.build_flags()) (sm_90a, C++17, CUTLASS include paths); "
            "search and read the CUTLASS sources with the cute_search, cute_read and cute_list tools."
        ]
        for kind, label in (("compute", "compute-bound matrix work"), ("memory", "memory-bound tiles")):
            refs = presets_for(kind, gpu.arch, corpus)
            if refs:
                notes.append(
                    f"For {label} on {gpu.arch} read first: "
                    + "; ".join(f"{path} ({why})" for path, why in refs)
                )
        if corpus is None:
            notes.append("The CUTLASS sources are not installed here (pip install nvidia-cutlass or set CUTLASS_PATH).")
        return notes

    def advise(
        self,
        bottleneck: Bottleneck | None,
        profiles: Mapping[str, ProfileData],
        context: ProfileContext,
    ) -> list[Finding]:
        if not self.settings.cute_output or bottleneck is None or context.gpu is None:
            return []
        refs = presets_for(bottleneck.kind, context.gpu.arch, _corpus(self.settings.cutlass_path))
        if not refs:
            return []
        return [
            Finding(
                tool=self.name,
                severity="info",
                title=f"CuTe references for a {bottleneck.kind}-bound kernel on {context.gpu.arch}",
                message="Relevant CUTLASS/CuTe sources: "
                + "; ".join(f"{p} ({why})" for p, why in refs),
                action=f"read {refs[0][0]} with cute_read before writing the CuTe kernel",
                level="kernel",
            )
        ]
