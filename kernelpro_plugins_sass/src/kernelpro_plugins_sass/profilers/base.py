"""Shared shape of the SASS micro-profilers: one check per kernel of the payload."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from kernelpro.api import Bottleneck, Finding, GpuSpec, MicroProfiler, ProfileContext, ProfileData

from kernelpro_plugins_sass.disasm import Instruction
from kernelpro_plugins_sass.payload import KernelEntry, sass_payload

#: bottleneck kinds where instruction issue matters (and "unknown": no classifier verdict)
COMPUTE_SIDE = frozenset({"compute", "latency", "unknown"})
MEMORY_SIDE = frozenset({"memory", "latency", "unknown"})
#: at most this many SASS lines quoted as evidence in a finding
MAX_SOURCE_LINES = 6


class SassMicroProfiler(MicroProfiler):
    level = "instruction"

    def analyze(self, profile: ProfileData, bottleneck: Bottleneck | None,
                context: ProfileContext) -> list[Finding]:
        payload = sass_payload(profile)
        if payload is None:
            return []
        findings: list[Finding] = []
        for entry in payload.entries:
            findings += self.check(entry, context.gpu)
        return findings

    @abc.abstractmethod
    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        """Findings for one kernel."""

    def finding(self, entry: KernelEntry, severity: str, title: str, message: str, action: str,
                gain: float | None, evidence: Mapping[str, float],
                lines: Sequence[Instruction | str] = ()) -> Finding:
        quoted = tuple(i if isinstance(i, str) else
                       f"/*{i.address:04x}*/ {i.text}" + (f"  // {i.source}" if i.source else "")
                       for i in list(lines)[:MAX_SOURCE_LINES])
        return Finding(tool=self.name, severity=severity, title=title, message=message,
                       action=action, estimated_gain=None if gain is None else round(max(0.0, min(gain, 0.9)), 3),
                       level="instruction", kernel=entry.kernel.name,
                       evidence={k: float(v) for k, v in evidence.items()}, source_lines=quoted)


def arch_number(arch: str | None) -> int:
    """sm_90a -> 90; unknown -> 0."""
    digits = "".join(ch for ch in (arch or "").removeprefix("sm_") if ch.isdigit())
    return int(digits) if digits else 0
