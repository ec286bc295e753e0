"""Nsight Compute metric names (ncu 2025.x, Hopper sm_90) and derived quantities.

Names are the raw metric names of ``ncu --query-metrics``; stage 1 asks for the cheap
ones, stage 2 for what the gated micro-profilers declare. Everything derived here
(FLOPs, bytes, SM clock) is a pure function of a kernel's metric dict, so the classifier
and the micro-profilers agree on the arithmetic.
"""

from __future__ import annotations

from typing import Iterable, Mapping

# --- time, launch, device ----------------------------------------------------------------
DURATION_NS = "gpu__time_duration.sum"
SM_CLOCK_HZ = "sm__cycles_elapsed.avg.per_second"
DRAM_CLOCK_HZ = "dram__cycles_elapsed.avg.per_second"
GRID_SIZE = "launch__grid_size"  # blocks
BLOCK_SIZE = "launch__block_size"  # threads per block
WAVES_PER_SM = "launch__waves_per_multiprocessor"
REGISTERS_PER_THREAD = "launch__registers_per_thread"
SMEM_STATIC = "launch__shared_mem_per_block_static"
SMEM_DYNAMIC = "launch__shared_mem_per_block_dynamic"
SM_COUNT = "device__attribute_multiprocessor_count"
DEVICE_NAME = "device__attribute_display_name"
CC_MAJOR = "device__attribute_compute_capability_major"
CC_MINOR = "device__attribute_compute_capability_minor"
LIMIT_REGISTERS = "launch__occupancy_limit_registers"  # blocks per SM allowed by registers
LIMIT_SMEM = "launch__occupancy_limit_shared_mem"
LIMIT_WARPS = "launch__occupancy_limit_warps"  # by block size (warps per SM)
LIMIT_BLOCKS = "launch__occupancy_limit_blocks"  # by the hardware's blocks-per-SM cap

# --- speed of light --------------------------------------------------------------------
SM_THROUGHPUT_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_THROUGHPUT_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_THROUGHPUT_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
L1_THROUGHPUT_PCT = "l1tex__throughput.avg.pct_of_peak_sustained_active"
L2_THROUGHPUT_PCT = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_READ_BYTES = "dram__bytes_read.sum"
DRAM_WRITE_BYTES = "dram__bytes_write.sum"

# per-unit active cycles: the busiest unit against the average shows work spread unevenly
SM_ELAPSED_CYCLES = "sm__cycles_elapsed.avg"
SM_ACTIVE_CYCLES_AVG = "sm__cycles_active.avg"
SM_ACTIVE_CYCLES_MAX = "sm__cycles_active.max"
L2_ACTIVE_CYCLES_AVG = "lts__cycles_active.avg"
L2_ACTIVE_CYCLES_MAX = "lts__cycles_active.max"
# the same per SM sub-partition (one warp scheduler): uneven when blocks hold fewer than four
# warps or their warps do unequal work
SMSP_ACTIVE_CYCLES_AVG = "smsp__cycles_active.avg"
SMSP_ACTIVE_CYCLES_MAX = "smsp__cycles_active.max"

# --- occupancy, issue --------------------------------------------------------------------
ACHIEVED_OCCUPANCY_PCT = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY_PCT = "sm__maximum_warps_per_active_cycle_pct"
ISSUE_ACTIVE_PCT = "smsp__issue_active.avg.pct_of_peak_sustained_active"
IPC = "smsp__inst_executed.avg.per_cycle_active"
ELIGIBLE_WARPS = "smsp__warps_eligible.avg.per_cycle_active"
ACTIVE_WARPS_PER_SCHEDULER = "smsp__warps_active.avg.per_cycle_active"

# --- arithmetic (thread-level instruction counts, predicated-on) -----------------------
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
DADD = "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum"
DMUL = "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum"
DFMA = "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum"
HADD = "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum"
HMUL = "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum"
HFMA = "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum"
# tensor-core math operations; one multiply-add counts as two (on the H200 the bf16 counter
# read exactly 2*4096^3 for a 4096^3 GEMM, docs/validation/ncu_tools.md). Hopper names the
# fp16 counter without a destination type; older chips split it by destination.
TENSOR_OPS = {
    "fp16": ("sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_fp16_dst_fp16.sum",
             "sm__ops_path_tensor_src_fp16_dst_fp32.sum"),
    "bf16": ("sm__ops_path_tensor_src_bf16_dst_fp32.sum",),
    "tf32": ("sm__ops_path_tensor_src_tf32_dst_fp32.sum",),
    "fp8": ("sm__ops_path_tensor_src_fp8.sum",),
    "int8": ("sm__ops_path_tensor_src_int8.sum",),
    "fp64": ("sm__ops_path_tensor_src_fp64.sum",),
}
# pipe utilisation, percent of peak over active cycles
# on Hopper the HMMA counter also counts warpgroup (HGMMA) work: 95% for a cuBLAS bf16 GEMM
PIPE_TENSOR_HMMA_PCT = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
PIPE_TENSOR_PCT = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
PIPE_FMA_PCT = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
PIPE_FP64_PCT = "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"
PIPE_ALU_PCT = "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"
PIPE_LSU_PCT = "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"
PIPE_FMA_INST_PCT = "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"
PIPE_ALU_INST_PCT = "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"

# --- memory detail (stage 2) -------------------------------------------------------------
GLD_BYTES_PER_SECTOR_PCT = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"
GST_BYTES_PER_SECTOR_PCT = "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct"
GLD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
GLD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
GST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
GST_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
SHARED_LD_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
SHARED_ST_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
SHARED_LD_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
SHARED_ST_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
SHARED_LD_INST = "smsp__sass_inst_executed_op_shared_ld.sum"
SHARED_ST_INST = "smsp__sass_inst_executed_op_shared_st.sum"
LOCAL_LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"
LOCAL_ST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"
LOCAL_LD_INST = "smsp__sass_inst_executed_op_local_ld.sum"
LOCAL_ST_INST = "smsp__sass_inst_executed_op_local_st.sum"
GLOBAL_LD_INST = "smsp__sass_inst_executed_op_global_ld.sum"
GLOBAL_ST_INST = "smsp__sass_inst_executed_op_global_st.sum"
L1_HIT_PCT = "l1tex__t_sector_hit_rate.pct"
L2_HIT_PCT = "lts__t_sector_hit_rate.pct"
L2_READ_SECTORS_FROM_L1 = "lts__t_sectors_srcunit_tex_op_read.sum"

# --- divergence, instructions --------------------------------------------------------------
THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"  # of 32
THREADS_PRED_ON_PER_INST = "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio"
BRANCH_TARGETS = "smsp__sass_branch_targets.sum"
BRANCH_DIVERGENT = "smsp__sass_branch_targets_threads_divergent.sum"
INST_EXECUTED = "smsp__inst_executed.sum"

# --- warp stalls: average warps stalled per issued instruction, by reason ---------------------
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss", "lg_throttle",
    "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc",
    "no_instruction", "not_selected", "selected", "short_scoreboard", "sleeping",
    "tex_throttle", "wait",
)


def stall_metric(reason: str) -> str:
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


STALL_METRICS = tuple(stall_metric(r) for r in STALL_REASONS)

# the per-PC sampling counters (Source Counters) name two reasons differently
_PCSAMP_NAMES = {"no_instruction": "no_instructions", "gmma": "warpgroup_arrive"}


def pcsamp_metric(reason: str) -> str:
    """Per-PC warp-sample counter of a stall reason (instanced, Source Counters section)."""
    return f"smsp__pcsamp_warps_issue_stalled_{_PCSAMP_NAMES.get(reason, reason)}"

# --- what stage 1 collects -------------------------------------------------------------------
STAGE1_SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy")
STAGE1_METRICS = (
    DURATION_NS, SM_CLOCK_HZ, DRAM_CLOCK_HZ, GRID_SIZE, BLOCK_SIZE, WAVES_PER_SM,
    REGISTERS_PER_THREAD, SMEM_STATIC, SMEM_DYNAMIC, SM_COUNT, DEVICE_NAME, CC_MAJOR, CC_MINOR,
    LIMIT_REGISTERS, LIMIT_SMEM, LIMIT_WARPS, LIMIT_BLOCKS,
    SM_THROUGHPUT_PCT, MEM_THROUGHPUT_PCT, DRAM_THROUGHPUT_PCT, L1_THROUGHPUT_PCT,
    L2_THROUGHPUT_PCT, DRAM_READ_BYTES, DRAM_WRITE_BYTES,
    ACHIEVED_OCCUPANCY_PCT, THEORETICAL_OCCUPANCY_PCT, ISSUE_ACTIVE_PCT,
    FADD, FMUL, FFMA, DADD, DMUL, DFMA, HADD, HMUL, HFMA,
    *[m for names in TENSOR_OPS.values() for m in names],
    PIPE_TENSOR_HMMA_PCT, PIPE_TENSOR_PCT, PIPE_FMA_PCT, PIPE_FP64_PCT,
    PIPE_ALU_PCT, PIPE_LSU_PCT,
)
#: metrics that only a section computes (ncu --query-metrics does not list them): a stage
#: asking for one gets the section instead
SECTION_ONLY = {THEORETICAL_OCCUPANCY_PCT: "Occupancy"}
#: metrics stage 2 always adds so that a stage-2 report stands on its own
STAGE2_BASE_METRICS = (
    DURATION_NS, GRID_SIZE, BLOCK_SIZE, WAVES_PER_SM, SM_COUNT, DEVICE_NAME,
)


def base_name(metric: str) -> str:
    """The metric's base name as ``ncu --query-metrics`` lists it (rollup suffix removed)."""
    return metric.split(".", 1)[0]


def unique(names: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for n in names:
        seen.setdefault(n, None)
    return list(seen)


# --- derived quantities ----------------------------------------------------------------------


def get(metrics: Mapping[str, float], name: str, default: float = 0.0) -> float:
    value = metrics.get(name)
    return default if value is None else float(value)


def has(metrics: Mapping[str, float], *names: str) -> bool:
    return all(n in metrics for n in names)


def fp32_flops(m: Mapping[str, float]) -> float:
    """FP32 FLOPs: one per FADD/FMUL thread instruction, two per FFMA."""
    return get(m, FADD) + get(m, FMUL) + 2.0 * get(m, FFMA)


def fp64_flops(m: Mapping[str, float]) -> float:
    return get(m, DADD) + get(m, DMUL) + 2.0 * get(m, DFMA)


def fp16_scalar_flops(m: Mapping[str, float]) -> float:
    """Non-tensor half-precision FLOPs (HFMA2 packs two lanes; counted as ncu counts them)."""
    return get(m, HADD) + get(m, HMUL) + 2.0 * get(m, HFMA)


def tensor_ops_by_type(m: Mapping[str, float]) -> dict[str, float]:
    """Tensor-core math operations per input type (``sm__ops_path_tensor_*``)."""
    out = {}
    for kind, names in TENSOR_OPS.items():
        total = sum(get(m, n) for n in names)
        if total > 0:
            out[kind] = total
    return out


def dram_bytes(m: Mapping[str, float]) -> float:
    return get(m, DRAM_READ_BYTES) + get(m, DRAM_WRITE_BYTES)


def tensor_pipe_pct(m: Mapping[str, float]) -> float:
    """Busiest tensor-pipe utilisation (percent of peak)."""
    return max(get(m, PIPE_TENSOR_HMMA_PCT), get(m, PIPE_TENSOR_PCT))

#: every stage-2 metric some micro-profiler of this package reads (the capture script asks
#: for all of them so that the fixtures serve every profiler whatever the gate decided)
STAGE2_ALL = (
    GLD_BYTES_PER_SECTOR_PCT, GST_BYTES_PER_SECTOR_PCT, GLD_SECTORS, GLD_REQUESTS, GST_SECTORS,
    GST_REQUESTS, SHARED_LD_CONFLICTS, SHARED_ST_CONFLICTS, SHARED_LD_WAVEFRONTS,
    SHARED_ST_WAVEFRONTS, SHARED_LD_INST, SHARED_ST_INST, LOCAL_LD_SECTORS, LOCAL_ST_SECTORS,
    LOCAL_LD_INST, LOCAL_ST_INST, GLOBAL_LD_INST, GLOBAL_ST_INST, L1_HIT_PCT, L2_HIT_PCT,
    L2_READ_SECTORS_FROM_L1, THREADS_PER_INST, THREADS_PRED_ON_PER_INST, BRANCH_TARGETS,
    BRANCH_DIVERGENT, INST_EXECUTED, ISSUE_ACTIVE_PCT, IPC, ELIGIBLE_WARPS,
    ACTIVE_WARPS_PER_SCHEDULER, ACHIEVED_OCCUPANCY_PCT, THEORETICAL_OCCUPANCY_PCT,
    LIMIT_REGISTERS, LIMIT_SMEM, LIMIT_WARPS, LIMIT_BLOCKS, REGISTERS_PER_THREAD, SMEM_STATIC,
    SMEM_DYNAMIC, FADD, FMUL, FFMA, PIPE_FMA_PCT, PIPE_TENSOR_HMMA_PCT, PIPE_TENSOR_PCT,
    PIPE_FMA_INST_PCT, PIPE_ALU_INST_PCT, DRAM_READ_BYTES, DRAM_WRITE_BYTES, *STALL_METRICS,
)
