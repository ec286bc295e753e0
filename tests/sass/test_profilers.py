"""Each micro-profiler fires on the kernel written to have its flaw and stays quiet on the
good kernels (the expected table is the whole truth: no other non-info finding appears)."""

from __future__ import annotations

import pytest

from kernelpro.api import ANY, ProfileContext
from kernelpro.records import BOTTLENECK_KINDS, Bottleneck, Finding
from kernelpro.gpus import SPECS

from kernelpro_plugins_sass.profilers import ALL

H200 = next(s for s in SPECS if s.name.startswith("H200"))

#: file stem -> kernel name prefix -> the non-info findings expected
EXPECTED = {
    "gemm_fp32_smem": {"sgemm_tiled": {"sass_no_tensor_cores", "sass_no_async_copy"}},
    "gemm_wmma_sm90": {"hgemm_wmma": {"sass_hmma_on_hopper"}},
    # register-blocked (no shared memory); B and C rows are read/written 32 bits at a time
    "gemm_regblock": {"sgemm_regblock": {"sass_no_tensor_cores", "sass_narrow_global_access"}},
    # a GEMV is not matrix-shaped work (no operand reuse); its row reads could be float4
    "gemv_rowdot": {"gemv_rowdot": {"sass_narrow_global_access"}},
    "wgmma_sm90a": {
        # B is staged through registers and A read 32 bits at a time: both true of the fixture
        "wgmma_tile": {"sass_narrow_global_access", "sass_no_async_copy"},
        "wgmma_serialized": {"sass_narrow_global_access", "sass_no_async_copy", "sass_ptxas_advisories"},
    },
    "narrow_loads": {"scale4_scalar": {"sass_narrow_global_access"}},
    "local_array": {"histogram_local": {"sass_local_memory"}, "spill_heavy": {"sass_local_memory"}},
    "fp64_literal": {"gelu_ish": {"sass_fp64_in_fp32"}},
    "intdiv_loop": {"gather_rows": {"sass_int_division_in_loop"}},
    "intdiv64_loop": {"gather_rows64": {"sass_int_division_in_loop"}},
    "predicated": {"piecewise": {"sass_heavy_predication"}},
    # good kernels
    "vec_copy_float4": {"scale_float4": set()},
    "cpasync_tiled": {"row_sum_cpasync": set()},
    "fp64_daxpy": {"daxpy": set()},
    "intdiv_const": {"gather_rows_const": set()},
}


def run_all(profile, bottleneck=None, gpu=H200) -> list[Finding]:
    context = ProfileContext(gpu=gpu, device="cuda")
    findings = []
    for cls in ALL:
        findings += cls().analyze(profile, bottleneck, context)
    return findings


def test_every_fixture_has_an_expectation(profiles):
    assert set(profiles) == set(EXPECTED)


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_expected_findings(profiles, stem):
    findings = run_all(profiles[stem])
    fired: dict[str, set[str]] = {}
    for f in findings:
        if f.severity != "info":
            prefix = f.kernel.split("(")[0]
            fired.setdefault(prefix, set()).add(f.tool)
    expected = {k: v for k, v in EXPECTED[stem].items()}
    got = {k: fired.get(k, set()) for k in expected}
    assert got == expected
    assert set(fired) <= set(expected), f"findings on unexpected kernels: {fired}"


def test_every_profiler_fires_somewhere(profiles):
    fired = {f.tool for stem in profiles for f in run_all(profiles[stem])}
    assert {cls.name for cls in ALL} <= fired


def test_findings_are_complete(profiles):
    for stem, profile in profiles.items():
        for f in run_all(profile):
            assert f.tool and f.title and f.message and f.action and f.kernel, f
            assert f.level == "instruction"
            assert f.severity in ("high", "medium", "low", "info")
            if f.severity != "info":
                assert f.estimated_gain is not None and 0 <= f.estimated_gain <= 0.9, f
                assert any(ch.isdigit() for ch in f.message), f.message


def test_instruction_mix_is_info_for_every_kernel(profiles):
    for profile in profiles.values():
        mix = [f for f in run_all(profile) if f.tool == "sass_instruction_mix"]
        assert len(mix) == len(profile.kernels)
        assert all(f.severity == "info" for f in mix)


def test_gates_name_known_bottleneck_kinds():
    for cls in ALL:
        assert cls.level == "instruction"
        assert cls.applies_to <= set(BOTTLENECK_KINDS) | {ANY}, cls


def test_gate_selects_tensor_checks_for_compute_only():
    memory = Bottleneck(kind="memory", summary="")
    compute = Bottleneck(kind="compute", summary="")
    by_name = {cls.name: cls() for cls in ALL}
    assert by_name["sass_no_tensor_cores"].applies(compute)
    assert not by_name["sass_no_tensor_cores"].applies(memory)
    assert by_name["sass_narrow_global_access"].applies(memory)
    assert by_name["sass_local_memory"].applies(memory) and by_name["sass_local_memory"].applies(None)


def test_messages_carry_the_numbers(profiles):
    (f,) = [f for f in run_all(profiles["local_array"])
            if f.kernel.startswith("spill_heavy") and f.tool == "sass_local_memory"]
    # ptxas -v reported the spill bytes; the message must repeat them
    res = next(e.kernel.resources for e in profiles["local_array"].payload.entries
               if e.kernel.name.startswith("spill_heavy"))
    assert res.spill_store_bytes > 0
    assert f"{res.spill_store_bytes} B of stores" in f.message
    assert f.severity == "high"
    (n,) = [f for f in run_all(profiles["narrow_loads"]) if f.tool == "sass_narrow_global_access"]
    assert n.evidence["vectorizable_in_loops"] == 8  # 4 loads + 4 stores at +0x0..+0xc


def test_fp64_severity_depends_on_gpu_rate(profiles):
    from kernelpro.records import GpuSpec

    consumer = GpuSpec(name="consumer", match=(), arch="sm_89", sm_count=1, dram_bandwidth_gbs=1,
                       l2_bytes=1, smem_per_sm_bytes=1, fp32_tflops=82.6, fp64_tflops=1.3,
                       tf32_tflops=82.6, bf16_tflops=165, fp16_tflops=165)
    on_h200 = [f for f in run_all(profiles["fp64_literal"]) if f.tool == "sass_fp64_in_fp32"]
    on_consumer = [f for f in run_all(profiles["fp64_literal"], gpu=consumer) if f.tool == "sass_fp64_in_fp32"]
    assert on_h200[0].severity == "medium" and on_consumer[0].severity == "high"
    assert on_consumer[0].estimated_gain > on_h200[0].estimated_gain


def test_64bit_division_subroutine_calls_are_seen(profiles):
    f = profiles["intdiv64_loop"].payload.entries[0].features
    assert f.division_calls_in_loops > 0
    (finding,) = [x for x in run_all(profiles["intdiv64_loop"]) if x.tool == "sass_int_division_in_loop"]
    assert "64-bit division subroutine" in finding.message


def test_findings_point_at_source_lines(profiles):
    """Fixtures are compiled with -lineinfo; nvdisasm -g maps SASS back to .cu lines."""
    (f,) = [x for x in run_all(profiles["intdiv_loop"]) if x.tool == "sass_int_division_in_loop"]
    assert any(line.endswith("intdiv_loop.cu:4") for line in f.source_lines), f.source_lines
