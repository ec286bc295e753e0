"""RooflineClassifier on synthetic metric dicts (no GPU, no report)."""

import pytest

from kernelpro.api import ProfileContext
from kernelpro.gpus import SPECS

from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu.classifier import RooflineClassifier, RooflineSettings, find_spec, roofline_numbers

from ncu_helpers import kernel, memory_bound_metrics, profile

H200 = next(s for s in SPECS if s.name.startswith("H200"))
CTX = ProfileContext(gpu=H200, device="cuda")


def classify(*kernels, context=CTX, **io):
    return RooflineClassifier().classify({"kernel": profile(*kernels, io=io)}, context)


def test_memory_bound_copy_has_roofline_fraction_and_evidence():
    b = classify(kernel("copy", 1e6, **memory_bound_metrics()))
    assert b.kind == "memory"
    # 4.3 GB in 1 ms = 4300 GB/s of the H200's 4800 GB/s datasheet bandwidth
    assert b.roofline_fraction == pytest.approx(4.3e9 / 1e-3 / 4.8e12, rel=1e-6)
    assert b.evidence["dram_bandwidth_achieved_gbs"] == pytest.approx(4300.0)
    assert b.evidence["dram_bytes"] == pytest.approx(4.3e9)
    assert "memory-bound" in b.summary and b.classifier == "roofline"


def test_compute_bound_names_tensor_pipe():
    b = classify(kernel("gemm", 2e5, **{
        M.SM_THROUGHPUT_PCT: 85.0, M.MEM_THROUGHPUT_PCT: 40.0, M.DRAM_THROUGHPUT_PCT: 10.0,
        M.PIPE_TENSOR_HMMA_PCT: 80.0, M.PIPE_FMA_PCT: 5.0, M.GRID_SIZE: 264, M.SM_COUNT: 132,
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum": 1.37e11, M.DRAM_READ_BYTES: 1e8}))
    assert b.kind == "compute" and b.pipe == "tensor"
    # 137 GFLOP in 0.2 ms = 685 TFLOP/s of the 989 bf16 datasheet peak
    assert b.roofline_fraction == pytest.approx(1.37e11 / 989e12 / 2e-4, rel=1e-6)
    assert b.evidence["arithmetic_intensity_flop_per_byte"] == pytest.approx(1370.0)


@pytest.mark.parametrize("pipe_metric,pipe", [(M.PIPE_FMA_PCT, "fp32"), (M.PIPE_FP64_PCT, "fp64"),
                                              (M.PIPE_ALU_PCT, "int")])
def test_compute_bound_names_scalar_pipes(pipe_metric, pipe):
    b = classify(kernel("k", 1e6, **{M.SM_THROUGHPUT_PCT: 80.0, M.MEM_THROUGHPUT_PCT: 10.0,
                                      M.GRID_SIZE: 4096, M.SM_COUNT: 132, pipe_metric: 75.0}))
    assert b.kind == "compute" and b.pipe == pipe


def test_latency_bound_when_neither_unit_is_busy():
    b = classify(kernel("chase", 1e6, **{M.SM_THROUGHPUT_PCT: 5.0, M.MEM_THROUGHPUT_PCT: 15.0,
                                          M.DRAM_THROUGHPUT_PCT: 15.0, M.GRID_SIZE: 132, M.SM_COUNT: 132,
                                          M.ACHIEVED_OCCUPANCY_PCT: 6.0}))
    assert b.kind == "latency"
    assert "neither" in b.summary and b.evidence["achieved_occupancy_pct"] == 6.0


def test_too_little_work_for_small_grid():
    b = classify(kernel("tiny", 1e6, **{M.SM_THROUGHPUT_PCT: 2.0, M.MEM_THROUGHPUT_PCT: 3.0,
                                         M.GRID_SIZE: 4, M.SM_COUNT: 132}))
    assert b.kind == "too_little_work"
    assert b.evidence["small_grid_time_share"] == 1.0


@pytest.mark.parametrize("bytes_moved,kind", [(4.0e9, "memory"), (2.0e9, "too_little_work")])
def test_a_small_grid_near_the_roofline_is_not_too_little_work(bytes_moved, kind):
    # corpus v5: layer norm's gamma/beta backward on fewer blocks than SMs at 85 % of its
    # DRAM roofline; here 4.0 GB in 1 ms is 83 % of the datasheet's 4.8 TB/s, 2.0 GB 42 %
    m = dict(memory_bound_metrics(), **{M.GRID_SIZE: 96, M.DRAM_READ_BYTES: bytes_moved / 2,
                                        M.DRAM_WRITE_BYTES: bytes_moved / 2})
    b = classify(kernel("gamma_beta", 1e6, **m))
    assert b.kind == kind, b.summary
    assert b.evidence["small_grid_time_share"] == 1.0


def test_too_little_work_for_launch_dominated_forward():
    ks = [kernel(f"k{i}", 2000, **{M.SM_THROUGHPUT_PCT: 10.0, M.MEM_THROUGHPUT_PCT: 10.0,
                                   M.GRID_SIZE: 512, M.SM_COUNT: 132}) for i in range(10)]
    b = classify(*ks)
    assert b.kind == "too_little_work" and "launch" in b.summary


def test_kernels_weighted_by_duration():
    big = kernel("big", 9e6, **memory_bound_metrics())
    small = kernel("small", 1e6, **{M.SM_THROUGHPUT_PCT: 90.0, M.MEM_THROUGHPUT_PCT: 10.0,
                                     M.GRID_SIZE: 1024, M.SM_COUNT: 132})
    b = classify(big, small)
    assert b.kind == "memory"
    assert b.evidence["sm_pct"] == pytest.approx(0.9 * 20.0 + 0.1 * 90.0)
    assert b.evidence["kernels"] == 2


def test_thresholds_are_settings():
    k = kernel("k", 1e6, **{**memory_bound_metrics(), M.DRAM_THROUGHPUT_PCT: 55.0, M.MEM_THROUGHPUT_PCT: 55.0,
                            M.DRAM_READ_BYTES: 1e9, M.DRAM_WRITE_BYTES: 1e9})  # 0.42 of the roofline
    assert classify(k).kind == "latency"
    b = RooflineClassifier(RooflineSettings(busy_pct=50.0)).classify({"kernel": profile(k)}, CTX)
    assert b.kind == "memory"


def test_spec_from_device_name_when_context_has_none():
    b = classify(kernel("copy", 1e6, **memory_bound_metrics()), context=ProfileContext(gpu=None, device="cuda"))
    assert b.evidence["dram_bandwidth_peak_gbs"] == 4800
    assert "H200" in b.summary


def test_no_spec_still_classifies_without_roofline():
    p = profile(kernel("copy", 1e6, **memory_bound_metrics()), device="Mystery GPU")
    b = RooflineClassifier().classify({"kernel": p}, ProfileContext(gpu=None, device="cuda"))
    assert b.kind == "memory" and b.roofline_fraction is None


def test_nothing_to_classify():
    assert RooflineClassifier().classify({}, CTX) is None
    assert RooflineClassifier().classify({"kernel": profile()}, CTX) is None


def test_find_spec_matches_table():
    assert find_spec("NVIDIA H100 80GB HBM3").name.startswith("H100")
    assert find_spec(None) is None


def test_flop_accounting():
    ev = roofline_numbers(profile(kernel("k", 1e6, **{M.FFMA: 10.0, M.FADD: 3.0, M.FMUL: 2.0,
                                                      M.DFMA: 1.0, M.DRAM_READ_BYTES: 5.0})), H200)
    assert ev["fp32_flops"] == 25.0 and ev["fp64_flops"] == 2.0
    assert ev["arithmetic_intensity_flop_per_byte"] == pytest.approx(27.0 / 5.0)


def test_streaming_kernel_below_busy_pct_is_memory_bound_by_the_roofline():
    # 2.7 TB/s: 57% of the datasheet peak by ncu's percentage, but 0.56 of the 4.8 TB/s roof
    k = kernel("chain", 1.96e5, **{M.DRAM_READ_BYTES: 2.68e8, M.DRAM_WRITE_BYTES: 2.68e8,
                                   M.DRAM_THROUGHPUT_PCT: 57.0, M.MEM_THROUGHPUT_PCT: 57.0,
                                   M.SM_THROUGHPUT_PCT: 20.0, M.GRID_SIZE: 262144, M.SM_COUNT: 132})
    b = classify(k)
    assert b.kind == "memory" and "by the roofline" in b.summary
    assert b.roofline_fraction == pytest.approx(5.36e8 / 4.8e12 / 1.96e-4, rel=1e-6)
    strict = RooflineClassifier(RooflineSettings(roofline_bound_fraction=0.9))
    assert strict.classify({"kernel": profile(k)}, CTX).kind == "latency"
