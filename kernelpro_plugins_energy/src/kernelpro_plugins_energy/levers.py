"""Energy findings: which energy lever a profiled candidate leaves unused, with the numbers.

Four kernel-level micro-profilers read the kernel profile (Nsight Compute metrics, as the
``ncu`` collector records them) and name one lever each:

``energy_traffic``
    DRAM bytes moved over the forward's minimum (inputs, parameters and outputs once, from
    the collector's ``io`` record). Each DRAM byte costs energy whether or not its time is
    hidden behind other work, so traffic above the minimum is an energy lever even where
    it is not a time lever.
``energy_narrow_access``
    bytes per warp-level global load/store instruction on a memory-bound kernel
    (``l1tex`` sectors x 32 B over SASS global instructions): 128 B is 4-byte accesses by a
    whole warp, 512 B the 16-byte ones. The same bytes with fewer, wider instructions cost
    fewer instruction issues and register-file accesses; on the H200 two rowsum kernels at
    the same speed differed in energy by 5-8 % with 4-byte against 16-byte loads
    (docs/validation/energy.md).
``energy_idle_issue``
    a memory-bound kernel whose SMs are active but issue nothing most cycles
    (``smsp__issue_active`` low while DRAM throughput is high): warps resident and waiting
    keep the SMs powered; a shape with fewer warps or a persistent grid may reach the same
    bandwidth with fewer active warp-cycles.
``energy_precision``
    a compute-bound kernel on the fp32 FMA pipe with the tensor pipe idle: products in
    tf32 parts on tensor cores (tf32x3) cost less energy per FLOP; the evaluator's
    tolerance decides whether the precision is acceptable.

They only report when the candidate's evaluation measured energy (``energy`` in its
``measurements``): a run that does not measure energy is not steered by them. ``estimated_gain``
ranks findings against each other (the kernel's share of the profiled time x the share of
its traffic, instructions or cycles the lever addresses); it is not a measured saving.
Idle spinning (busy-wait loops) is not detected: the kernel metrics do not separate it from
useful issue.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from kernelpro.api import ANY, Bottleneck, Finding, KernelProfile, MicroProfiler, ProfileContext, ProfileData

DURATION_NS = "gpu__time_duration.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
ISSUE_ACTIVE_PCT = "smsp__issue_active.avg.pct_of_peak_sustained_active"
GLD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
GST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
GLD_INST = "smsp__sass_inst_executed_op_global_ld.sum"
GST_INST = "smsp__sass_inst_executed_op_global_st.sum"
INST_EXECUTED = "smsp__inst_executed.sum"
PIPE_FMA_PCT = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
PIPE_TENSOR_PCT = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
PIPE_TENSOR_HMMA_PCT = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
SECTOR_BYTES = 32.0


def _m(kernel: KernelProfile, name: str) -> float | None:
    value = kernel.metrics.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _io_minimum(profile: ProfileData) -> float:
    payload = profile.payload if isinstance(profile.payload, dict) else {}
    io = payload.get("io") or {}
    return sum(float(io.get(k) or 0.0) for k in ("input_bytes", "param_bytes", "output_bytes"))


def _short(name: str, width: int = 60) -> str:
    name = name.split("(")[0].strip()
    return name if len(name) <= width else name[: width - 3] + "..."


def energy_measured(context: ProfileContext) -> bool:
    result = getattr(context, "result", None)
    return bool(result is not None and (result.measurements or {}).get("energy"))


def _severity(gain: float) -> str:
    return "high" if gain >= 0.2 else "medium" if gain >= 0.05 else "low"


class _EnergyLever(MicroProfiler):
    level = "kernel"
    applies_to = frozenset({ANY})
    title: ClassVar[str] = ""
    lever: ClassVar[str] = ""  # the lever's name in the message
    min_time_share: ClassVar[float] = 0.05

    def analyze(self, profile: ProfileData, bottleneck: Bottleneck | None,
                context: ProfileContext) -> list[Finding]:
        if profile.level != "kernel" or not profile.kernels or not energy_measured(context):
            return []
        return self.check_all(profile)

    def check_all(self, profile: ProfileData) -> list[Finding]:
        kernels = list(profile.kernels)
        durations = [float(k.duration_ns or _m(k, DURATION_NS) or 0.0) for k in kernels]
        total = sum(durations)
        out = []
        for kernel, duration in zip(kernels, durations):
            share = duration / total if total > 0 else 1.0 / len(kernels)
            if share < self.min_time_share:
                continue
            finding = self.check(kernel, share)
            if finding is not None:
                out.append(finding)
        return sorted(out, key=lambda f: -(f.estimated_gain or 0.0))[:3]

    def check(self, kernel: KernelProfile, share: float) -> Finding | None:
        return None

    def make(self, kernel: KernelProfile | None, share: float, gain: float, message: str, action: str,
             evidence: dict[str, float]) -> Finding:
        gain = round(max(0.0, min(1.0, gain)), 4)
        who = f"{_short(kernel.name)}: " if kernel is not None else ""
        return Finding(tool=self.name, severity=_severity(gain), title=self.title,
                       message=f"{who}{self.lever}: {message}", action=action, estimated_gain=gain,
                       level="kernel", kernel=kernel.name if kernel is not None else None,
                       evidence={**{k: float(v) for k, v in evidence.items()}, "kernel_time_share": round(share, 4)})


@attrs.frozen
class TrafficSettings:
    #: DRAM bytes above this multiple of the forward's minimum are reported
    min_excess_factor: float = 1.25
    #: forwards moving less than this are left alone (launch costs dominate their energy)
    min_dram_bytes: float = 1e6


class EnergyTraffic(_EnergyLever):
    name = "energy_traffic"
    title = "Energy: DRAM traffic above the minimum"
    lever = "redundant global traffic"
    description = "DRAM bytes moved over inputs, parameters and outputs moved once (energy per byte)"
    Settings = TrafficSettings
    metrics = (DRAM_READ, DRAM_WRITE)

    def check_all(self, profile: ProfileData) -> list[Finding]:
        minimum = _io_minimum(profile)
        per_kernel = [((_m(k, DRAM_READ) or 0.0) + (_m(k, DRAM_WRITE) or 0.0), k) for k in profile.kernels]
        dram = sum(b for b, _ in per_kernel)
        if minimum <= 0 or dram < self.settings.min_dram_bytes:
            return []
        factor = dram / minimum
        if factor < self.settings.min_excess_factor:
            return []
        top_bytes, top = max(per_kernel, key=lambda bk: bk[0])
        return [self.make(
            top, top_bytes / dram, 1.0 - 1.0 / factor,
            message=(f"the forward moves {dram / 1e6:.1f} MB through DRAM, {factor:.2f}x the {minimum / 1e6:.1f} MB "
                     f"of inputs, parameters and outputs moved once; this kernel moves {top_bytes / 1e6:.1f} MB."),
            action=("Read each input once: fuse the passes that re-read it (keep the row or tile in registers or "
                    "shared memory between them), give each program a larger tile so neighbouring outputs share "
                    "their loads, and do not write intermediates that the next kernel reads back."),
            evidence={"dram_bytes": dram, "minimum_bytes": minimum, "excess_factor": factor,
                      "kernel_dram_bytes": top_bytes})]


@attrs.frozen
class NarrowSettings:
    #: fewer bytes than this per warp-level global instruction: narrower than 8-byte accesses
    max_bytes_per_instruction: float = 256.0
    #: only memory-bound kernels (DRAM throughput at least this percent of peak)
    min_dram_pct: float = 40.0


class EnergyNarrowAccess(_EnergyLever):
    name = "energy_narrow_access"
    title = "Energy: many narrow memory instructions per byte"
    lever = "instruction count per byte on a memory-bound kernel"
    description = "bytes per warp-level global load/store instruction below 8-byte accesses"
    Settings = NarrowSettings
    metrics = (GLD_SECTORS, GST_SECTORS, GLD_INST, GST_INST, INST_EXECUTED, DRAM_PCT, DRAM_READ, DRAM_WRITE)

    def check(self, kernel: KernelProfile, share: float) -> Finding | None:
        dram_pct = _m(kernel, DRAM_PCT)
        sectors = (_m(kernel, GLD_SECTORS) or 0.0) + (_m(kernel, GST_SECTORS) or 0.0)
        inst = (_m(kernel, GLD_INST) or 0.0) + (_m(kernel, GST_INST) or 0.0)
        if dram_pct is None or dram_pct < self.settings.min_dram_pct or sectors <= 0 or inst <= 0:
            return None
        per_inst = sectors * SECTOR_BYTES / inst
        if per_inst >= self.settings.max_bytes_per_instruction:
            return None
        ev = {"bytes_per_global_instruction": per_inst, "global_instructions": inst, "dram_pct": dram_pct}
        dram = (_m(kernel, DRAM_READ) or 0.0) + (_m(kernel, DRAM_WRITE) or 0.0)
        total_inst = _m(kernel, INST_EXECUTED)
        extra = ""
        if total_inst and dram > 0:
            ev["instructions_per_kib_dram"] = total_inst / dram * 1024
            extra = f"; {total_inst / dram * 1024:.1f} warp instructions per KiB of DRAM traffic in all"
        return self.make(
            kernel, share, share * (1.0 - per_inst / 512.0),
            message=(f"{per_inst:.0f} bytes per warp-level global load/store instruction "
                     f"({per_inst / 32:.1f} B per thread; 16-byte accesses move 512) at {dram_pct:.0f} % of DRAM "
                     f"bandwidth{extra}."),
            action=("Move the same bytes with fewer instructions: 16-byte vector loads and stores (float4, "
                    "or more contiguous elements per thread), fewer index and mask instructions per element."),
            evidence=ev)


@attrs.frozen
class IdleIssueSettings:
    #: issue slots busy below this percent of active cycles
    max_issue_pct: float = 20.0
    #: while DRAM throughput is at least this percent of peak (memory bound)
    min_dram_pct: float = 60.0


class EnergyIdleIssue(_EnergyLever):
    name = "energy_idle_issue"
    title = "Energy: SMs active but idle most cycles"
    lever = "block and grid shape (active SM-cycles)"
    description = "a memory-bound kernel whose SMs issue nothing most of their active cycles"
    Settings = IdleIssueSettings
    metrics = (ISSUE_ACTIVE_PCT, DRAM_PCT)

    def check(self, kernel: KernelProfile, share: float) -> Finding | None:
        issue = _m(kernel, ISSUE_ACTIVE_PCT)
        dram_pct = _m(kernel, DRAM_PCT)
        if issue is None or dram_pct is None:
            return None
        if issue >= self.settings.max_issue_pct or dram_pct < self.settings.min_dram_pct:
            return None
        return self.make(
            kernel, share, share * (1.0 - issue / 100.0) * 0.25,
            message=(f"the SMs issue an instruction in {issue:.0f} % of their active cycles while DRAM runs at "
                     f"{dram_pct:.0f} % of its bandwidth: most active warp-cycles wait on memory."),
            action=("Reach the same bandwidth with fewer resident warps: fewer warps per block, or a persistent "
                    "grid of a few programs per SM walking the blocks, keeping enough loads in flight (wider "
                    "loads per thread) so the time does not grow."),
            evidence={"issue_active_pct": issue, "dram_pct": dram_pct})


@attrs.frozen
class PrecisionSettings:
    #: the fp32 FMA pipe busier than this percent ...
    min_fma_pct: float = 50.0
    #: ... with the tensor pipe below this percent
    max_tensor_pct: float = 5.0


class EnergyPrecision(_EnergyLever):
    name = "energy_precision"
    title = "Energy: fp32 FMAs where tensor cores could do the products"
    lever = "wider-than-needed precision"
    description = "a kernel busy on the fp32 FMA pipe with the tensor pipe idle"
    Settings = PrecisionSettings
    metrics = (PIPE_FMA_PCT, PIPE_TENSOR_PCT, PIPE_TENSOR_HMMA_PCT)

    def check(self, kernel: KernelProfile, share: float) -> Finding | None:
        fma = _m(kernel, PIPE_FMA_PCT)
        tensor = max(_m(kernel, PIPE_TENSOR_PCT) or 0.0, _m(kernel, PIPE_TENSOR_HMMA_PCT) or 0.0)
        if fma is None or fma < self.settings.min_fma_pct or tensor >= self.settings.max_tensor_pct:
            return None
        return self.make(
            kernel, share, share * fma / 100.0 * 0.5,
            message=(f"the fp32 FMA pipe is busy {fma:.0f} % of active cycles and the tensor pipe {tensor:.1f} %."),
            action=("Where the evaluator's tolerance allows, compute the products on tensor cores: tf32x3 (three "
                    "tf32 parts, close to fp32 accuracy) or tf32 for matrix products, fast special-function "
                    "forms (log2/exp2) for transcendentals."),
            evidence={"fma_pipe_pct": fma, "tensor_pipe_pct": tensor})


LEVERS: tuple[type[_EnergyLever], ...] = (EnergyTraffic, EnergyNarrowAccess, EnergyIdleIssue, EnergyPrecision)


def lever_names() -> tuple[str, ...]:
    return tuple(cls.name for cls in LEVERS)


