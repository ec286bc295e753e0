"""Shared machinery of the kernel-level micro-profilers.

A micro-profiler looks at each profiled kernel that takes a meaningful share of the
forward's time, decides whether its problem is present, and returns a
:class:`kernelpro.api.Finding` with the numbers, the action, an estimated gain (the
fraction of the *forward's* time it could save: kernel time share x fraction of that
kernel's time the problem costs) and the source lines the report attributes to it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

from kernelpro.api import Bottleneck, Finding, KernelProfile, MicroProfiler, ProfileContext, ProfileData

from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu.report import kernel_key

# severity from estimated gain (fraction of forward time): >=20% high, >=5% medium
HIGH_GAIN = 0.20
MEDIUM_GAIN = 0.05


def severity_for(gain: float) -> str:
    if gain >= HIGH_GAIN:
        return "high"
    if gain >= MEDIUM_GAIN:
        return "medium"
    return "low"


def short_name(kernel: str, width: int = 60) -> str:
    """Kernel name without return type and parameter list (template arguments kept), shortened."""
    name = kernel.strip()
    if name.endswith(")"):  # drop the trailing "(params)" group, whatever parentheses it holds
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i].strip()
                break
    if name.startswith("void "):
        name = name[5:]
    return name if len(name) <= width else name[: width - 3] + "..."


def clip(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return max(lo, min(hi, x))


#: the share of its roofline a well-written kernel reaches in practice: the rewrites of the
#: calibration pairs reached 72-86 % (docs/validation/ncu_corpus.md, "Calibrated gains")
REACHABLE_FRACTION = 0.8


def roofline_fraction(bottleneck: Bottleneck | None) -> float:
    """The classifier's fraction of the roofline, 0 when it gave none."""
    return (bottleneck.roofline_fraction or 0.0) if bottleneck is not None else 0.0


def headroom(bottleneck: Bottleneck | None, kept: float = 1.0, reach: float = REACHABLE_FRACTION) -> float:
    """The largest share of a kernel's time a rewrite can save when the rewritten kernel still
    moves ``kept`` of its bytes (or does ``kept`` of its work) and reaches ``reach`` of the
    roofline: ``1 - fraction * kept / reach``."""
    return clip(1 - roofline_fraction(bottleneck) * clip(kept) / reach)


#: the share of a mechanism's upper bound on the gain (all the idle issue back, every empty
#: warp slot filled) that a rewrite is expected to realize, for the estimators that have such a
#: bound (warp_stalls, issue_slots, issue_bound, pipe_bound, occupancy_gap; their setting
#: ``bound_share``). It was 0.5 until the rewrites of corpus kernels were measured (session 30,
#: docs/validation/ncu_corpus.md): where such a finding was the one acted on, the rewrite realized
#: 0.7-1.5 times the whole bound (Spearman with the realized gains 0.54 at 0.5, 0.74 at 1.0; the
#: calibration pairs 0.97 and 0.98); the gain stays capped by the headroom below the roofline
BOUND_SHARE = 1.0


def reachable(instance: Any, attribute: Any, value: float) -> None:
    """attrs validator of a ``reachable_fraction`` setting: a share of the roofline in (0, 1]."""
    if not 0 < value <= 1:
        raise ValueError(f"{attribute.name}: expected a fraction in (0, 1], got {value!r}")


class KernelMicroProfiler(MicroProfiler):
    """Per-kernel micro-profiler: subclasses implement :meth:`check`."""

    level = "kernel"
    title: ClassVar[str] = ""
    #: kernels below this share of the profiled time are not examined
    min_time_share: ClassVar[float] = 0.02
    #: instanced Source Counters metrics whose hot lines this profiler names
    source_metrics: ClassVar[tuple[str, ...]] = ()
    #: at most this many findings (the largest gains) per profile
    max_findings: ClassVar[int] = 3

    def reach(self) -> float:
        """The share of the roofline a rewrite is assumed to reach (the setting
        ``reachable_fraction`` where this micro-profiler has one)."""
        return float(getattr(self.settings, "reachable_fraction", REACHABLE_FRACTION))

    def headroom(self, bottleneck: Bottleneck | None, kept: float = 1.0) -> float:
        return headroom(bottleneck, kept, self.reach())

    def request_bound(self, bound: float, bottleneck: Bottleneck | None,
                      kernel: KernelProfile) -> tuple[float, str]:
        """A mechanism's ``bound`` on the gain of a rewrite that keeps the kernel's memory
        requests and issues them sooner or from more warps (latency hidden, slots filled,
        instructions cut), capped by the headroom below the roofline and by what the L2 has
        left; with a note for the message where the L2 is what caps it. The roofline counts
        DRAM bytes, but a kernel whose L2 already serves requests near its peak (gathers,
        L2-resident data) gains nothing from asking sooner: round 3 of the corpus rewrites
        (docs/validation/ncu_corpus.md, session 31), two gathers with the L2 at 91-98 % and DRAM
        at 5-16 %, ran slower with more loads in flight. The L2's whole peak is the bound (the
        rewrites of streaming kernels ran their L2 at 80-99 %)."""
        room = self.headroom(bottleneck)
        l2 = metric(kernel, M.L2_THROUGHPUT_PCT)
        l2_room = clip(1 - l2 / 100.0) if l2 is not None else 1.0
        if l2 is None or l2_room >= min(bound, room):
            return min(bound, room), ""
        return l2_room, (f" The L2 is already {l2:.0f}% busy, so issuing the same requests sooner saves at most "
                         f"{l2_room:.0%} (fewer or better-aligned requests can save more).")

    def analyze(self, profile: ProfileData, bottleneck: Bottleneck | None,
                context: ProfileContext) -> list[Finding]:
        if profile.level != "kernel" or not profile.kernels:
            return []
        kernels = list(profile.kernels)
        durations = [float(k.duration_ns or 0.0) for k in kernels]
        total = sum(durations)
        # repeated launches of one kernel with one launch shape (a profile of several
        # iterations) are one kernel here: their shares add up, and they give one finding
        launches: dict[tuple[Any, ...], list[int]] = {}
        for index, kernel in enumerate(kernels):
            launches.setdefault((kernel_key(kernel.name), kernel.grid, kernel.block), []).append(index)
        findings = []
        for same in launches.values():
            share = (sum(durations[i] for i in same) / total if total > 0 else len(same) / len(kernels))
            if share < self.min_time_share:
                continue
            index = max(same, key=lambda i: durations[i])  # the longest launch stands for the others
            finding = self.check(kernels[index], share, index, profile, bottleneck, context)
            if finding is not None:
                findings.append(finding)
        findings.sort(key=lambda f: -(f.estimated_gain or 0.0))
        return findings[: self.max_findings]

    def check(self, kernel: KernelProfile, share: float, index: int, profile: ProfileData,
              bottleneck: Bottleneck | None, context: ProfileContext) -> Finding | None:
        raise NotImplementedError

    # --- helpers -----------------------------------------------------------------------------

    def source_lines(self, profile: ProfileData, index: int, kernel: KernelProfile) -> tuple[str, ...]:
        """Hot source lines for this profiler's metrics (Source Counters), best effort."""
        for metric_name in self.source_metrics:
            lines = self.hot_lines(profile, index, metric_name)
            if lines:
                return lines
        return ()

    def hot_lines(self, profile: ProfileData, index: int, metric_name: str) -> tuple[str, ...]:
        """Hot source lines of one instanced Source Counters metric, best effort."""
        payload = profile.payload if isinstance(profile.payload, dict) else {}
        spots_all = payload.get("source_hotspots") or []
        spots = (spots_all[index] or {}) if index < len(spots_all) else {}
        return tuple(f"{loc} ({metric_name}: {value:.0f})" for loc, value in (spots.get(metric_name) or [])[:3])

    def finding(self, kernel: KernelProfile, share: float, index: int, profile: ProfileData,
                gain: float, message: str, action: str, evidence: Mapping[str, float],
                severity: str | None = None, title: str | None = None,
                source_lines: tuple[str, ...] | None = None) -> Finding:
        gain = round(clip(gain), 4)
        ev = {k: float(v) for k, v in evidence.items() if v is not None}
        ev["kernel_time_share"] = round(share, 4)
        who = short_name(kernel.name)
        launches = sum(1 for k in profile.kernels
                       if (kernel_key(k.name), k.grid, k.block) == (kernel_key(kernel.name), kernel.grid, kernel.block))
        launches_txt = f", {launches} launches" if launches > 1 else ""
        if not any(k.duration_ns for k in profile.kernels):  # analyze() shared by count: say so
            share_txt = f" ({share:.0%} of the kernels{launches_txt}; the report has no durations)"
        else:
            share_txt = f" ({share:.0%} of the profiled time{launches_txt})" if share < 0.995 else ""
        return Finding(
            tool=self.name, severity=severity or severity_for(gain), title=title or self.title,
            message=f"{who}{share_txt}: {message}", action=action, estimated_gain=gain,
            level="kernel", kernel=kernel.name, evidence=ev,
            source_lines=source_lines or self.source_lines(profile, index, kernel))


def io_bytes(profile: ProfileData) -> dict[str, float]:
    """The forward's input, parameter and output bytes recorded by the collector."""
    payload = profile.payload if isinstance(profile.payload, dict) else {}
    io = payload.get("io") or {}
    return {k: float(v) for k, v in io.items() if isinstance(v, (int, float))}


def metric(kernel: KernelProfile, name: str) -> float | None:
    value = kernel.metrics.get(name)
    return None if value is None else float(value)


def payload_of(profile: ProfileData) -> dict[str, Any]:
    return profile.payload if isinstance(profile.payload, dict) else {}


__all__ = ["KernelMicroProfiler", "severity_for", "short_name", "clip", "io_bytes", "metric", "M"]
