"""Memory-side micro-profilers: coalescing, bank conflicts, local memory, caches, DRAM traffic."""

from __future__ import annotations

import attrs

from kernelpro.api import Bottleneck, Finding, KernelProfile, ProfileContext, ProfileData

from kernelpro_plugins_ncu.micro.base import (REACHABLE_FRACTION, M, KernelMicroProfiler, clip, io_bytes, metric,
                                              reachable, roofline_fraction, short_name)


def _mem_factor(kernel: KernelProfile) -> float:
    """How much of the kernel's time memory traffic plausibly governs (0.3..1), from the
    busiest memory unit's throughput."""
    pct = max(kernel.metrics.get(M.MEM_THROUGHPUT_PCT, 0.0), kernel.metrics.get(M.DRAM_THROUGHPUT_PCT, 0.0),
              kernel.metrics.get(M.L1_THROUGHPUT_PCT, 0.0))
    return clip(pct / 100.0, 0.3, 1.0)


def _held_by_another_ceiling(bottleneck: Bottleneck | None, fraction: float) -> bool:
    """A kernel bound by something other than memory, at ``fraction`` of its roofline or more."""
    return bottleneck is not None and bottleneck.kind != "memory" and roofline_fraction(bottleneck) >= fraction


@attrs.frozen
class UncoalescedSettings:
    # bytes used per fetched 32-byte sector below this percentage: at least 15 % of the
    # fetched bytes are wasted (Nsight Compute flags excessive sectors at ~10 % and up; at 60 %
    # the corpora's partly coalesced loads and stores, 70-81 % used, went unnamed: a group
    # norm's, a sort's scattered stores, a roll, a reflection pad; all 16 kernels it adds have an
    # Nsight Compute result of that cause, 8 of them at 10 % or more)
    min_efficiency_pct: float = 85.0
    # wasted sectors' share of all the kernel's global sectors below which there is nothing
    # to gain: a reduction's one partial stored per program uses 4 of 32 bytes, but its
    # few hundred sectors are nothing next to its loads (in the H200 bench passes, 28 of 74
    # such findings wasted under 2 % of the sectors, with estimated gains of at most 0.0075)
    min_waste_share: float = 0.02
    # a kernel with too little work to fill the GPU: its wasted sectors still add memory
    # latency to its few waves, but only where there are enough of them (in the corpora, the
    # Nsight Compute results on such kernels came with 1,000 to 280,000 wasted sectors; a
    # one-block kernel wasting a few sectors has nothing to gain)
    min_wasted_sectors_little_work: float = 1024.0
    # a kernel bound by its compute ceiling at this fraction of its roofline or more gets
    # at_roofline's finding only: bytes do not set its time (at_roofline's own threshold;
    # a memory-bound kernel keeps the finding, its wasted bytes are the ones to cut)
    max_roofline_fraction_not_memory: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)


class UncoalescedGlobalAccess(KernelMicroProfiler):
    name = "uncoalesced_global"
    title = "Uncoalesced global memory access"
    description = "global loads/stores that use only part of each 32-byte sector they fetch"
    Settings = UncoalescedSettings
    # wasted sectors cost memory time whatever the verdict; the gain scales with how busy
    # the memory system is (_mem_factor)
    applies_to = frozenset({"memory", "latency", "compute", "too_little_work"})
    metrics = (M.GLD_BYTES_PER_SECTOR_PCT, M.GST_BYTES_PER_SECTOR_PCT, M.GLD_SECTORS, M.GLD_REQUESTS,
               M.GST_SECTORS, M.GST_REQUESTS)
    source_metrics = ("derived__memory_l2_theoretical_sectors_global_excessive",)

    def check(self, kernel, share, index, profile, bottleneck, context):
        if _held_by_another_ceiling(bottleneck, self.settings.max_roofline_fraction_not_memory):
            return None
        parts = []
        waste_sectors = 0.0
        total_sectors = 0.0
        ev = {}
        for op, pct_name, sectors_name, requests_name in (
                ("loads", M.GLD_BYTES_PER_SECTOR_PCT, M.GLD_SECTORS, M.GLD_REQUESTS),
                ("stores", M.GST_BYTES_PER_SECTOR_PCT, M.GST_SECTORS, M.GST_REQUESTS)):
            pct = metric(kernel, pct_name)
            sectors = metric(kernel, sectors_name) or 0.0
            requests = metric(kernel, requests_name) or 0.0
            total_sectors += sectors
            # no byte counted in sectors fetched: the accesses are not ones the byte count sees
            # (asynchronous copies to shared memory on some GPUs), not a waste of every byte
            if pct is None or pct <= 0 or sectors <= 0:
                continue
            ev[f"{op}_bytes_per_sector_pct"] = pct
            ev[f"{op}_sectors"] = sectors
            if requests > 0:
                ev[f"{op}_sectors_per_request"] = sectors / requests
            if pct < self.settings.min_efficiency_pct:
                waste_sectors += sectors * (1 - pct / 100.0)
                per_req = f", {sectors / requests:.1f} sectors per request" if requests else ""
                parts.append(f"global {op} use {pct:.1f}% of each fetched 32-byte sector "
                             f"({pct * 0.32:.1f} of 32 bytes){per_req}")
        if not parts or total_sectors <= 0:
            return None
        waste = waste_sectors / total_sectors
        if waste < self.settings.min_waste_share:
            return None
        if (bottleneck is not None and bottleneck.kind == "too_little_work"
                and waste_sectors < self.settings.min_wasted_sectors_little_work):
            return None
        # the rewritten kernel still moves the DRAM bytes the waste did not add (L2 absorbs
        # most of a column walk's extra sectors): it cannot beat those bytes at the practical
        # share of the roofline (the calibration pairs' transposes: 74 % estimated without
        # this bound, 52 % realized)
        useful = sum((metric(kernel, s_name) or 0.0) * 32.0 * (metric(kernel, p_name) or 100.0) / 100.0
                     for p_name, s_name in ((M.GLD_BYTES_PER_SECTOR_PCT, M.GLD_SECTORS),
                                            (M.GST_BYTES_PER_SECTOR_PCT, M.GST_SECTORS)))
        dram = M.dram_bytes(kernel.metrics)
        dram_waste = clip((dram - useful) / dram) if dram > 0 else 0.0
        gain = share * min(waste * _mem_factor(kernel), self.headroom(bottleneck, kept=1 - dram_waste))
        return self.finding(
            kernel, share, index, profile, gain,
            message="; ".join(parts) + f". {waste:.0%} of the global sectors moved are wasted bytes.",
            action=("Make consecutive threads (threadIdx.x) touch consecutive addresses: swap the index "
                    "roles so the fastest-varying thread index walks the contiguous dimension, or stage "
                    "the tile through shared memory (coalesced loads, transposed reads from a padded "
                    "tile); use 16-byte vector accesses (float4) on contiguous data."),
            evidence=ev)


@attrs.frozen
class BankConflictSettings:
    # shared wavefronts per shared load (or store) instruction above this: accesses are
    # serialised (1.0 is conflict-free for 32-bit accesses)
    max_wavefronts_per_inst: float = 1.5
    # share of the loads' (or the stores') shared wavefronts caused by bank conflicts above
    # which we report; loads and stores are judged apart (a sort's conflicting stores hide
    # behind its conflict-free loads when summed; Nsight Compute names such stores from 25 %)
    min_conflict_share: float = 0.25
    # a kernel at this fraction of its roofline or more gets at_roofline's finding only: its
    # DRAM bytes or its FLOPs, not the shared pipe, set its time (at_roofline's threshold)
    max_roofline_fraction: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)


class SharedBankConflicts(KernelMicroProfiler):
    name = "shared_bank_conflicts"
    title = "Shared-memory bank conflicts"
    description = "shared loads/stores serialised into several wavefronts by bank conflicts"
    Settings = BankConflictSettings
    # launch-bound kernels too: their conflicting shared accesses lengthen every block's
    # critical path (in the corpora, the 12 such kernels it names all have an Nsight Compute
    # shared-memory result, 6-36 %)
    applies_to = frozenset({"memory", "latency", "compute", "too_little_work"})
    metrics = (M.SHARED_LD_CONFLICTS, M.SHARED_ST_CONFLICTS, M.SHARED_LD_WAVEFRONTS,
               M.SHARED_ST_WAVEFRONTS, M.SHARED_LD_INST, M.SHARED_ST_INST)
    source_metrics = ("derived__memory_l1_wavefronts_shared_excessive",)

    def check(self, kernel, share, index, profile, bottleneck, context):
        s = self.settings
        if roofline_fraction(bottleneck) >= s.max_roofline_fraction:
            return None
        conflicts = wavefronts = inst = 0.0
        parts, flagged = [], False
        for op, c_name, w_name, i_name in (
                ("loads", M.SHARED_LD_CONFLICTS, M.SHARED_LD_WAVEFRONTS, M.SHARED_LD_INST),
                ("stores", M.SHARED_ST_CONFLICTS, M.SHARED_ST_WAVEFRONTS, M.SHARED_ST_INST)):
            c, w, i = (metric(kernel, c_name) or 0.0), (metric(kernel, w_name) or 0.0), (metric(kernel, i_name) or 0.0)
            conflicts, wavefronts, inst = conflicts + c, wavefronts + w, inst + i
            if i <= 0 or w <= 0:
                continue
            bad = w / i > s.max_wavefronts_per_inst and c / w >= s.min_conflict_share
            flagged = flagged or bad
            parts.append(f"shared {op}: {w / i:.1f} wavefronts per instruction"
                         + (f", {c / w:.0%} of them from bank conflicts" if bad else ""))
        if not flagged:
            return None
        per_inst = wavefronts / inst
        conflict_share = conflicts / wavefronts
        # each conflict adds one wavefront: without them the shared pipe does this much less
        # (wide accesses take several wavefronts without any conflict)
        excess = conflict_share
        l1 = clip(kernel.metrics.get(M.L1_THROUGHPUT_PCT, 50.0) / 100.0, 0.3, 1.0)
        # the DRAM bytes stay: no more than reaching the practical share of the roofline
        gain = share * min(excess * l1, self.headroom(bottleneck))
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"{'; '.join(parts)} (1.0 is conflict-free); {conflict_share:.0%} of the "
                     f"{wavefronts:.3g} shared wavefronts come from bank conflicts ({conflicts:.3g})."),
            action=("Spread each warp's shared accesses over the 32 banks: pad the row length "
                    "(float tile[32][33] instead of [32][32]) or XOR-swizzle the column index; read "
                    "rows, not columns, of a shared tile within a warp."),
            evidence={"wavefronts_per_instruction": per_inst, "conflict_share": conflict_share,
                      "bank_conflicts": conflicts, "shared_wavefronts": wavefronts,
                      "shared_instructions": inst})


@attrs.frozen
class LocalMemorySettings:
    # local-memory sectors above this share of global+local sectors are worth removing
    min_local_share: float = 0.01
    # as uncoalesced_global's: a compute-bound kernel at its roofline gets at_roofline only
    max_roofline_fraction_not_memory: float = 0.75
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)


class LocalMemorySpilling(KernelMicroProfiler):
    name = "local_memory"
    title = "Local-memory traffic (register spills or stack arrays)"
    description = "per-thread data living in local memory: register spills, run-time-indexed arrays"
    Settings = LocalMemorySettings
    applies_to = frozenset({"any"})
    metrics = (M.LOCAL_LD_SECTORS, M.LOCAL_ST_SECTORS, M.LOCAL_LD_INST, M.LOCAL_ST_INST,
               M.GLD_SECTORS, M.GST_SECTORS, M.REGISTERS_PER_THREAD)
    source_metrics = ("memory_l2_theoretical_sectors_local",)

    def check(self, kernel, share, index, profile, bottleneck, context):
        if _held_by_another_ceiling(bottleneck, self.settings.max_roofline_fraction_not_memory):
            return None
        local = (metric(kernel, M.LOCAL_LD_SECTORS) or 0.0) + (metric(kernel, M.LOCAL_ST_SECTORS) or 0.0)
        local_inst = (metric(kernel, M.LOCAL_LD_INST) or 0.0) + (metric(kernel, M.LOCAL_ST_INST) or 0.0)
        glob = (metric(kernel, M.GLD_SECTORS) or 0.0) + (metric(kernel, M.GST_SECTORS) or 0.0)
        if local <= 0:
            return None
        local_share = local / (local + glob) if local + glob > 0 else 1.0
        if local_share < self.settings.min_local_share:
            return None
        regs = metric(kernel, M.REGISTERS_PER_THREAD)
        regs_txt = f" with {regs:.0f} registers per thread" if regs else ""
        # the local traffic goes away with the spills: the bytes left are the global ones (the
        # calibration pair: 95 % saved where the old 0.6 cap estimated 60 %)
        gain = share * min(clip(local_share, 0.0, 0.9), self.headroom(bottleneck, kept=1 - local_share))
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"{local:.3g} local-memory sectors ({local_share:.0%} of global+local sector traffic) "
                     f"from {local_inst:.3g} local load/store instructions{regs_txt}: thread-private data "
                     f"spills to memory."),
            action=("Keep per-thread state in registers: index small arrays only with compile-time "
                    "constants (fully unrolled loops), relax the register cap (__launch_bounds__ with a "
                    "smaller minBlocksPerSM, no -maxrregcount), shrink live accumulators, or move large "
                    "per-thread arrays to shared memory."),
            evidence={"local_sectors": local, "local_instructions": local_inst, "local_share": local_share,
                      "registers_per_thread": regs})


@attrs.frozen
class CacheHitRateSettings:
    # L2 hit rate below this while the kernel re-reads data: reuse misses the cache
    max_l2_hit_pct: float = 50.0
    # DRAM reads above this multiple of the forward's inputs+parameters mean data is re-read
    min_reread_factor: float = 1.5
    # the share of its roofline a rewrite is assumed to reach: gains stop there (the
    # calibration pairs' rewrites reached 72-86 %)
    reachable_fraction: float = attrs.field(default=REACHABLE_FRACTION, validator=reachable)


class CacheHitRate(KernelMicroProfiler):
    name = "cache_hit_rate"
    title = "Data reuse missing L1/L2"
    description = "re-read data that misses L2 (and L1) and comes from DRAM again"
    Settings = CacheHitRateSettings
    applies_to = frozenset({"memory", "latency"})
    metrics = (M.L1_HIT_PCT, M.L2_HIT_PCT, M.L2_READ_SECTORS_FROM_L1, M.DRAM_READ_BYTES, M.GLD_SECTORS)

    def check(self, kernel, share, index, profile, bottleneck, context):
        l2 = metric(kernel, M.L2_HIT_PCT)
        dram_read = metric(kernel, M.DRAM_READ_BYTES)
        io = io_bytes(profile)
        unique_in = io.get("input_bytes", 0.0) + io.get("param_bytes", 0.0)
        if l2 is None or dram_read is None or unique_in <= 0:
            return None  # without the forward's input size a low hit rate may be plain streaming
        factor = dram_read / unique_in
        if l2 >= self.settings.max_l2_hit_pct or factor < self.settings.min_reread_factor:
            return None
        l1 = metric(kernel, M.L1_HIT_PCT)
        l1_txt = f", L1 hit rate {l1:.0f}%" if l1 is not None else ""
        gain = clip(1 - 1 / factor, 0, 0.9) * _mem_factor(kernel)
        seconds = (kernel.duration_ns or 0.0) * 1e-9
        if context.gpu is not None and seconds > 0:
            # a rewrite that reads each input once and writes each output once cannot beat
            # those bytes at the practical share of the bandwidth; it saves the rest of the
            # kernel's time (the calibration pair: 87 % estimated this way, 87 % realized,
            # where re-read share x memory busyness said 41 %: the rewrite also dropped the
            # redundant loads' L1/L2 traffic, not only their DRAM bytes)
            minimum = unique_in + io.get("output_bytes", 0.0)
            floor_s = minimum / (context.gpu.dram_bandwidth_gbs * 1e9 * self.reach())
            gain = clip(1 - floor_s / seconds, 0, 0.9)
        gain *= share
        return self.finding(
            kernel, share, index, profile, gain,
            message=(f"reads {dram_read / 1e6:.0f} MB from DRAM, {factor:.1f}x the forward's "
                     f"{unique_in / 1e6:.0f} MB of inputs and parameters, with an L2 hit rate of {l2:.0f}%"
                     f"{l1_txt}: data is reused but evicted before the reuse."),
            action=("Shorten the reuse distance: process the data in L2-sized chunks (tens of MB), "
                    "reorder or swizzle the block schedule so blocks sharing data run together, or "
                    "load each tile once into shared memory/registers and reuse it there."),
            evidence={"l2_hit_pct": l2, "l1_hit_pct": l1, "dram_read_bytes": dram_read,
                      "input_bytes": unique_in, "reread_factor": factor})


@attrs.frozen
class DramExcessSettings:
    # DRAM bytes above this multiple of the forward's minimum traffic (inputs, parameters,
    # outputs each moved once) are reported
    min_excess_factor: float = 1.5
    min_dram_bytes: float = 1e6  # ignore forwards that move less than this


class DramTrafficExcess(KernelMicroProfiler):
    name = "dram_excess"
    title = "DRAM traffic above the problem's minimum"
    description = "more DRAM bytes than reading inputs/parameters and writing outputs once needs"
    Settings = DramExcessSettings
    applies_to = frozenset({"memory"})
    metrics = (M.DRAM_READ_BYTES, M.DRAM_WRITE_BYTES)

    def analyze(self, profile: ProfileData, bottleneck: Bottleneck | None,
                context: ProfileContext) -> list[Finding]:
        if profile.level != "kernel" or not profile.kernels:
            return []
        io = io_bytes(profile)
        minimum = io.get("input_bytes", 0.0) + io.get("param_bytes", 0.0) + io.get("output_bytes", 0.0)
        dram = sum(M.dram_bytes(k.metrics) for k in profile.kernels)
        if minimum <= 0 or dram < self.settings.min_dram_bytes:
            return []
        factor = dram / minimum
        if factor < self.settings.min_excess_factor:
            return []
        kernels = sorted(profile.kernels, key=lambda k: -M.dram_bytes(k.metrics))
        top = ", ".join(f"{short_name(k.name, 40)} {M.dram_bytes(k.metrics) / 1e6:.0f} MB" for k in kernels[:3])
        n = len(profile.kernels)
        mem_fraction = bottleneck.evidence.get("memory_time_fraction", 1.0) if bottleneck else 1.0
        gain = clip(1 - 1 / factor, 0, 0.95) * clip(mem_fraction, 0.3, 1.0)
        fusion = (f" The forward runs {n} kernels: intermediates between them go through DRAM."
                  if n > 1 else "")
        action = ("Fuse the kernels so intermediates stay in registers/shared memory, and read each "
                  "input once (tile for reuse instead of re-reading)." if n > 1 else
                  "Read each input once: tile so that reused data stays on chip (shared memory, L2-sized "
                  "chunks) and avoid writing then re-reading temporaries.")
        from kernelpro_plugins_ncu.micro.base import severity_for

        return [Finding(
            tool=self.name, severity=severity_for(gain), title=self.title,
            message=(f"the forward moves {dram / 1e6:.0f} MB through DRAM, {factor:.1f}x the "
                     f"{minimum / 1e6:.0f} MB minimum (inputs {io.get('input_bytes', 0) / 1e6:.0f} MB + "
                     f"parameters {io.get('param_bytes', 0) / 1e6:.0f} MB + outputs "
                     f"{io.get('output_bytes', 0) / 1e6:.0f} MB, each once). Largest: {top}.{fusion}"),
            action=action, estimated_gain=round(gain, 4), level="kernel",
            kernel=kernels[0].name, evidence={"dram_bytes": dram, "minimum_bytes": minimum,
                                              "excess_factor": factor, "kernels": float(n)})]
