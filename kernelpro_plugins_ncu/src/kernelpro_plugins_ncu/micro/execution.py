"""Execution-side micro-profilers: warp stalls, issue slots, divergence, tensor cores, FMA
fusion, and the at-the-roofline verdict."""

from __future__ import annotations

import attrs

from kernelpro.api import Bottleneck, Finding, ProfileContext, ProfileData

from kernelpro_plugins_ncu.classifier import WRONG_CEILINGS_FRACTION
from kernelpro_plugins_ncu.micro.base import (BOUND_SHARE, REACHABLE_FRACTION, M, KernelMicroProfiler, clip, io_bytes,
                                              metric, reachable, roofline_fraction)

STALL_ADVICE = {
    "long_scoreboard": ("waiting for global/local memory (L1TEX) results",
                        "put more independent loads in flight per thread (unroll, load several elements "
                        "before using them, prefetch the next tile with cp.async/TMA), and keep more warps resident"),
    "barrier": ("waiting at __syncthreads",
                "balance the work done between barriers, use fewer block-wide barriers (warp-level "
                "primitives, double buffering)"),
    "mio_throttle": ("the memory-input/output queue (shared memory, special functions) is full",
                     "issue fewer, wider shared-memory accesses, remove bank conflicts"),
    "short_scoreboard": ("waiting for shared memory or special-function results",
                         "remove bank conflicts, reuse values from registers instead of re-reading shared memory"),
    "math_pipe_throttle": ("a math pipe is saturated",
                           "move work to an idle pipe (tensor cores for matrix work, FMA instead of separate mul/add)"),
    "lg_throttle": ("the local/global memory queue is full",
                    "use wider (16-byte) accesses and fewer of them; remove local-memory spills"),
    "wait": ("fixed-latency dependencies between consecutive instructions",
             "add instruction-level parallelism: several independent accumulators, unrolled loops"),
    "tex_throttle": ("the texture/L1 unit is saturated", "use fewer, wider memory instructions"),
    "gmma": ("waiting for warpgroup MMA (wgmma) results",
             "deepen the pipeline so loads of the next tiles overlap the MMAs, or give the MMAs larger tiles"),
    "branch_resolving": ("waiting for branch targets", "reduce data-dependent branching in hot loops"),
    "no_instruction": ("instruction fetch misses", "shrink the hot loop's code (less unrolling/inlining)"),
    "dispatch_stall": ("the dispatcher could not issue", "usually transient; check the pipe mix"),
    "drain": ("memory stores draining at exit", "usually minor; fewer scattered stores at the end"),
    "imc_miss": ("constant-cache misses", "use fewer distinct constants per warp, uniform indices"),
    "membar": ("memory fences", "use fewer or narrower fences (__threadfence_block instead of __threadfence)"),
    "sleeping": ("warps sleeping (nanosleep/yield)", "remove back-off loops from the hot path"),
    "misc": ("miscellaneous", "no specific action"),
    "not_selected": ("eligible but another warp was chosen", "nothing to do: the scheduler has enough warps"),
}


@attrs.frozen
class WarpStallSettings:
    # a stall reason worth naming covers at least this share of all stall cycles
    min_reason_share: float = 0.25
    # kernels already at this fraction of the roofline are left alone
    max_roofline_fraction: float = 0.8
    # schedulers issuing this often hide their stalls; a compute pipe this busy is the limit
    max_issue_pct: float = 80.0
    max_pipe_pct: float = 80.0
    # a memory-bound kernel at this fraction of its roofline or more waits on DRAM by design
    # (at_roofline's own threshold); below it, waiting for memory means too few bytes in
    # flight (the calibration pairs: a scalar-load stream at 55 % of its roofline ran 34 %
    # faster with float4 loads)
    memory_bound_fraction: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)
    # the share of the estimator's upper bound a rewrite is expected to realize (base.BOUND_SHARE)
    bound_share: float = attrs.field(default=BOUND_SHARE, validator=reachable)


class WarpStallReasons(KernelMicroProfiler):
    name = "warp_stalls"
    title = "Dominant warp-stall reasons"
    description = "what warps wait for between issued instructions, by reason"
    Settings = WarpStallSettings
    # a launch-bound kernel has too few warps to hide any stall: which one dominates says
    # what each of them waits on once there are more
    applies_to = frozenset({"latency", "memory", "compute", "too_little_work"})
    metrics = (*M.STALL_METRICS, M.ISSUE_ACTIVE_PCT, M.PIPE_FMA_PCT, M.PIPE_FP64_PCT, M.PIPE_ALU_PCT,
               M.PIPE_TENSOR_HMMA_PCT, M.PIPE_TENSOR_PCT, M.L2_THROUGHPUT_PCT)
    source_metrics = ("smsp__pcsamp_sample_count",)

    def check(self, kernel, share, index, profile, bottleneck, context):
        s = self.settings
        fraction = roofline_fraction(bottleneck)
        if fraction >= s.max_roofline_fraction:
            return None
        issue = metric(kernel, M.ISSUE_ACTIVE_PCT)
        if issue is not None and issue >= s.max_issue_pct:
            return None
        pipes = [M.tensor_pipe_pct(kernel.metrics), M.get(kernel.metrics, M.PIPE_FMA_PCT),
                 M.get(kernel.metrics, M.PIPE_FP64_PCT), M.get(kernel.metrics, M.PIPE_ALU_PCT)]
        if max(pipes) >= s.max_pipe_pct:
            return None
        stalls = {r: metric(kernel, M.stall_metric(r)) for r in M.STALL_REASONS}
        stalls = {r: v for r, v in stalls.items() if v is not None and r not in ("selected", "not_selected")}
        total = sum(stalls.values())
        if total <= 0:
            return None
        ranked = sorted(stalls.items(), key=lambda kv: -kv[1])
        top = [(r, v) for r, v in ranked if v / total >= self.settings.min_reason_share][:2]
        if not top or top[0][0] == "misc":
            return None
        if bottleneck is not None and bottleneck.kind == "memory" and fraction >= s.memory_bound_fraction \
                and top[0][0] in ("long_scoreboard", "lg_throttle", "drain"):
            return None
        parts = [f"{r.replace('_', ' ')} {v:.1f} cycles per issued instruction ({v / total:.0%}; "
                 f"{STALL_ADVICE.get(r, ('', ''))[0]})" for r, v in top]
        issue_txt = f" Issue slots are busy {issue:.0f}% of cycles." if issue is not None else ""
        stall_share = top[0][1] / total
        # the dominant stall's share of the idle issue comes back (bound_share of it), never
        # more than what reaching the practical share of the roofline would save
        capped, l2_note = self.request_bound(s.bound_share * stall_share * clip(1 - (issue or 0.0) / 100),
                                             bottleneck, kernel)
        gain = share * capped
        lines = self.hot_lines(profile, index, M.pcsamp_metric(top[0][0]))
        return self.finding(
            kernel, share, index, profile, gain, source_lines=lines,
            message=(f"warps spend {total:.1f} cycles stalled between issued instructions; dominant: "
                     + "; ".join(parts) + "." + issue_txt + l2_note),
            action="; ".join(f"{r.replace('_', ' ')}: {STALL_ADVICE.get(r, ('', 'no specific action'))[1]}"
                             for r, _ in top) + ".",
            evidence={"stall_cycles_per_issue": total, **{f"stall_{r}": v for r, v in ranked[:6]},
                      "issue_active_pct": issue, "l2_throughput_pct": metric(kernel, M.L2_THROUGHPUT_PCT)})


@attrs.frozen
class IssueSlotSettings:
    # schedulers idle in more than half of the cycles, with fewer than one eligible warp per
    # cycle on average (Nsight Compute's scheduler rule warns at one eligible warp), are starved
    max_issue_pct: float = 50.0
    max_eligible_warps: float = 1.0
    # few, wide instructions keep a busy pipe fed (a warpgroup GEMM issues rarely): a kernel
    # near its roofline or with the tensor pipe this busy is not starved
    max_roofline_fraction: float = 0.75
    max_tensor_pipe_pct: float = 50.0
    # a memory-bound kernel at this fraction of its roofline or more waits on DRAM by design:
    # idle schedulers there are the classification, not a further finding (as warp_stalls')
    memory_bound_fraction: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)
    # the share of the estimator's upper bound a rewrite is expected to realize (base.BOUND_SHARE)
    bound_share: float = attrs.field(default=BOUND_SHARE, validator=reachable)


class IssueSlotUtilization(KernelMicroProfiler):
    name = "issue_slots"
    title = "Low issue-slot use"
    description = "schedulers find no eligible warp in most cycles"
    Settings = IssueSlotSettings
    # a memory-bound kernel below its roofline with starved schedulers does not keep enough
    # loads in flight; a launch-bound one has too few warps to issue from
    applies_to = frozenset({"latency", "compute", "memory", "too_little_work"})
    metrics = (M.ISSUE_ACTIVE_PCT, M.IPC, M.ELIGIBLE_WARPS, M.ACTIVE_WARPS_PER_SCHEDULER, M.PIPE_TENSOR_HMMA_PCT,
               M.PIPE_TENSOR_PCT, M.L2_THROUGHPUT_PCT)

    def check(self, kernel, share, index, profile, bottleneck, context):
        if roofline_fraction(bottleneck) >= self.settings.max_roofline_fraction:
            return None
        if M.tensor_pipe_pct(kernel.metrics) >= self.settings.max_tensor_pipe_pct:
            return None
        if (bottleneck is not None and bottleneck.kind == "memory"
                and roofline_fraction(bottleneck) >= self.settings.memory_bound_fraction):
            return None
        issue = metric(kernel, M.ISSUE_ACTIVE_PCT)
        eligible = metric(kernel, M.ELIGIBLE_WARPS)
        if issue is None or issue >= self.settings.max_issue_pct:
            return None
        if eligible is not None and eligible >= self.settings.max_eligible_warps:
            return None
        active = metric(kernel, M.ACTIVE_WARPS_PER_SCHEDULER)
        ipc = metric(kernel, M.IPC)
        extra = ", ".join(x for x in (
            f"{eligible:.2f} eligible" if eligible is not None else "",
            f"{active:.1f} active warps per scheduler" if active is not None else "",
            f"IPC {ipc:.2f}" if ipc is not None else "") if x)
        extra = f" ({extra})" if extra else ""
        # judged on the issue rate alone: say what could not be checked
        unchecked = (f" The report lacks {M.ELIGIBLE_WARPS} (eligible warps per scheduler) to confirm it."
                     if eligible is None else "")
        # the idle issue share comes back (bound_share of it: more ready warps overlap the
        # latency, they do not remove it), never more than the headroom below the roofline
        capped, l2_note = self.request_bound(self.settings.bound_share * clip(1 - issue / self.settings.max_issue_pct),
                                             bottleneck, kernel)
        gain = share * capped
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"the warp schedulers issue an instruction in only {issue:.1f}% of cycles{extra}: "
                     f"warps are mostly waiting, not computing.{unchecked}{l2_note}"),
            action=("Raise the number of ready warps: more resident warps (occupancy, more blocks), more "
                    "independent work per thread (ILP), and shorter dependency chains; see the warp-stall "
                    "finding for what they wait on."),
            evidence={"issue_active_pct": issue, "eligible_warps_per_scheduler": eligible,
                      "active_warps_per_scheduler": active, "ipc": ipc,
                      "l2_throughput_pct": metric(kernel, M.L2_THROUGHPUT_PCT)})


@attrs.frozen
class IssueBoundSettings:
    # schedulers issuing in at least this share of cycles while no pipe is near its limit:
    # the instruction stream itself, not a unit, sets the time
    min_issue_pct: float = 80.0
    max_pipe_pct: float = 80.0
    # a kernel whose roofline is its DRAM traffic (below the ridge) while the SM is at least
    # this busy, and busier than the memory system, spends its time issuing instructions the
    # bytes do not need (index arithmetic, narrow accesses): the classifier's busy threshold
    # (its "compute" class). 0 turns this form off
    memory_natured_sm_pct: float = 60.0
    # a kernel at this fraction of its roofline or more is left to at_roofline
    max_roofline_fraction: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)
    # the share of the estimator's upper bound a rewrite is expected to realize (base.BOUND_SHARE)
    bound_share: float = attrs.field(default=BOUND_SHARE, validator=reachable)


class IssueBound(KernelMicroProfiler):
    name = "issue_bound"
    title = "Bound by instruction issue"
    description = ("schedulers issue nearly every cycle, or the SM is busier than memory on a kernel whose roofline "
                   "is its traffic, with no pipe saturated: too many instructions per element")
    Settings = IssueBoundSettings
    applies_to = frozenset({"compute", "latency"})
    metrics = (M.ISSUE_ACTIVE_PCT, M.ELIGIBLE_WARPS, M.INST_EXECUTED, M.PIPE_FMA_PCT, M.PIPE_ALU_PCT,
               M.PIPE_FP64_PCT, M.PIPE_LSU_PCT, M.PIPE_TENSOR_HMMA_PCT, M.PIPE_TENSOR_PCT, M.SM_THROUGHPUT_PCT,
               M.MEM_THROUGHPUT_PCT, M.DRAM_THROUGHPUT_PCT, M.L2_THROUGHPUT_PCT)

    def check(self, kernel, share, index, profile, bottleneck, context):
        s = self.settings
        fraction = roofline_fraction(bottleneck)
        if fraction >= s.max_roofline_fraction:
            return None
        issue = metric(kernel, M.ISSUE_ACTIVE_PCT)
        pipes = {"tensor": M.tensor_pipe_pct(kernel.metrics), "FMA": M.get(kernel.metrics, M.PIPE_FMA_PCT),
                 "ALU": M.get(kernel.metrics, M.PIPE_ALU_PCT), "FP64": M.get(kernel.metrics, M.PIPE_FP64_PCT),
                 "LSU": M.get(kernel.metrics, M.PIPE_LSU_PCT)}
        busiest, pct = max(pipes.items(), key=lambda kv: kv[1])
        if pct >= s.max_pipe_pct:  # a pipe at its limit is pipe_bound's
            return None
        issue_form = issue is not None and issue >= s.min_issue_pct
        sm, mem = metric(kernel, M.SM_THROUGHPUT_PCT), self._memory_pct(kernel)
        memory_form = (s.memory_natured_sm_pct > 0 and self._memory_natured(bottleneck) and sm is not None
                       and mem is not None and sm >= s.memory_natured_sm_pct and sm >= mem)
        if not (issue_form or memory_form):
            return None
        # with only the busiest pipe's instructions left the time could fall to that pipe's
        # share; when the kernel's roofline is its traffic, to that roofline (the headroom)
        # once the instructions the bytes do not need are gone: bound_share of the larger
        # bound, never more than the headroom below the roofline
        bound = clip(1 - pct / 100.0) if issue_form else 0.0
        if memory_form:
            bound = max(bound, self.headroom(bottleneck))
        capped, l2_note = self.request_bound(s.bound_share * bound, bottleneck, kernel)
        gain = share * capped
        inst = metric(kernel, M.INST_EXECUTED)
        inst_txt = f" ({inst:.3g} warp instructions)" if inst else ""
        if issue_form:
            message = (f"the schedulers issue in {issue:.0f}% of cycles{inst_txt} while the busiest pipe ({busiest}) "
                       f"is only {pct:.0f}% busy: the number of instructions, not a unit, sets the time.")
        else:
            per_byte = ""
            dram = M.dram_bytes(kernel.metrics)
            if inst and dram > 0:
                per_byte = f"; {inst * 16 / dram:.2f} warp instructions per 16 bytes of DRAM traffic"
            message = (f"the kernel's roofline is its memory traffic (at {fraction:.0%} of it), yet the SM is "
                       f"{sm:.0f}% busy against {mem:.0f}% for memory{inst_txt}{per_byte}: instructions the bytes "
                       "do not need (index arithmetic, narrow accesses), not the bytes, set the time.")
        return self.finding(
            kernel, share, index, profile, gain, message=message + l2_note,
            action=("Issue fewer instructions per element: 16-byte vector loads and stores, 32-bit instead of "
                    "64-bit index arithmetic, index and address computations hoisted out of inner loops, "
                    "several elements per thread with the loop unrolled, fast-math intrinsics for "
                    "transcendentals."),
            evidence={"issue_active_pct": issue, "busiest_pipe_pct": pct, "instructions": inst,
                      "sm_throughput_pct": sm, "memory_throughput_pct": mem,
                      "l2_throughput_pct": metric(kernel, M.L2_THROUGHPUT_PCT),
                      "eligible_warps_per_scheduler": metric(kernel, M.ELIGIBLE_WARPS)})

    @staticmethod
    def _memory_pct(kernel) -> float | None:
        values = [v for v in (metric(kernel, M.MEM_THROUGHPUT_PCT), metric(kernel, M.DRAM_THROUGHPUT_PCT))
                  if v is not None]
        return max(values) if values else None

    @staticmethod
    def _memory_natured(bottleneck: Bottleneck | None) -> bool:
        """The forward's roofline is set by its DRAM traffic: at the roofline it would wait on
        memory, not on FLOPs (the classifier's time fractions; False without them)."""
        if bottleneck is None:
            return False
        ev = bottleneck.evidence or {}
        mem = ev.get("memory_time_fraction")
        return mem is not None and mem > 0 and mem >= ev.get("compute_time_fraction", 0.0)


@attrs.frozen
class PipeBoundSettings:
    # the ALU, LSU or FP64 pipe this busy sets the time (IssueBound's "near its limit")
    min_pipe_pct: float = 80.0
    # a kernel at this fraction of its roofline or more is left to at_roofline
    max_roofline_fraction: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)
    # the share of the estimator's upper bound a rewrite is expected to realize (base.BOUND_SHARE)
    bound_share: float = attrs.field(default=BOUND_SHARE, validator=reachable)


_PIPE_ADVICE = {
    "ALU": ("integer and logic instructions",
            "Issue fewer integer and logic instructions per element: 32-bit instead of 64-bit index "
            "arithmetic, index and address computations hoisted out of inner loops, divisions and "
            "modulos by runtime sizes replaced by multiply-shift or power-of-two shapes, and for "
            "selection and sorting kernels fewer passes over the data (wider radix digits, one pass "
            "where k is small)."),
    "LSU": ("load, store and shared-memory instructions",
            "Issue fewer, wider memory instructions: 16-byte vector loads and stores, values kept in "
            "registers across loop iterations instead of reloaded, warp shuffles instead of shared "
            "memory for exchanges within a warp."),
    "FP64": ("double-precision instructions",
             "Move the double-precision work off the FP64 pipe: FP32 where the tolerance allows, "
             "compensated FP32 sums where it almost does, the tensor cores (DMMA) for FP64 matrix "
             "products."),
}


class PipeBound(KernelMicroProfiler):
    name = "pipe_bound"
    title = "Bound by the integer, memory-instruction or FP64 pipe"
    description = "the integer (ALU), memory-instruction (LSU) or FP64 pipe is near its limit"
    Settings = PipeBoundSettings
    # the FLOP roofline does not count integer or memory instructions: a kernel held by them
    # shows far below its roofline with a busy SM (PyTorch's kthvalue, corpus v4: ALU 82 %,
    # 4.6 % of the FLOP roofline). FMA- and tensor-bound kernels have their own findings
    applies_to = frozenset({"compute", "latency"})
    metrics = (M.PIPE_ALU_PCT, M.PIPE_LSU_PCT, M.PIPE_FP64_PCT, M.PIPE_FMA_PCT, M.PIPE_TENSOR_HMMA_PCT,
               M.PIPE_TENSOR_PCT, M.ISSUE_ACTIVE_PCT, M.L2_THROUGHPUT_PCT)

    def check(self, kernel, share, index, profile, bottleneck, context):
        s = self.settings
        fraction = roofline_fraction(bottleneck)
        if fraction >= s.max_roofline_fraction:
            return None
        pipes = {"ALU": metric(kernel, M.PIPE_ALU_PCT), "LSU": metric(kernel, M.PIPE_LSU_PCT),
                 "FP64": metric(kernel, M.PIPE_FP64_PCT)}
        known = {k: v for k, v in pipes.items() if v is not None}
        if not known:
            return None
        busiest, pct = max(known.items(), key=lambda kv: kv[1])
        if pct < s.min_pipe_pct:
            return None
        others = [v for k, v in known.items() if k != busiest]
        others += [M.get(kernel.metrics, M.PIPE_FMA_PCT), M.tensor_pipe_pct(kernel.metrics)]
        second = max(others)
        # moving work off the busiest pipe helps until the next pipe is the limit: bound_share
        # of that bound, never more than the headroom below the roofline
        capped, l2_note = self.request_bound(s.bound_share * clip(1 - second / pct), bottleneck, kernel)
        gain = share * capped
        what, action = _PIPE_ADVICE[busiest]
        issue = metric(kernel, M.ISSUE_ACTIVE_PCT)
        issue_txt = f"; the schedulers issue in {issue:.0f}% of cycles" if issue is not None else ""
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"the {busiest} pipe ({what}) is {pct:.0f}% busy while the next busiest pipe is at "
                     f"{second:.0f}%{issue_txt}: {what} set the time, and the FLOP roofline "
                     f"({100 * fraction:.1f}%) does not count them.{l2_note}"),
            action=action,
            evidence={"busiest_pipe_pct": pct, "next_pipe_pct": second, "issue_active_pct": issue,
                      **{f"pipe_{k.lower()}_pct": v for k, v in known.items()}})


@attrs.frozen
class DivergenceSettings:
    # average active threads per executed warp instruction below this (of 32): Nsight
    # Compute's thread-divergence guidance flags low warp execution efficiency
    max_threads_per_inst: float = 24.0


class ThreadDivergence(KernelMicroProfiler):
    name = "thread_divergence"
    title = "Thread divergence"
    description = "warp instructions executed with only part of the warp's threads active"
    Settings = DivergenceSettings
    applies_to = frozenset({"compute", "latency", "memory"})
    metrics = (M.THREADS_PER_INST, M.THREADS_PRED_ON_PER_INST, M.BRANCH_TARGETS, M.BRANCH_DIVERGENT)
    source_metrics = ("smsp__branch_targets_threads_divergent",)

    def check(self, kernel, share, index, profile, bottleneck, context):
        threads = metric(kernel, M.THREADS_PER_INST)
        if threads is None or threads >= self.settings.max_threads_per_inst:
            return None
        divergent = metric(kernel, M.BRANCH_DIVERGENT)
        targets = metric(kernel, M.BRANCH_TARGETS)
        branch_txt = (f"; {divergent:.3g} of {targets:.3g} branch targets diverge"
                      if divergent is not None and targets else "")
        efficiency = threads / 32.0
        gain = share * 0.6 * (1 - efficiency)
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"on average {threads:.1f} of 32 threads are active per executed warp instruction "
                     f"({efficiency:.0%} efficiency){branch_txt}: lanes of a warp take different paths "
                     f"or loop different trip counts, and the warp runs each path in turn."),
            action=("Make the work uniform within each warp: assign work so all 32 lanes take the same "
                    "branch (sort or bin items by path/length, map branch choices to whole warps), replace "
                    "branches with predicated arithmetic, and split long per-lane loops into equal chunks."),
            evidence={"threads_per_instruction": threads, "warp_efficiency": efficiency,
                      "divergent_branch_targets": divergent, "branch_targets": targets})


@attrs.frozen
class TensorIdleSettings:
    # FP32 FLOPs above this share of the kernel's roofline time with no tensor work
    min_fp32_time_fraction: float = 0.15
    # operand loads (shared+global, thread-level) per FFMA in this range: GEMM/convolution-like
    # reuse; elementwise FMA chains load far less often, streaming kernels far more
    min_loads_per_ffma: float = 1 / 32
    max_loads_per_ffma: float = 2.0
    min_fp32_flops: float = 1e8
    # FP32 FLOPs per DRAM byte at least this: a contraction reuses each operand byte many
    # times (a 4096^3 scalar GEMM: hundreds), while reductions, normalizations and pooling,
    # whose load-to-FFMA ratios can look GEMM-like, do a few FLOPs per byte; below the FP32
    # ridge point (H200: 67 TFLOP/s over 4.8 TB/s, 14) tensor cores cannot help
    min_flops_per_dram_byte: float = 8.0
    # a kernel at this fraction of its roofline or more gets at_roofline's finding only
    # (at_roofline's own threshold): faster math cannot move a kernel held by its ceiling
    max_roofline_fraction: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)


class TensorCoresIdle(KernelMicroProfiler):
    name = "tensor_cores_idle"
    title = "Tensor cores idle on matrix-shaped work"
    description = "scalar FP32 multiply-adds with GEMM-like operand reuse and no tensor-core work"
    Settings = TensorIdleSettings
    applies_to = frozenset({"compute", "latency", "memory"})
    metrics = (M.FFMA, M.FADD, M.FMUL, M.SHARED_LD_INST, M.GLOBAL_LD_INST, M.PIPE_FMA_PCT,
               M.PIPE_TENSOR_HMMA_PCT, M.PIPE_TENSOR_PCT, M.DRAM_READ_BYTES, M.DRAM_WRITE_BYTES,
               *[n for v in M.TENSOR_OPS.values() for n in v])

    def check(self, kernel, share, index, profile, bottleneck, context):
        if roofline_fraction(bottleneck) >= self.settings.max_roofline_fraction:
            return None
        m = kernel.metrics
        ffma = M.get(m, M.FFMA)
        fp32 = M.fp32_flops(m)
        if fp32 < self.settings.min_fp32_flops or ffma <= 0:
            return None
        tensor = sum(M.tensor_ops_by_type(m).values())
        if tensor > 0.01 * fp32 or M.tensor_pipe_pct(m) > 1.0:
            return None
        dram = M.dram_bytes(m)
        if dram > 0 and fp32 / dram < self.settings.min_flops_per_dram_byte:
            return None
        loads = 32.0 * (M.get(m, M.SHARED_LD_INST) + M.get(m, M.GLOBAL_LD_INST))
        loads_per_ffma = loads / ffma
        if not (self.settings.min_loads_per_ffma <= loads_per_ffma <= self.settings.max_loads_per_ffma):
            return None
        gpu = context.gpu
        seconds = (kernel.duration_ns or 0.0) * 1e-9
        fma_pct = metric(kernel, M.PIPE_FMA_PCT)
        if gpu is not None and seconds > 0:
            fp32_fraction = fp32 / (gpu.fp32_tflops * 1e12) / seconds
            speedup = gpu.tf32_tflops / gpu.fp32_tflops
        else:
            fp32_fraction = (fma_pct or 0.0) / 100.0
            speedup = 7.0  # Hopper/Ampere TF32 tensor vs FP32 FMA peak ratio (495/67, 156/19.5)
        if fp32_fraction < self.settings.min_fp32_time_fraction and (fma_pct or 0.0) < 100 * self.settings.min_fp32_time_fraction:
            return None
        rate = fp32 / seconds / 1e12 if seconds > 0 else None
        rate_txt = f" at {rate:.1f} TFLOP/s" if rate else ""
        fma_txt = f", FMA pipe {fma_pct:.0f}% busy" if fma_pct is not None else ""
        if gpu is not None and seconds > 0:
            # a tensor-core rewrite replaces the whole GEMM-like kernel, its address math and
            # shared-memory traffic with it: its time is the FLOPs at the TF32 rate or the
            # DRAM bytes this kernel moves (a better-tiled rewrite moves no more), each at the
            # practical share of its peak (the calibration pair: 92 % saved on a scalar FFMA
            # GEMM; counting only the FFMA time, the old estimate said 44 %)
            math_s = fp32 / (gpu.tf32_tflops * 1e12 * self.reach())
            bytes_s = M.dram_bytes(kernel.metrics) / (gpu.dram_bandwidth_gbs * 1e9 * self.reach())
            gain = share * clip(1 - max(math_s, bytes_s) / seconds)
        else:
            gain = share * clip(max(fp32_fraction, (fma_pct or 0.0) / 100.0)) * (1 - 1 / speedup)
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"{fp32 / 1e9:.2f} GFLOP of scalar FP32 math{rate_txt}{fma_txt} and no tensor-core "
                     f"work, with {loads_per_ffma:.2f} operand loads per FFMA (matrix-multiply-like reuse): "
                     f"tensor cores run this {speedup:.0f}x faster in TF32 and more in bf16/fp16."),
            action=("Run the contraction on tensor cores: torch.matmul/bmm with TF32 allowed "
                    "(torch.backends.cuda.matmul.allow_tf32=True) or bf16/fp16 inputs with FP32 accumulation, "
                    "or mma.sync/wgmma tiles (CUTLASS, Triton tl.dot) in a custom kernel."),
            evidence={"fp32_flops": fp32, "tensor_ops": tensor, "loads_per_ffma": loads_per_ffma,
                      "fp32_time_fraction": fp32_fraction, "fma_pipe_pct": fma_pct})


@attrs.frozen
class UnfusedSettings:
    # separate FMUL+FADD pairs that could be one FFMA, as a share of FP32 instructions (each
    # FFMA takes one multiply and one add: min(FMUL, FADD) pairs at most, fewer than Nsight
    # Compute's count of all non-fused instructions)
    min_fusable_share: float = 0.1
    # FP32 instructions below this share of all executed instructions are not worth it
    min_fp32_inst_share: float = 0.1
    # a kernel at this fraction of its roofline or more gets at_roofline's finding only
    # (at_roofline's threshold); below it, fewer instructions help a memory-bound kernel too
    # (each FMUL+FADD pair is two issue slots and two register round trips for one FFMA)
    max_roofline_fraction: float = 0.75


class UnfusedFp32(KernelMicroProfiler):
    name = "unfused_fp32"
    title = "Unfused FP32 multiply and add"
    description = "FMUL and FADD executed separately where one FFMA would do"
    Settings = UnfusedSettings
    applies_to = frozenset({"compute", "latency", "memory"})
    metrics = (M.FADD, M.FMUL, M.FFMA, M.INST_EXECUTED, M.PIPE_FMA_PCT)

    def check(self, kernel, share, index, profile, bottleneck, context):
        if roofline_fraction(bottleneck) >= self.settings.max_roofline_fraction:
            return None
        fadd, fmul, ffma = (M.get(kernel.metrics, n) for n in (M.FADD, M.FMUL, M.FFMA))
        total = fadd + fmul + ffma
        if total <= 0:
            return None
        pairs = min(fadd, fmul)
        fusable = pairs / total
        if fusable < self.settings.min_fusable_share:
            return None
        inst = metric(kernel, M.INST_EXECUTED)
        fp32_share = (total / 32.0) / inst if inst else None
        if fp32_share is not None and fp32_share < self.settings.min_fp32_inst_share:
            return None
        fma_pct = metric(kernel, M.PIPE_FMA_PCT)
        weight = clip((fma_pct or 50.0) / 100.0, 0.2, 1.0)
        gain = share * fusable * weight
        share_txt = f" ({fp32_share:.0%} of executed instructions)" if fp32_share is not None else ""
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"{fmul:.3g} FMUL and {fadd:.3g} FADD against {ffma:.3g} FFMA thread instructions"
                     f"{share_txt}: up to {pairs:.3g} multiply/add pairs ({fusable:.0%} of FP32 instructions) "
                     f"could each be one fused multiply-add."),
            action=("Let multiplies and adds contract into FFMA: write fmaf(a, b, c) (or a*b+c without "
                    "__fmul_rn/__fadd_rn), do not compile with -fmad=false, keep the multiply and add in the "
                    "same expression; in Triton use tl.fma or plain a*b+c."),
            evidence={"fadd": fadd, "fmul": fmul, "ffma": ffma, "fusable_share": fusable,
                      "fp32_instruction_share": fp32_share, "fma_pipe_pct": fma_pct})


@attrs.frozen
class AtRooflineSettings:
    # Nsight Compute calls >80% of peak high utilisation; 0.75 leaves room for the
    # difference between datasheet/calibrated ceilings and sustained rates
    min_roofline_fraction: float = 0.75
    # DRAM traffic above this multiple of the problem's minimum turns the advice to the bytes
    excess_factor: float = 1.5


class AtRoofline(KernelMicroProfiler):
    name = "at_roofline"
    title = "At the roofline already"
    description = "the candidate runs near its roofline limit: only fusion or a new algorithm helps"
    Settings = AtRooflineSettings
    applies_to = frozenset({"memory", "compute"})
    metrics = ()

    def analyze(self, profile: ProfileData, bottleneck: Bottleneck | None,
                context: ProfileContext) -> list[Finding]:
        if bottleneck is None or bottleneck.roofline_fraction is None:
            return []
        f = bottleneck.roofline_fraction
        if f < self.settings.min_roofline_fraction:
            return []
        ev = bottleneck.evidence
        if f > WRONG_CEILINGS_FRACTION:  # so far above its roofline: the ceilings are not this GPU's
            return [Finding(
                tool=self.name, severity="info", title="Above the roofline: the GPU spec does not fit",
                message=(f"the candidate runs at {f:.0%} of its roofline, far above the ceilings used: they are "
                         f"not the ceilings of the GPU the report was taken on, or its counters are off; no "
                         f"headroom can be told from them."),
                action=("Name the GPU the report was taken on (--gpu, or gpu: in the config), or measure it "
                        "with kernelpro calibrate; read the roofline numbers only after that."),
                estimated_gain=0.0, level="kernel", kernel=None, evidence={"roofline_fraction": f})]
        io = io_bytes(profile)
        minimum = io.get("input_bytes", 0.0) + io.get("param_bytes", 0.0) + io.get("output_bytes", 0.0)
        excess = ev["dram_bytes"] / minimum if minimum > 0 and "dram_bytes" in ev else None
        if bottleneck.kind == "memory":
            what = (f"DRAM traffic of {ev['dram_bytes'] / 1e6:.0f} MB at "
                    f"{ev.get('dram_bandwidth_achieved_gbs', 0):.0f} of {ev.get('dram_bandwidth_peak_gbs', 0):.0f} GB/s"
                    if "dram_bytes" in ev else "the report has no DRAM-byte counters")
            if excess is not None and excess >= self.settings.excess_factor:
                what += (f"; but that traffic is {excess:.1f}x the {minimum / 1e6:.0f} MB the problem needs, "
                         f"so the roofline is met for bytes that need not move")
                action = ("Cut the bytes, not the time per byte: remove the excess DRAM traffic (see the "
                          "DRAM-traffic and local-memory findings): keep data on chip, fuse, read inputs once.")
            else:
                action = ("Tuning this kernel further gains little. Move fewer bytes: fuse it with its producer "
                          "or consumer, use a smaller data type (bf16/fp8) where accuracy allows, or change the "
                          "algorithm so data is read once.")
        else:
            what = (f"{ev['flops'] / 1e9:.1f} GFLOP at {ev.get('achieved_tflops', 0):.0f} TFLOP/s "
                    f"on the {bottleneck.pipe or 'compute'} pipe" if "flops" in ev
                    else "the report has no FLOP counters")
            action = ("Tuning this kernel further gains little. Do less arithmetic (an algorithm with fewer "
                      "FLOPs, skipping zero/masked blocks), use a faster type (fp8/bf16 tensor cores) where "
                      "accuracy allows, or fuse neighbouring element-wise work into it.")
        if excess is not None:
            extra = {"excess_factor": excess}
        else:
            extra = {}
        return [Finding(
            tool=self.name, severity="info", title=self.title,
            message=(f"the candidate runs at {f:.0%} of its roofline ({bottleneck.kind}-bound: {what}); "
                     f"the remaining headroom is at most {max(0.0, 1 - f):.0%}."),
            action=action, estimated_gain=round(max(0.0, 1 - f), 4), level="kernel", kernel=None,
            evidence={"roofline_fraction": f, **extra, **{k: v for k, v in ev.items()
                                                if k in ("dram_bytes", "flops", "achieved_tflops",
                                                         "dram_bandwidth_achieved_gbs")}})]
