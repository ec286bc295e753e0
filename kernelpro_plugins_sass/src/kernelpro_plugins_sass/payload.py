"""The structured disassembly a SASS ProfileData carries (``ProfileData.payload``)."""

from __future__ import annotations

import attrs

from kernelpro.api import KernelProfile, ProfileData

from kernelpro_plugins_sass.binaries import DisassembledFile
from kernelpro_plugins_sass.disasm import SassKernel
from kernelpro_plugins_sass.features import KernelFeatures, kernel_features
from kernelpro_plugins_sass.resources import CompilerMessage

COLLECTOR_NAME = "sass"
LEVEL = "instruction"


@attrs.frozen
class KernelEntry:
    """One kernel: its listing, the counts computed from it, and where it came from."""

    kernel: SassKernel
    features: KernelFeatures
    origin: str  # torch_extension | triton | nvcc | source


@attrs.frozen
class SassPayload:
    entries: tuple[KernelEntry, ...]
    files: tuple[str, ...] = ()
    messages: tuple[CompilerMessage, ...] = ()  # every ptxas diagnostic seen

    def find(self, substring: str) -> list[KernelEntry]:
        s = substring.lower()
        return [e for e in self.entries
                if s in e.kernel.name.lower() or s in e.kernel.mangled.lower()]


def kernel_profile(entry: KernelEntry) -> KernelProfile:
    """A KernelProfile whose metrics are the static counts plus ptxas' resource usage."""
    metrics = entry.features.metrics()
    res = entry.kernel.resources
    if res is not None:
        for key in ("registers", "stack_bytes", "shared_bytes", "local_bytes",
                    "spill_store_bytes", "spill_load_bytes", "barriers"):
            value = getattr(res, key)
            if value is not None:
                metrics[f"sass.{key}"] = float(value)
    metrics["sass.ptxas_messages"] = float(len(entry.kernel.warnings))
    return KernelProfile(name=entry.kernel.name, metrics=metrics)


def build_profile(files: list[DisassembledFile], notes: list[str]) -> ProfileData:
    """ProfileData of level "instruction" for the kernels of ``files``, deduplicated by
    mangled name and architecture (the first file listing a kernel wins: a load_inline
    object and its shared object hold the same code). Triton compilations of one kernel
    with different configurations (autotuning) are all kept, their names suffixed with the
    configuration, since the cache does not say which one ran."""
    entries: list[KernelEntry] = []
    seen: set[tuple[str, str | None, str]] = set()
    messages: list[CompilerMessage] = []
    variants: dict[str, set[str]] = {}
    for f in files:
        for k in f.kernels:
            variants.setdefault(k.mangled, set()).add(f.variant)
    for f in files:
        messages += f.messages
        notes += f.notes
        for k in f.kernels:
            key = (k.mangled, k.arch, f.variant)
            if key in seen or (not f.variant and (k.mangled, k.arch, "") in seen):
                continue
            seen.add(key)
            if f.variant and len(variants[k.mangled]) > 1:
                k = attrs.evolve(k, name=f"{k.name} [{f.variant}]")
            entries.append(KernelEntry(k, kernel_features(k), f.origin))
    payload = SassPayload(tuple(entries), tuple(str(f.path) for f in files), tuple(messages))
    return ProfileData(level=LEVEL, collector=COLLECTOR_NAME,
                       kernels=tuple(kernel_profile(e) for e in entries), payload=payload,
                       notes=tuple(dict.fromkeys(notes)))


def sass_payload(profile: ProfileData) -> SassPayload | None:
    return profile.payload if isinstance(profile.payload, SassPayload) else None
