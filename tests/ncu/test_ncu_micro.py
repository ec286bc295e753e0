"""Each micro-profiler on synthetic counters: fires on the flaw, stays quiet without it,
and fills every field of its findings."""

import pytest

from kernelpro.api import ProfileContext
from kernelpro.gpus import SPECS
from kernelpro.records import SEVERITIES, Bottleneck

from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu.micro import ALL_MICRO_PROFILERS
from kernelpro_plugins_ncu.micro import execution as X
from kernelpro_plugins_ncu.micro import memory as Mem
from kernelpro_plugins_ncu.micro import occupancy as O

from ncu_helpers import kernel, profile

H200 = next(s for s in SPECS if s.name.startswith("H200"))
CTX = ProfileContext(gpu=H200, device="cuda")
LAUNCH = {M.GRID_SIZE: 2048, M.BLOCK_SIZE: 256, M.SM_COUNT: 132, M.WAVES_PER_SM: 2.0}


def bn(kind="memory", fraction=0.3, **ev):
    return Bottleneck(kind=kind, summary="", roofline_fraction=fraction, evidence=ev, classifier="roofline")


def run(cls, *kernels, bottleneck=None, io=None):
    return cls().analyze(profile(*kernels, io=io), bottleneck or bn(), CTX)


def check_finding(f, cls):
    assert f.tool == cls.name and f.severity in SEVERITIES and f.title and f.message and f.action
    assert f.estimated_gain is not None and 0 <= f.estimated_gain <= 1
    assert any(ch.isdigit() for ch in f.message)  # the numbers that justify it


CASES = [
    (Mem.UncoalescedGlobalAccess,
     {M.GLD_BYTES_PER_SECTOR_PCT: 12.5, M.GLD_SECTORS: 8e6, M.GLD_REQUESTS: 2.5e5, M.GST_BYTES_PER_SECTOR_PCT: 100.0,
      M.GST_SECTORS: 1e6, M.GST_REQUESTS: 2.5e5, M.MEM_THROUGHPUT_PCT: 80.0},
     {M.GLD_BYTES_PER_SECTOR_PCT: 100.0, M.GLD_SECTORS: 1e6, M.GLD_REQUESTS: 2.5e5, M.GST_BYTES_PER_SECTOR_PCT: 100.0,
      M.GST_SECTORS: 1e6, M.GST_REQUESTS: 2.5e5}),
    (Mem.SharedBankConflicts,
     {M.SHARED_LD_CONFLICTS: 3.1e7, M.SHARED_LD_WAVEFRONTS: 3.2e7, M.SHARED_LD_INST: 1e6, M.SHARED_ST_INST: 1e6,
      M.SHARED_ST_WAVEFRONTS: 1e6, M.SHARED_ST_CONFLICTS: 0.0},
     {M.SHARED_LD_CONFLICTS: 1e3, M.SHARED_LD_WAVEFRONTS: 1e6, M.SHARED_LD_INST: 1e6, M.SHARED_ST_INST: 1e6,
      M.SHARED_ST_WAVEFRONTS: 1e6, M.SHARED_ST_CONFLICTS: 0.0}),
    (Mem.LocalMemorySpilling,
     {M.LOCAL_LD_SECTORS: 5e6, M.LOCAL_ST_SECTORS: 4e6, M.LOCAL_LD_INST: 1e6, M.GLD_SECTORS: 1e6,
      M.GST_SECTORS: 1e6, M.REGISTERS_PER_THREAD: 32},
     {M.LOCAL_LD_SECTORS: 0.0, M.LOCAL_ST_SECTORS: 0.0, M.GLD_SECTORS: 1e6, M.GST_SECTORS: 1e6}),
    (O.OccupancyLimiter,
     {M.THEORETICAL_OCCUPANCY_PCT: 6.25, M.LIMIT_SMEM: 1, M.LIMIT_REGISTERS: 16, M.LIMIT_WARPS: 16,
      M.LIMIT_BLOCKS: 32, M.BLOCK_SIZE: 128, M.SMEM_DYNAMIC: 204800},
     {M.THEORETICAL_OCCUPANCY_PCT: 100.0, M.LIMIT_SMEM: 8, M.LIMIT_REGISTERS: 8, M.LIMIT_WARPS: 8, M.LIMIT_BLOCKS: 32}),
    (O.AchievedOccupancyGap,
     {M.THEORETICAL_OCCUPANCY_PCT: 100.0, M.ACHIEVED_OCCUPANCY_PCT: 12.0, M.WAVES_PER_SM: 15.5},
     {M.THEORETICAL_OCCUPANCY_PCT: 100.0, M.ACHIEVED_OCCUPANCY_PCT: 90.0}),
    (O.TailEffect, {M.WAVES_PER_SM: 1.03, M.GRID_SIZE: 272}, {M.WAVES_PER_SM: 8.0, M.GRID_SIZE: 2112}),
    (O.UnitImbalance,
     {M.SM_ACTIVE_CYCLES_AVG: 900.0, M.SM_ACTIVE_CYCLES_MAX: 7600.0, M.SM_ELAPSED_CYCLES: 10500.0},
     {M.SM_ACTIVE_CYCLES_AVG: 3.2e5, M.SM_ACTIVE_CYCLES_MAX: 3.3e5, M.SM_ELAPSED_CYCLES: 3.3e5,
      M.L2_ACTIVE_CYCLES_AVG: 2.8e5, M.L2_ACTIVE_CYCLES_MAX: 2.9e5, M.L2_THROUGHPUT_PCT: 60.0}),
    (O.SmallGrid, {M.GRID_SIZE: 4, M.BLOCK_SIZE: 128, M.SM_COUNT: 132, M.WAVES_PER_SM: 0.002},
     {M.GRID_SIZE: 2112, M.BLOCK_SIZE: 256, M.SM_COUNT: 132, M.WAVES_PER_SM: 2.0}),
    (X.WarpStallReasons,
     {M.stall_metric("long_scoreboard"): 40.0, M.stall_metric("wait"): 2.0, M.stall_metric("selected"): 1.0,
      M.ISSUE_ACTIVE_PCT: 3.0},
     {M.stall_metric("long_scoreboard"): 0.0, M.stall_metric("wait"): 0.0}),
    (X.IssueSlotUtilization, {M.ISSUE_ACTIVE_PCT: 3.0, M.ELIGIBLE_WARPS: 0.03, M.ACTIVE_WARPS_PER_SCHEDULER: 1.0},
     {M.ISSUE_ACTIVE_PCT: 70.0, M.ELIGIBLE_WARPS: 3.0}),
    (X.IssueBound, {M.ISSUE_ACTIVE_PCT: 84.0, M.PIPE_ALU_PCT: 59.0, M.PIPE_FMA_PCT: 33.0, M.INST_EXECUTED: 8.7e7},
     {M.ISSUE_ACTIVE_PCT: 84.0, M.PIPE_ALU_PCT: 90.0}),
    (X.PipeBound, {M.PIPE_ALU_PCT: 82.0, M.PIPE_FMA_PCT: 14.6, M.ISSUE_ACTIVE_PCT: 73.0},
     {M.PIPE_ALU_PCT: 40.0, M.PIPE_LSU_PCT: 30.0, M.PIPE_FMA_PCT: 90.0}),
    (X.ThreadDivergence, {M.THREADS_PER_INST: 4.0, M.BRANCH_DIVERGENT: 1e5, M.BRANCH_TARGETS: 2e5},
     {M.THREADS_PER_INST: 31.9}),
    (X.TensorCoresIdle,
     {M.FFMA: 8.6e9, M.SHARED_LD_INST: 1.3e8, M.GLOBAL_LD_INST: 1e6, M.PIPE_FMA_PCT: 70.0},
     {M.FFMA: 8.6e9, M.SHARED_LD_INST: 0.0, M.GLOBAL_LD_INST: 1.3e5, M.PIPE_FMA_PCT: 90.0}),
    (X.UnfusedFp32, {M.FMUL: 4e9, M.FADD: 4e9, M.FFMA: 0.0, M.INST_EXECUTED: 2.6e8, M.PIPE_FMA_PCT: 60.0},
     {M.FMUL: 0.0, M.FADD: 1e6, M.FFMA: 4e9, M.INST_EXECUTED: 1.3e8, M.PIPE_FMA_PCT: 60.0}),
]


@pytest.mark.parametrize("cls,bad,good", CASES, ids=[c[0].name for c in CASES])
def test_fires_on_flaw_and_quiet_without(cls, bad, good):
    findings = run(cls, kernel("kp_bad(float*)", 1e6, **{**LAUNCH, **bad}),
                   bottleneck=bn(kind=next(iter(cls.applies_to - {"any"}), "memory")))
    assert len(findings) == 1
    check_finding(findings[0], cls)
    assert findings[0].kernel == "kp_bad(float*)"
    assert run(cls, kernel("kp_good(float*)", 1e6, **{**LAUNCH, **good})) == []


def test_cache_hit_rate_needs_reuse_and_misses():
    ks = {M.L2_HIT_PCT: 12.0, M.L1_HIT_PCT: 3.0, M.DRAM_READ_BYTES: 2.1e9, M.MEM_THROUGHPUT_PCT: 85.0}
    io = {"input_bytes": 2.68e8, "output_bytes": 2.68e8}
    f = run(Mem.CacheHitRate, kernel("k", 1e6, **ks), io=io)
    check_finding(f[0], Mem.CacheHitRate)
    assert f[0].evidence["reread_factor"] == pytest.approx(2.1e9 / 2.68e8)
    # streaming once: low hit rate is expected, nothing to say
    assert run(Mem.CacheHitRate, kernel("k", 1e6, **{**ks, M.DRAM_READ_BYTES: 2.7e8}), io=io) == []
    # no I/O sizes: cannot tell reuse from streaming
    assert run(Mem.CacheHitRate, kernel("k", 1e6, **ks)) == []
    # the gain: the kernel's 1 ms against reading the inputs and writing the outputs once at
    # 80 % of the DRAM bandwidth
    floor = (2.68e8 + 2.68e8) / (H200.dram_bandwidth_gbs * 1e9 * 0.8)
    assert f[0].estimated_gain == pytest.approx(1 - floor / 1e-3, abs=1e-3)


def test_dram_excess_counts_all_kernels_against_io():
    io = {"input_bytes": 2.68e8, "output_bytes": 2.68e8, "param_bytes": 0}
    ks = [kernel(f"kp_chain_{i}", 1e5, **{M.DRAM_READ_BYTES: 2.68e8, M.DRAM_WRITE_BYTES: 2.68e8}) for i in range(3)]
    f = run(Mem.DramTrafficExcess, *ks, io=io)
    check_finding(f[0], Mem.DramTrafficExcess)
    assert f[0].evidence["excess_factor"] == pytest.approx(3.0)
    assert "3 kernels" in f[0].message and "Fuse" in f[0].action
    assert run(Mem.DramTrafficExcess, ks[0], io=io) == []


def test_launch_overhead_on_many_short_kernels():
    ks = [kernel(f"k{i}", 1500) for i in range(20)]
    f = run(O.LaunchDominated, *ks, bottleneck=bn("too_little_work"))
    check_finding(f[0], O.LaunchDominated)
    assert run(O.LaunchDominated, kernel("k", 1e6), kernel("k2", 1e6)) == []


def test_at_roofline_only_near_the_roof():
    hi = bn("memory", 0.9, dram_bytes=4.3e9, dram_bandwidth_achieved_gbs=4300.0, dram_bandwidth_peak_gbs=4800.0)
    f = run(X.AtRoofline, kernel("copy", 1e6), bottleneck=hi)
    assert f[0].severity == "info" and "90%" in f[0].message and f[0].estimated_gain == pytest.approx(0.1)
    assert "fuse" in f[0].action.lower()
    assert run(X.AtRoofline, kernel("copy", 1e6), bottleneck=bn("memory", 0.4)) == []


def test_unit_imbalance_gain_is_the_busiest_units_excess():
    k = kernel("k", 1e6, **{M.SM_ACTIVE_CYCLES_AVG: 900.0, M.SM_ACTIVE_CYCLES_MAX: 7600.0,
                            M.SM_ELAPSED_CYCLES: 10500.0, M.GRID_SIZE: 16, M.SM_COUNT: 132})
    f = run(O.UnitImbalance, k, bottleneck=bn("too_little_work", 0.01))[0]
    assert f.estimated_gain == pytest.approx((7600 - 900) / 10500, abs=1e-3)
    assert "16 blocks for 132 SMs" in f.message
    # an uneven L2 costs only as much as the L2 is busy
    l2 = kernel("k", 1e6, **{M.L2_ACTIVE_CYCLES_AVG: 1500.0, M.L2_ACTIVE_CYCLES_MAX: 3000.0, M.L2_THROUGHPUT_PCT: 10.0})
    assert run(O.UnitImbalance, l2)[0].estimated_gain == pytest.approx(0.05)


def test_unit_imbalance_within_the_sms_names_the_schedulers():
    """Evenly busy SMs whose four schedulers are not (a cuDNN LSTM's GEMM in corpus v4: SMs
    max 1.23x their average, schedulers 1.28x): the busiest scheduler sets the time."""
    k = kernel("k", 1e6, **{M.SM_ACTIVE_CYCLES_AVG: 15856.0, M.SM_ACTIVE_CYCLES_MAX: 19519.0,
                            M.SMSP_ACTIVE_CYCLES_AVG: 14983.0, M.SMSP_ACTIVE_CYCLES_MAX: 19195.0,
                            M.SM_ELAPSED_CYCLES: 23014.0, M.BLOCK_SIZE: 64})
    (f,) = run(O.UnitImbalance, k, bottleneck=bn("too_little_work", 0.29))
    check_finding(f, O.UnitImbalance)
    assert "sub-partition" in f.message and "(blocks of 2 warp(s))" in f.message
    assert f.estimated_gain == pytest.approx((19195 - 14983) / 23014, abs=1e-3)
    # schedulers as even as the SMs: nothing; uneven SMs: the SMs' finding alone
    even = kernel("k", 1e6, **{M.SMSP_ACTIVE_CYCLES_AVG: 18000.0, M.SMSP_ACTIVE_CYCLES_MAX: 19195.0})
    assert run(O.UnitImbalance, even) == []
    both = kernel("k", 1e6, **{M.SM_ACTIVE_CYCLES_AVG: 900.0, M.SM_ACTIVE_CYCLES_MAX: 7600.0,
                               M.SMSP_ACTIVE_CYCLES_AVG: 800.0, M.SMSP_ACTIVE_CYCLES_MAX: 7700.0})
    assert "sub-partition" not in run(O.UnitImbalance, both)[0].message


def test_uncoalesced_on_a_kernel_with_too_little_work_needs_enough_wasted_sectors():
    """A launch-bound transpose wasting 57 k of 74 k sectors is reported (its gain scaled by
    how busy memory is); a one-block kernel wasting a sector is not."""
    small = bn("too_little_work", 0.02)
    many = {M.GLD_BYTES_PER_SECTOR_PCT: 100.0, M.GLD_SECTORS: 16384.0, M.GLD_REQUESTS: 2048.0,
            M.GST_BYTES_PER_SECTOR_PCT: 12.5, M.GST_SECTORS: 57344.0, M.GST_REQUESTS: 2048.0, M.MEM_THROUGHPUT_PCT: 5.0}
    (f,) = run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **many), bottleneck=small)
    check_finding(f, Mem.UncoalescedGlobalAccess)
    assert f.estimated_gain < 0.3 * 0.7  # memory is 5 % busy: its share counts at the 0.3 floor
    few = {**many, M.GLD_SECTORS: 2.0, M.GST_SECTORS: 1.0, M.GLD_REQUESTS: 1.0, M.GST_REQUESTS: 1.0}
    assert run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **few), bottleneck=small) == []
    # a busier kernel is reported at any count, as before
    assert run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **few), bottleneck=bn("latency", 0.1))


def test_bank_conflicts_of_the_stores_are_not_hidden_by_clean_loads():
    """A segmented radix sort (corpus v4): loads 1.22 wavefronts per instruction with 2 %
    conflicts, stores 1.64 with 29 %; summed, 16 % of the wavefronts, below the threshold."""
    sort = {M.SHARED_LD_INST: 15.8e6, M.SHARED_LD_WAVEFRONTS: 19.3e6, M.SHARED_LD_CONFLICTS: 0.39e6,
            M.SHARED_ST_INST: 16.4e6, M.SHARED_ST_WAVEFRONTS: 26.8e6, M.SHARED_ST_CONFLICTS: 7.9e6,
            M.L1_THROUGHPUT_PCT: 60.0}
    (f,) = run(Mem.SharedBankConflicts, kernel("k", 1e6, **sort), bottleneck=bn("latency", 0.41))
    check_finding(f, Mem.SharedBankConflicts)
    assert "shared stores: 1.6 wavefronts per instruction, 29% of them from bank conflicts" in f.message
    assert "shared loads: 1.2 wavefronts per instruction;" in f.message
    # each conflict is one extra wavefront: the shared pipe's saving, as busy as L1 is
    assert f.estimated_gain == pytest.approx((0.39e6 + 7.9e6) / (19.3e6 + 26.8e6) * 0.6, abs=1e-3)
    # wide accesses take several wavefronts without a conflict: nothing to report
    wide = {**sort, M.SHARED_ST_CONFLICTS: 0.1e6}
    assert run(Mem.SharedBankConflicts, kernel("k", 1e6, **wide), bottleneck=bn("latency", 0.41)) == []
    # at the roofline, at_roofline speaks alone
    assert run(Mem.SharedBankConflicts, kernel("k", 1e6, **sort), bottleneck=bn("compute", 0.8)) == []


def test_partly_coalesced_loads_are_reported_below_85_percent_of_each_sector_used():
    """A group norm's loads use 22.7 of 32 bytes (70.8 %): 17.5 % of its sectors are waste."""
    norm = {M.GLD_BYTES_PER_SECTOR_PCT: 70.8, M.GLD_SECTORS: 3145728.0, M.GLD_REQUESTS: 393216.0,
            M.GST_BYTES_PER_SECTOR_PCT: 100.0, M.GST_SECTORS: 2097152.0, M.GST_REQUESTS: 262144.0,
            M.MEM_THROUGHPUT_PCT: 60.0}
    (f,) = run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **norm), bottleneck=bn("latency", 0.46))
    assert "loads use 70.8%" in f.message and "18% of the global sectors" in f.message
    assert run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **{**norm, M.GLD_BYTES_PER_SECTOR_PCT: 90.0}),
               bottleneck=bn("latency", 0.46)) == []


def test_unfused_fp32_counts_pairs_and_speaks_below_the_roofline_whatever_the_bound():
    """A softmax of torch.compile (corpus v1): 0.34 G FMUL, 0.85 G FADD, 1.2 G FFMA; at most
    0.34 G pairs, 14 % of the FP32 instructions, weighted by the FMA pipe's 49 %."""
    softmax = {M.FADD: 8.47e8, M.FMUL: 3.4e8, M.FFMA: 1.2e9, M.INST_EXECUTED: 1.2e8, M.PIPE_FMA_PCT: 49.0}
    (f,) = run(X.UnfusedFp32, kernel("k", 1e6, **softmax), bottleneck=bn("compute", 0.65))
    check_finding(f, X.UnfusedFp32)
    assert f.estimated_gain == pytest.approx(3.4e8 / (8.47e8 + 3.4e8 + 1.2e9) * 0.49, abs=1e-3)
    # memory-bound below the roofline: reported too; at the roofline: at_roofline alone
    assert run(X.UnfusedFp32, kernel("k", 1e6, **softmax), bottleneck=bn("memory", 0.62))
    assert run(X.UnfusedFp32, kernel("k", 1e6, **softmax), bottleneck=bn("memory", 0.8)) == []
    # adds alone: nothing to fuse
    assert run(X.UnfusedFp32, kernel("k", 1e6, **{**softmax, M.FMUL: 0.0}), bottleneck=bn("compute", 0.65)) == []


def test_uncoalesced_ignores_accesses_the_byte_count_does_not_see():
    """Sectors with no byte counted (0 %: copies straight to shared memory, as a Triton GEMM
    on the H200 makes) are not wasted bytes."""
    unseen = {M.GLD_BYTES_PER_SECTOR_PCT: 0.0, M.GLD_SECTORS: 8e6, M.GLD_REQUESTS: 2.5e5,
              M.GST_BYTES_PER_SECTOR_PCT: 100.0, M.GST_SECTORS: 1e6, M.GST_REQUESTS: 2.5e5, M.MEM_THROUGHPUT_PCT: 80.0}
    assert run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **unseen)) == []


def test_issue_slots_memory_bound_and_headroom():
    starved = kernel("k", 1e6, **{M.ISSUE_ACTIVE_PCT: 10.0, M.ELIGIBLE_WARPS: 0.2})
    # waiting on DRAM at the roofline (at_roofline's 75 %) is the memory verdict itself
    assert run(X.IssueSlotUtilization, starved, bottleneck=bn("memory", 0.75)) == []
    # below it a memory-bound kernel keeps too few bytes in flight; the gain is never more
    # than reaching the practical share (80 %) of the roofline would save
    f = run(X.IssueSlotUtilization, starved, bottleneck=bn("memory", 0.6))[0]
    assert f.estimated_gain == pytest.approx(1 - 0.6 / 0.8)
    f = run(X.IssueSlotUtilization, starved, bottleneck=bn("latency", 0.7))[0]
    assert f.estimated_gain == pytest.approx(1 - 0.7 / 0.8)
    # far below it: the idle issue share comes back (1 - 10 / 50 of the time), bound_share of
    # it (1.0 since the rewrites of corpus kernels were measured; configurable)
    f = run(X.IssueSlotUtilization, starved, bottleneck=bn("too_little_work", 0.01))[0]
    assert f.estimated_gain == pytest.approx(1 - 10 / 50)
    half = X.IssueSlotUtilization(X.IssueSlotSettings(bound_share=0.5))
    (f,) = half.analyze(profile(starved), bn("too_little_work", 0.01), CTX)
    assert f.estimated_gain == pytest.approx(0.5 * (1 - 10 / 50))


def test_only_at_roofline_speaks_at_the_roofline():
    gemm_like = {M.FFMA: 8.6e9, M.SHARED_LD_INST: 1.3e8, M.GLOBAL_LD_INST: 1e6, M.PIPE_FMA_PCT: 70.0}
    assert run(X.TensorCoresIdle, kernel("k", 1e6, **gemm_like), bottleneck=bn("memory", 0.85)) == []
    busy = {M.ISSUE_ACTIVE_PCT: 84.0, M.PIPE_ALU_PCT: 59.0}
    assert run(X.IssueBound, kernel("k", 1e6, **busy), bottleneck=bn("compute", 0.8)) == []
    low = {M.THEORETICAL_OCCUPANCY_PCT: 12.5, M.LIMIT_REGISTERS: 1, M.LIMIT_SMEM: 2}
    assert run(O.OccupancyLimiter, kernel("k", 1e6, **low), bottleneck=bn("memory", 0.81)) == []
    assert run(O.OccupancyLimiter, kernel("k", 1e6, **low), bottleneck=bn("memory", 0.5))
    strided = {M.GLD_BYTES_PER_SECTOR_PCT: 12.5, M.GLD_SECTORS: 8e6, M.GLD_REQUESTS: 2.5e5}
    # a compute-bound kernel at its roofline: bytes do not set its time
    assert run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **strided), bottleneck=bn("compute", 0.8)) == []
    # a memory-bound one keeps it: those are the bytes to cut
    assert run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **strided), bottleneck=bn("memory", 0.8))
    spill = {M.LOCAL_LD_SECTORS: 5e6, M.LOCAL_ST_SECTORS: 4e6, M.GLD_SECTORS: 1e6}
    assert run(Mem.LocalMemorySpilling, kernel("k", 1e6, **spill), bottleneck=bn("compute", 0.8)) == []


def test_pipe_bound_names_the_pipe_and_its_gain_stops_at_the_next_pipe():
    # PyTorch's kthvalue on the H200 (corpus v4): ALU 82 %, FMA 14.6 %, 4.6 % of the FLOP roofline
    (f,) = run(X.PipeBound, kernel("k", 1e6, **{M.PIPE_ALU_PCT: 82.0, M.PIPE_FMA_PCT: 14.6}),
               bottleneck=bn("compute", 0.046))
    assert "ALU" in f.message and "integer" in f.action
    assert f.estimated_gain == pytest.approx(1 - 14.6 / 82.0, abs=1e-3)
    # LSU-bound with the ALU close behind: little to gain from moving work between them
    (f,) = run(X.PipeBound, kernel("k", 1e6, **{M.PIPE_LSU_PCT: 85.0, M.PIPE_ALU_PCT: 80.0}),
               bottleneck=bn("compute", 0.2))
    assert "LSU" in f.message and f.estimated_gain == pytest.approx(1 - 80.0 / 85.0, abs=1e-3)
    # at its roofline, or bound by memory (the pipeline gates on applies_to): not this finding's
    busy = {M.PIPE_ALU_PCT: 90.0}
    assert run(X.PipeBound, kernel("k", 1e6, **busy), bottleneck=bn("compute", 0.8)) == []
    assert X.PipeBound.applies_to == {"compute", "latency"}


def test_warp_stalls_quiet_at_the_roofline():
    k = kernel("k", 1e6, **{M.stall_metric("long_scoreboard"): 40.0, M.ISSUE_ACTIVE_PCT: 3.0})
    assert run(X.WarpStallReasons, k, bottleneck=bn("memory", 0.92)) == []


def test_time_share_scales_gain_and_tiny_kernels_are_skipped():
    bad = {M.THREADS_PER_INST: 4.0}
    one = run(X.ThreadDivergence, kernel("a", 1e6, **bad))[0].estimated_gain
    half = run(X.ThreadDivergence, kernel("a", 1e6, **bad), kernel("b", 1e6))[0].estimated_gain
    assert half == pytest.approx(one / 2, rel=1e-3)
    assert run(X.ThreadDivergence, kernel("a", 1e3, **bad), kernel("b", 1e6)) == []


def test_source_lines_from_hotspots():
    p = profile(kernel("k", 1e6, **{M.THREADS_PER_INST: 4.0}))
    p.payload["source_hotspots"] = [{"smsp__branch_targets_threads_divergent": [("kernels.cu:170", 42.0)]}]
    f = X.ThreadDivergence().analyze(p, bn("compute"), CTX)
    assert f[0].source_lines == ("kernels.cu:170 (smsp__branch_targets_threads_divergent: 42)",)


def test_registry_shape():
    names = [c.name for c in ALL_MICRO_PROFILERS]
    assert len(names) == len(set(names)) >= 14
    kinds = {"memory", "compute", "latency", "too_little_work", "unknown", "any"}
    for cls in ALL_MICRO_PROFILERS:
        assert cls.applies_to and cls.applies_to <= kinds, cls.name
        assert all(isinstance(m, str) and "__" in m for m in cls.metrics), cls.name
        assert cls.Settings() is not None and cls.description


def test_uncoalesced_partial_stores_that_waste_nothing_that_matters_are_not_reported():
    """A full reduction's one fp32 partial per program: its stores use 4 of 32 bytes of a
    sector, but 528 store sectors against 67 M load sectors waste nothing to speak of (bench
    pass 7 on the H200, L1 #98's winner)."""
    few = {M.GLD_BYTES_PER_SECTOR_PCT: 100.0, M.GLD_SECTORS: 67108864.0, M.GLD_REQUESTS: 1.68e7,
           M.GST_BYTES_PER_SECTOR_PCT: 12.5, M.GST_SECTORS: 528.0, M.GST_REQUESTS: 528.0, M.MEM_THROUGHPUT_PCT: 80.0}
    assert run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **few)) == []
    # the same stores as a tenth of the traffic: reported
    many = {**few, M.GST_SECTORS: 67108864.0 / 9, M.GST_REQUESTS: 67108864.0 / 9}
    (f,) = run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **many))
    check_finding(f, Mem.UncoalescedGlobalAccess)
    assert "stores use 12.5%" in f.message


def test_tensor_cores_idle_needs_contraction_intensity_and_counts_the_whole_kernel():
    gemm_like = {M.FFMA: 8.6e9, M.SHARED_LD_INST: 1.3e8, M.GLOBAL_LD_INST: 1e6, M.PIPE_FMA_PCT: 70.0}
    fp32 = 2 * 8.6e9
    # a reduction or normalization whose load-to-FFMA ratio looks GEMM-like does a few FLOPs
    # per DRAM byte: tensor cores cannot speed it up
    norm = kernel("k", 1e6, **gemm_like, **{M.DRAM_READ_BYTES: fp32 / 4, M.DRAM_WRITE_BYTES: 0.0})
    assert run(X.TensorCoresIdle, norm, bottleneck=bn("memory", 0.5)) == []
    # a contraction: the rewrite's time is its FLOPs at the TF32 rate or its DRAM bytes,
    # each at 80 % of the peak, against the kernel's 1 ms
    dram = fp32 / 400
    gemm = kernel("k", 1e6, **gemm_like, **{M.DRAM_READ_BYTES: dram, M.DRAM_WRITE_BYTES: 0.0})
    f = run(X.TensorCoresIdle, gemm, bottleneck=bn("compute", 0.3))[0]
    floor = max(fp32 / (H200.tf32_tflops * 1e12 * 0.8), dram / (H200.dram_bandwidth_gbs * 1e9 * 0.8))
    assert f.estimated_gain == pytest.approx(1 - floor / 1e-3, abs=1e-3)


def test_occupancy_limiter_gain_follows_the_resident_blocks_without_the_limiter():
    # shared memory allows 1 block per SM; registers 8, block size 16; the grid gives each of
    # 132 SMs 4 blocks: without the limiter 4 blocks are resident, a latency-bound kernel's
    # time falls to about a quarter
    low = {M.THEORETICAL_OCCUPANCY_PCT: 6.25, M.LIMIT_SMEM: 1, M.LIMIT_REGISTERS: 8, M.LIMIT_WARPS: 16,
           M.GRID_SIZE: 4 * 132, M.SM_COUNT: 132}
    f = run(O.OccupancyLimiter, kernel("k", 1e6, **low), bottleneck=bn("latency", 0.05))[0]
    assert f.estimated_gain == pytest.approx(0.75)
    # a memory-bound kernel: no more than reaching 80 % of its roofline
    f = run(O.OccupancyLimiter, kernel("k", 1e6, **low), bottleneck=bn("memory", 0.5))[0]
    assert f.estimated_gain == pytest.approx(1 - 0.5 / 0.8)
    # without the other limits or the grid: half the missing theoretical occupancy
    bare = {M.THEORETICAL_OCCUPANCY_PCT: 12.5, M.LIMIT_REGISTERS: 2}
    f = run(O.OccupancyLimiter, kernel("k", 1e6, **bare), bottleneck=bn("latency", 0.05))[0]
    assert f.estimated_gain == pytest.approx(0.5 * (1 - 12.5 / 100))


def test_occupancy_limiter_speaks_up_to_three_quarters_and_not_where_the_grid_never_reaches_the_limit():
    # the shape of PyTorch's im2col on the H200 (corpus v3): 1024-thread blocks, registers
    # allow one per SM (50 %), the warps two, the grid two per SM: half the warps it could hold
    half = {M.THEORETICAL_OCCUPANCY_PCT: 50.0, M.LIMIT_REGISTERS: 1, M.LIMIT_WARPS: 2, M.LIMIT_SMEM: 8,
            M.LIMIT_BLOCKS: 32, M.BLOCK_SIZE: 1024, M.REGISTERS_PER_THREAD: 58, M.GRID_SIZE: 256, M.SM_COUNT: 132}
    (f,) = run(O.OccupancyLimiter, kernel("k", 1e6, **half), bottleneck=bn("latency", 0.03))
    assert f.estimated_gain == pytest.approx(0.5) and "registers" in f.message
    # three quarters (histc's and embedding-bag's kernels, corpus v3): registers allow 3
    # blocks, the warps 4, the grid 4 per SM: a quarter of the time
    quarter = {**half, M.THEORETICAL_OCCUPANCY_PCT: 75.0, M.LIMIT_REGISTERS: 3, M.LIMIT_WARPS: 4,
               M.BLOCK_SIZE: 512, M.GRID_SIZE: 4 * 132}
    (f,) = run(O.OccupancyLimiter, kernel("k", 1e6, **quarter), bottleneck=bn("latency", 0.2))
    assert f.estimated_gain == pytest.approx(0.25)
    above = {**quarter, M.THEORETICAL_OCCUPANCY_PCT: 81.25}
    assert run(O.OccupancyLimiter, kernel("k", 1e6, **above), bottleneck=bn("latency", 0.03)) == []
    # a grid of at most one block per SM never meets a limit of one block per SM: lifting it
    # adds no warps (the launch-bound kernels Nsight Compute still reports it on)
    grid_bound = {**half, M.GRID_SIZE: 132}
    assert run(O.OccupancyLimiter, kernel("k", 1e6, **grid_bound), bottleneck=bn("latency", 0.03)) == []


def test_the_reachable_share_of_the_roofline_is_a_setting(tmp_path):
    starved = kernel("k", 1e6, **{M.ISSUE_ACTIVE_PCT: 10.0, M.ELIGIBLE_WARPS: 0.2})
    mp = X.IssueSlotUtilization(X.IssueSlotSettings(reachable_fraction=0.9))
    f = mp.analyze(profile(starved), bn("latency", 0.7), CTX)[0]
    assert f.estimated_gain == pytest.approx(1 - 0.7 / 0.9, abs=1e-4)
    # from YAML, and a value outside (0, 1] is one line naming the key
    from kernelpro import config as cfg
    from kernelpro.plugins import Plugins

    good = cfg.load_config(overrides={"profiling": {"micro_profiler_params": {"issue_slots": {"reachable_fraction": 0.9}}}})
    cfg.validate(good, Plugins())
    bad = cfg.load_config(overrides={"profiling": {"micro_profiler_params": {"tail_effect": {"reachable_fraction": 1.5}}}})
    with pytest.raises(cfg.ConfigError) as exc:
        cfg.validate(bad, Plugins())
    assert len(exc.value.problems) == 1
    assert "tail_effect" in exc.value.problems[0] and "reachable_fraction: expected a fraction in (0, 1], got 1.5" \
        in exc.value.problems[0]


def test_issue_bound_names_instructions_the_bytes_do_not_need():
    # a data-movement kernel the classifier calls compute: the SM busier than memory, issue
    # below issue_bound's 80 %, no pipe near its limit (PyTorch's roll on the H100: SM 61 %,
    # DRAM 49 %, issue 62 %, ALU 34 %; its rewrite issued 12 times fewer instructions)
    roll = {M.SM_THROUGHPUT_PCT: 61.0, M.MEM_THROUGHPUT_PCT: 48.8, M.DRAM_THROUGHPUT_PCT: 48.8,
            M.ISSUE_ACTIVE_PCT: 61.6, M.PIPE_ALU_PCT: 34.2, M.PIPE_FMA_PCT: 24.7, M.PIPE_LSU_PCT: 7.6,
            M.INST_EXECUTED: 2.03e8, M.DRAM_READ_BYTES: 6.7e7, M.DRAM_WRITE_BYTES: 6.7e7}
    traffic = bn("compute", 0.34, memory_time_fraction=0.34, compute_time_fraction=0.0)
    (f,) = run(X.IssueBound, kernel("roll", 1e6, **roll), bottleneck=traffic)
    check_finding(f, X.IssueBound)
    # the bound: all the way to the practical share of the memory roofline
    assert f.estimated_gain == pytest.approx(1 - 0.34 / 0.8, abs=1e-4)
    assert "memory traffic" in f.message and "per 16 bytes" in f.message
    assert f.evidence["sm_throughput_pct"] == 61.0 and f.evidence["memory_throughput_pct"] == 48.8
    half = X.IssueBound(X.IssueBoundSettings(bound_share=0.5))
    (h,) = half.analyze(profile(kernel("roll", 1e6, **roll)), traffic, CTX)
    assert h.estimated_gain == pytest.approx(0.5 * (1 - 0.34 / 0.8), abs=1e-4)
    # quiet where the FLOPs set the roofline, where memory is the busier side, below the
    # busy threshold, with the form turned off, and without the classifier's time fractions
    flops = bn("compute", 0.34, memory_time_fraction=0.05, compute_time_fraction=0.34)
    assert run(X.IssueBound, kernel("k", 1e6, **roll), bottleneck=flops) == []
    assert run(X.IssueBound, kernel("k", 1e6, **{**roll, M.MEM_THROUGHPUT_PCT: 70.0}), bottleneck=traffic) == []
    assert run(X.IssueBound, kernel("k", 1e6, **{**roll, M.SM_THROUGHPUT_PCT: 55.0}), bottleneck=traffic) == []
    off = X.IssueBound(X.IssueBoundSettings(memory_natured_sm_pct=0.0))
    assert off.analyze(profile(kernel("k", 1e6, **roll)), traffic, CTX) == []
    assert run(X.IssueBound, kernel("k", 1e6, **roll), bottleneck=bn("compute", 0.34)) == []
    # a pipe at its limit is pipe_bound's, whichever form
    assert run(X.IssueBound, kernel("k", 1e6, **{**roll, M.PIPE_ALU_PCT: 85.0}), bottleneck=traffic) == []
    # both forms: the larger bound, capped by the headroom
    both = {**roll, M.ISSUE_ACTIVE_PCT: 84.0, M.PIPE_ALU_PCT: 59.0}
    (b,) = run(X.IssueBound, kernel("k", 1e6, **both), bottleneck=traffic)
    assert b.estimated_gain == pytest.approx(max(1 - 0.59, 1 - 0.34 / 0.8), abs=1e-4)
    assert "schedulers issue in 84%" in b.message


def test_a_busy_l2_bounds_what_issuing_the_same_requests_sooner_saves():
    # a gather whose L2 is near its peak while DRAM is nearly idle (PyTorch's searchsorted on the
    # H100: L2 91 %, DRAM 5 %; its rewrite with more loads in flight ran 34 % slower): the DRAM
    # roofline leaves 95 % of headroom, the L2 only 9 %
    gather = {M.stall_metric("long_scoreboard"): 40.0, M.stall_metric("wait"): 2.0, M.ISSUE_ACTIVE_PCT: 19.0,
              M.ELIGIBLE_WARPS: 0.3, M.L2_THROUGHPUT_PCT: 91.0}
    low_dram = bn("memory", 0.04)
    for cls in (X.WarpStallReasons, X.IssueSlotUtilization):
        (f,) = run(cls, kernel("k", 1e6, **gather), bottleneck=low_dram)
        assert f.estimated_gain == pytest.approx(1 - 0.91, abs=1e-4), cls.name
        assert "L2 is already 91% busy" in f.message and f.evidence["l2_throughput_pct"] == 91.0
        # without the L2's throughput, or with an idle L2, the roofline's headroom alone bounds it
        (g,) = run(cls, kernel("k", 1e6, **{k: v for k, v in gather.items() if k != M.L2_THROUGHPUT_PCT}),
                   bottleneck=low_dram)
        (h,) = run(cls, kernel("k", 1e6, **{**gather, M.L2_THROUGHPUT_PCT: 10.0}), bottleneck=low_dram)
        assert g.estimated_gain == h.estimated_gain > 0.5 and "L2" not in g.message + h.message
    # empty warp slots and a short grid: filling them issues the same requests too
    gap = {M.ACHIEVED_OCCUPANCY_PCT: 20.0, M.THEORETICAL_OCCUPANCY_PCT: 100.0, M.WAVES_PER_SM: 4.0,
           M.L2_THROUGHPUT_PCT: 95.0}
    (f,) = run(O.AchievedOccupancyGap, kernel("k", 1e6, **gap), bottleneck=low_dram)
    assert f.estimated_gain == pytest.approx(0.05, abs=1e-4)
    # a fix that removes traffic is not bounded by it (uncoalesced sectors: fewer requests)
    strided = {M.GLD_BYTES_PER_SECTOR_PCT: 12.5, M.GLD_SECTORS: 8e6, M.GLD_REQUESTS: 2.5e5,
               M.MEM_THROUGHPUT_PCT: 95.0, M.L2_THROUGHPUT_PCT: 95.0}
    (u,) = run(Mem.UncoalescedGlobalAccess, kernel("k", 1e6, **strided), bottleneck=low_dram)
    assert u.estimated_gain > 0.3
