"""Launch-shape micro-profilers: occupancy limiters, occupancy gap, tail effect, small grids,
launch-dominated forwards."""

from __future__ import annotations

import math

import attrs

from kernelpro.api import Bottleneck, Finding, ProfileContext, ProfileData

from kernelpro_plugins_ncu.micro.base import (BOUND_SHARE, REACHABLE_FRACTION, M, KernelMicroProfiler, clip, metric,
                                              reachable, roofline_fraction, severity_for)


def _sm_count(kernel, context: ProfileContext, profile: ProfileData) -> float | None:
    value = metric(kernel, M.SM_COUNT)
    if value:
        return value
    if context.gpu is not None:
        return float(context.gpu.sm_count)
    return None


@attrs.frozen
class OccupancyLimiterSettings:
    # theoretical occupancy at or below this percentage leaves too few warps to hide latency
    # on a latency- or memory-bound kernel below its roofline (Nsight Compute's occupancy rule
    # reports any limiter; a kernel held to three quarters of the SM's warps by one limiter is
    # named, with the gain of the warps it would add). A limiter the grid never reaches (no
    # SM gets more blocks than it allows) is not named: lifting it adds no warps
    max_theoretical_pct: float = 75.0
    # a kernel at this fraction of its roofline or more gets at_roofline's finding only (its
    # threshold): a GEMM's tiles trade occupancy for reuse and still reach the ceiling
    max_roofline_fraction: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)


_LIMITERS = {
    M.LIMIT_REGISTERS: ("registers",
                        "Use fewer registers per thread: __launch_bounds__(threads, minBlocksPerSM), fewer "
                        "live values (smaller per-thread tiles), recompute cheap values instead of keeping them."),
    M.LIMIT_SMEM: ("shared memory",
                   "Use less shared memory per block: smaller tiles or fewer pipeline stages, reuse one "
                   "buffer for several phases, or give more threads to each block's tile."),
    M.LIMIT_WARPS: ("block size (warps)",
                    "Pick a block size that divides the SM's 64 warps evenly (128, 256 or 512 threads)."),
    M.LIMIT_BLOCKS: ("blocks per SM (small blocks)",
                     "Use larger blocks (at least 64-128 threads): the SM holds at most 32 blocks, so tiny "
                     "blocks cap the resident warps."),
}


class OccupancyLimiter(KernelMicroProfiler):
    name = "occupancy_limiter"
    title = "Low theoretical occupancy"
    description = "registers, shared memory or block size cap the warps an SM can hold"
    Settings = OccupancyLimiterSettings
    applies_to = frozenset({"latency", "memory"})
    metrics = (M.THEORETICAL_OCCUPANCY_PCT, M.ACHIEVED_OCCUPANCY_PCT, M.LIMIT_REGISTERS, M.LIMIT_SMEM,
               M.LIMIT_WARPS, M.LIMIT_BLOCKS, M.REGISTERS_PER_THREAD, M.SMEM_STATIC, M.SMEM_DYNAMIC,
               M.BLOCK_SIZE, M.GRID_SIZE, M.L2_THROUGHPUT_PCT)

    def check(self, kernel, share, index, profile, bottleneck, context):
        if roofline_fraction(bottleneck) >= self.settings.max_roofline_fraction:
            return None
        theo = metric(kernel, M.THEORETICAL_OCCUPANCY_PCT)
        if theo is None or theo > self.settings.max_theoretical_pct:
            return None
        limits = {name: metric(kernel, name) for name in _LIMITERS}
        known = {k: v for k, v in limits.items() if v is not None}
        if not known:
            return None
        low = min(known.values())
        limiting = [k for k, v in known.items() if v == low]
        what = " and ".join(_LIMITERS[k][0] for k in limiting)
        regs = metric(kernel, M.REGISTERS_PER_THREAD)
        smem = (metric(kernel, M.SMEM_STATIC) or 0.0) + (metric(kernel, M.SMEM_DYNAMIC) or 0.0)
        block = metric(kernel, M.BLOCK_SIZE)
        details = ", ".join(x for x in (
            f"{block:.0f} threads per block" if block else "",
            f"{regs:.0f} registers per thread" if regs else "",
            f"{smem / 1024:.1f} KiB shared memory per block" if smem else "") if x)
        # without the limiter an SM holds what the other limits and the grid allow; a kernel
        # held by latency runs about as much faster as it gains resident warps (the calibration
        # pair: 1 -> 4 blocks per SM, 72 % saved), never past the practical roofline share
        others = [v for k, v in known.items() if k not in limiting]
        grid, sms = metric(kernel, M.GRID_SIZE), _sm_count(kernel, context, profile)
        if grid and sms:
            if math.ceil(grid / sms) <= low:  # the grid gives no SM more blocks than the limit
                return None
            others.append(math.ceil(grid / sms))
        after = min(others) if others else None
        if after is not None and after > low > 0:
            raw = 1 - low / after
        else:
            raw = 0.5 * clip(1 - theo / 100.0)  # unknown grid: half the warp slots left empty
        capped, l2_note = self.request_bound(raw, bottleneck, kernel)
        gain = share * capped
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"theoretical occupancy is {theo:.1f}%: {what} allow only {low:.0f} block(s) per SM "
                     f"({details}); too few warps to hide memory and pipeline latency.{l2_note}"),
            action=" ".join(_LIMITERS[k][1] for k in limiting),
            evidence={"theoretical_occupancy_pct": theo, "blocks_per_sm": low, "registers_per_thread": regs,
                      "shared_bytes_per_block": smem, "block_size": block,
                      "l2_throughput_pct": metric(kernel, M.L2_THROUGHPUT_PCT),
                      **{f"limit_{_LIMITERS[k][0].split()[0]}": v for k, v in known.items()}})


@attrs.frozen
class OccupancyGapSettings:
    # achieved occupancy more than this many percentage points under theoretical, and below
    # this ratio of it: warps finish unevenly or blocks start late
    # (Nsight Compute reports a gap worth 10 % or more; below 10 points the warps that could
    # be added are too few to matter on a kernel below its roofline)
    min_gap_points: float = 10.0
    max_ratio: float = 0.9
    # a kernel at this fraction of its roofline or more gets at_roofline's finding only (its
    # threshold): warps added there find the memory or the pipes already busy
    max_roofline_fraction: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)
    # the share of the estimator's upper bound a rewrite is expected to realize (base.BOUND_SHARE)
    bound_share: float = attrs.field(default=BOUND_SHARE, validator=reachable)


class AchievedOccupancyGap(KernelMicroProfiler):
    name = "occupancy_gap"
    title = "Achieved occupancy far below theoretical"
    description = "warps exit early or unevenly, so fewer are resident than the launch allows"
    Settings = OccupancyGapSettings
    applies_to = frozenset({"latency", "memory", "compute", "too_little_work"})
    metrics = (M.ACHIEVED_OCCUPANCY_PCT, M.THEORETICAL_OCCUPANCY_PCT, M.WAVES_PER_SM, M.L2_THROUGHPUT_PCT)

    def check(self, kernel, share, index, profile, bottleneck, context):
        if roofline_fraction(bottleneck) >= self.settings.max_roofline_fraction:
            return None
        theo = metric(kernel, M.THEORETICAL_OCCUPANCY_PCT)
        achieved = metric(kernel, M.ACHIEVED_OCCUPANCY_PCT)
        if theo is None or achieved is None or theo <= 0:
            return None
        gap = theo - achieved
        if gap <= self.settings.min_gap_points or achieved / theo >= self.settings.max_ratio:
            return None
        waves = metric(kernel, M.WAVES_PER_SM)
        # the empty warp slots filled (bound_share of that), never past the headroom
        capped, l2_note = self.request_bound(self.settings.bound_share * clip(gap / theo), bottleneck, kernel)
        gain = share * capped
        if waves is not None and waves < 1.0:
            cause = (f"the grid fills only {waves:.2f} of one wave, so most warp slots never get a warp")
            action = ("Launch enough blocks to fill every SM's warp slots (at least one full wave), or give "
                      "each thread more independent work to keep the few warps busy.")
        else:
            waves_txt = f" over {waves:.2f} waves" if waves is not None else ""
            cause = (f"warps of a block finish at very different times (early exits, uneven per-thread "
                     f"work) or the last wave is partial{waves_txt}")
            action = ("Give every warp of a block the same amount of work (no early-returning warps, "
                      "balanced loops); if only some threads have work, launch fewer, fuller blocks; "
                      "for partial last waves see the tail-effect finding.")
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"achieved occupancy {achieved:.1f}% against a theoretical {theo:.1f}%: on average "
                     f"{gap:.0f} points of warp slots sit empty, because {cause}.{l2_note}"),
            action=action,
            evidence={"achieved_occupancy_pct": achieved, "theoretical_occupancy_pct": theo,
                      "gap_points": gap, "waves_per_sm": waves,
                      "l2_throughput_pct": metric(kernel, M.L2_THROUGHPUT_PCT)})


@attrs.frozen
class TailEffectSettings:
    # share of the kernel's time spent in a partial last wave above which we report
    min_idle_share: float = 0.15
    max_waves: float = 20.0  # beyond this the partial wave is negligible
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)


class TailEffect(KernelMicroProfiler):
    name = "tail_effect"
    title = "Tail effect (wave quantization)"
    description = "the last wave of blocks is partial, leaving most SMs idle while it runs"
    Settings = TailEffectSettings
    applies_to = frozenset({"any"})
    metrics = (M.WAVES_PER_SM, M.GRID_SIZE, M.BLOCK_SIZE, M.SM_COUNT, M.L2_THROUGHPUT_PCT)

    def check(self, kernel, share, index, profile, bottleneck, context):
        waves = metric(kernel, M.WAVES_PER_SM)
        if waves is None or waves < 1.0 or waves > self.settings.max_waves:
            return None
        full = math.ceil(waves - 1e-9)
        partial = waves - math.floor(waves)
        if partial < 1e-6:
            return None
        idle = (full - waves) / full  # share of the kernel's SM-time left idle in the tail wave
        if idle < self.settings.min_idle_share:
            return None
        grid = metric(kernel, M.GRID_SIZE)
        per_wave = grid / waves if grid else None
        per_wave_txt = f" ({per_wave:.0f} blocks fill one wave)" if per_wave else ""
        capped, l2_note = self.request_bound(idle, bottleneck, kernel)
        gain = share * capped
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"{waves:.2f} waves{per_wave_txt}: the last wave has only {partial:.0%} of a wave's "
                     f"blocks, so about {idle:.0%} of the kernel's SM time is idle while it runs.{l2_note}"),
            action=("Make the grid a multiple of one wave (SMs x blocks per SM): split the work into more, "
                    "smaller blocks so the tail is short, or use a persistent grid-stride kernel with "
                    "exactly one wave."),
            evidence={"waves_per_sm": waves, "partial_wave": partial, "idle_share": idle, "grid_blocks": grid,
                      "blocks_per_wave": per_wave, "l2_throughput_pct": metric(kernel, M.L2_THROUGHPUT_PCT)})


@attrs.frozen
class UnitImbalanceSettings:
    # the busiest SM (or L2 slice) active this much longer than the average one: at least
    # this share of the unit-time between the first start and the last finish is idle
    min_idle_share: float = 0.2
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)


class UnitImbalance(KernelMicroProfiler):
    name = "unit_imbalance"
    title = "Work spread unevenly over the SMs, their schedulers or the L2 slices"
    description = "some SMs (SM sub-partitions, or L2 slices) stay busy much longer than the average one"
    Settings = UnitImbalanceSettings
    applies_to = frozenset({"any"})
    metrics = (M.SM_ACTIVE_CYCLES_AVG, M.SM_ACTIVE_CYCLES_MAX, M.SM_ELAPSED_CYCLES, M.L2_ACTIVE_CYCLES_AVG,
               M.L2_ACTIVE_CYCLES_MAX, M.L2_THROUGHPUT_PCT, M.GRID_SIZE, M.SM_COUNT, M.SMSP_ACTIVE_CYCLES_AVG,
               M.SMSP_ACTIVE_CYCLES_MAX, M.BLOCK_SIZE)

    def check(self, kernel, share, index, profile, bottleneck, context):
        s = self.settings
        sm_avg, sm_max = metric(kernel, M.SM_ACTIVE_CYCLES_AVG), metric(kernel, M.SM_ACTIVE_CYCLES_MAX)
        l2_avg, l2_max = metric(kernel, M.L2_ACTIVE_CYCLES_AVG), metric(kernel, M.L2_ACTIVE_CYCLES_MAX)
        elapsed = metric(kernel, M.SM_ELAPSED_CYCLES)
        sm_idle = 1 - sm_avg / sm_max if sm_avg is not None and sm_max else None
        l2_idle = 1 - l2_avg / l2_max if l2_avg is not None and l2_max else None
        parts, gain = [], 0.0
        if sm_idle is not None and sm_idle >= s.min_idle_share and sm_max is not None and sm_avg is not None:
            # evenly spread, the SMs would finish at the average's active cycles, not the busiest's
            span = max(elapsed or 0.0, sm_max)
            gain = max(gain, (sm_max - sm_avg) / span)
            grid = metric(kernel, M.GRID_SIZE)
            sms = _sm_count(kernel, context, profile)
            few = f" ({grid:.0f} blocks for {sms:.0f} SMs)" if grid and sms and grid < sms else ""
            parts.append(f"the busiest SM is active {sm_max:.0f} cycles, the average one {sm_avg:.0f}{few}: "
                         f"{sm_idle:.0%} of the SMs' time is idle")
        smsp_avg, smsp_max = metric(kernel, M.SMSP_ACTIVE_CYCLES_AVG), metric(kernel, M.SMSP_ACTIVE_CYCLES_MAX)
        smsp_idle = 1 - smsp_avg / smsp_max if smsp_avg is not None and smsp_max else None
        if (not parts and smsp_idle is not None and smsp_idle >= s.min_idle_share and smsp_max is not None
                and smsp_avg is not None):
            # the SMs evenly busy, their four schedulers not: the busiest scheduler sets the time
            span = max(elapsed or 0.0, smsp_max)
            gain = max(gain, (smsp_max - smsp_avg) / span)
            block = metric(kernel, M.BLOCK_SIZE)
            warps = f" (blocks of {block / 32:.0f} warp(s))" if block and block < 128 else ""
            parts.append(f"the busiest SM sub-partition (one of an SM's four warp schedulers) is active "
                         f"{smsp_max:.0f} cycles, the average one {smsp_avg:.0f}{warps}: {smsp_idle:.0%} of the "
                         "schedulers' time is idle")
        if l2_idle is not None and l2_idle >= s.min_idle_share and l2_max is not None and l2_avg is not None:
            # an uneven L2 costs time only in the share of it the L2 is busy
            l2_busy = clip((metric(kernel, M.L2_THROUGHPUT_PCT) or 0.0) / 100.0)
            gain = max(gain, l2_idle * l2_busy)
            parts.append(f"the busiest L2 slice is active {l2_max:.0f} cycles, the average one {l2_avg:.0f} "
                         f"({l2_idle:.0%} idle; the L2 is {l2_busy:.0%} busy)")
        if not parts:
            return None
        return self.finding(
            kernel, share, index, profile, share * min(gain, self.headroom(bottleneck)),
            message="; ".join(parts) + ". Spread evenly, the work would end sooner (the estimate is that bound).",
            action=("Give every SM the same amount of work: enough blocks of equal size for all SMs (with fewer "
                    "blocks than SMs, split each block's rows or tiles over more blocks); for uneven items "
                    "(variable-length rows, data-dependent loops), split heavy items or hand out work "
                    "dynamically from a persistent grid (one atomic counter of the next tile). Uneven schedulers "
                    "within SMs: blocks of a multiple of 4 warps, and the same work per warp. An uneven L2 "
                    "follows from addresses that map to few slices: spread hot data and avoid power-of-two "
                    "strides across the blocks' accesses."),
            evidence={"sm_active_cycles_avg": sm_avg, "sm_active_cycles_max": sm_max, "sm_idle_share": sm_idle,
                      "l2_active_cycles_avg": l2_avg, "l2_active_cycles_max": l2_max, "l2_idle_share": l2_idle,
                      "smsp_active_cycles_avg": smsp_avg, "smsp_active_cycles_max": smsp_max,
                      "smsp_idle_share": smsp_idle,
                      "sm_elapsed_cycles": elapsed})


@attrs.frozen
class SmallGridSettings:
    # fewer resident-thread waves than this: the grid cannot fill the GPU
    max_waves: float = 0.5
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)


class SmallGrid(KernelMicroProfiler):
    name = "small_grid"
    title = "Grid too small for the GPU"
    description = "fewer blocks than SMs, or far fewer threads than the GPU can hold"
    Settings = SmallGridSettings
    applies_to = frozenset({"too_little_work", "latency"})
    metrics = (M.GRID_SIZE, M.BLOCK_SIZE, M.WAVES_PER_SM, M.SM_COUNT, M.L2_THROUGHPUT_PCT)

    def check(self, kernel, share, index, profile, bottleneck, context):
        grid = metric(kernel, M.GRID_SIZE)
        waves = metric(kernel, M.WAVES_PER_SM)
        sms = _sm_count(kernel, context, profile)
        block = metric(kernel, M.BLOCK_SIZE)
        if grid is None:
            return None
        if sms and grid < sms:
            idle = 1 - grid / sms
            msg = (f"the grid has {grid:.0f} block(s) of {block or 0:.0f} threads for {sms:.0f} SMs: "
                   f"{idle:.0%} of the SMs get no work.")
        elif waves is not None and waves < self.settings.max_waves:
            idle = 0.5 * (1 - waves / self.settings.max_waves)  # more warps hide latency, not linearly
            msg = (f"{grid:.0f} blocks of {block or 0:.0f} threads fill only {waves:.2f} of one wave of "
                   f"resident threads: too few warps per SM to hide latency.")
        else:
            return None
        capped, l2_note = self.request_bound(clip(idle, 0, 0.95), bottleneck, kernel)
        gain = share * capped
        return self.finding(
            kernel, share, index, profile, gain, message=msg + l2_note,
            action=("Launch more parallel work: at least 2-4 blocks per SM (split rows/tiles across blocks, "
                    "split-K for reductions), or batch several problems into one launch; grid-stride loops "
                    "should use SMs x blocks-per-SM blocks, not a handful."),
            evidence={"grid_blocks": grid, "block_size": block, "sm_count": sms, "waves_per_sm": waves,
                      "idle_share": idle, "l2_throughput_pct": metric(kernel, M.L2_THROUGHPUT_PCT)})


@attrs.frozen
class ShortKernelsSettings:
    max_mean_us: float = 5.0  # launch overhead is ~2-5 us per kernel launch
    min_kernels: int = 2


class LaunchDominated(KernelMicroProfiler):
    name = "launch_overhead"
    title = "Launch-dominated forward"
    description = "many very short kernels: launch overhead and gaps dominate"
    Settings = ShortKernelsSettings
    applies_to = frozenset({"too_little_work", "latency"})
    metrics = (M.DURATION_NS,)

    def analyze(self, profile: ProfileData, bottleneck: Bottleneck | None,
                context: ProfileContext) -> list[Finding]:
        kernels = list(profile.kernels)
        durations = [k.duration_ns for k in kernels if k.duration_ns]
        if len(durations) < self.settings.min_kernels:
            return []
        mean_us = sum(durations) / len(durations) / 1e3
        if mean_us >= self.settings.max_mean_us:
            return []
        # each launch costs a few microseconds of CPU/driver time the GPU may idle through
        overhead_us = 3.0 * len(durations)
        gpu_us = sum(durations) / 1e3
        gain = 0.5 * clip(overhead_us / (gpu_us + overhead_us), 0, 0.9)
        return [Finding(
            tool=self.name, severity=severity_for(gain), title=self.title,
            message=(f"{len(durations)} kernels of {mean_us:.1f} us on average ({sum(durations) / 1e3:.1f} us "
                     f"of GPU time): each launch costs a few microseconds, comparable to the work."),
            action=("Fuse the small kernels into one, or capture the forward in a CUDA graph "
                    "(torch.cuda.CUDAGraph / torch.compile mode='reduce-overhead')."),
            estimated_gain=round(gain, 4), level="kernel", kernel=None,
            evidence={"kernels": float(len(durations)), "mean_kernel_us": mean_us})]
