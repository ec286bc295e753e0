"""The micro-profilers and the classifier on real Nsight Compute reports from an H200.

Fixtures (tests/ncu/fixtures/h200, from tools/capture/ncu/gpu_capture.py, see
docs/validation/ncu_tools.md): every validation case profiled in one forward by the real
NcuCollector (stage 1 as .ncu-rep and CSV; stage 2 as raw CSV plus its source hot spots),
per-candidate reports of three cases, the calibration, and the timing record.
"""

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelpro.api import ProfileContext
from kernelpro.records import SEVERITIES

from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu import report as R
from kernelpro_plugins_ncu.analyzer import NcuAnalyzer
from kernelpro_plugins_ncu.classifier import RooflineClassifier
from kernelpro_plugins_ncu.micro import ALL_MICRO_PROFILERS

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "capture" / "ncu" / "gpu_kernels"))
import kp_ncu_cases as C  # noqa: E402
import kp_ncu_validate as V  # noqa: E402

FIX = Path(__file__).with_name("fixtures") / "h200"


@pytest.fixture(scope="module")
def results():
    return {r.case: r for r in V.evaluate(FIX, calibrated=True)}


@pytest.fixture(scope="module")
def spec():
    return V.gpu_spec(FIX, calibrated=True)


def test_every_case_was_profiled(results):
    assert set(results) == set(C.CASES)


@pytest.mark.parametrize("case", [c.name for c in C.CASES.values() if not c.good])
def test_designed_tools_fire_through_the_gate(results, case):
    r = results[case]
    missing = [t for t in C.CASES[case].expect if t not in r.fired]
    assert not missing, f"{case}: {missing} did not fire; fired {r.fired}; bottleneck {r.bottleneck.summary}"


@pytest.mark.parametrize("case", [c.name for c in C.CASES.values() if c.good])
def test_good_kernels_get_no_flaw_findings(results, case):
    r = results[case]
    assert set(r.fired) <= {"at_roofline"}, f"{case}: {r.fired}"
    assert all(f.severity == "info" for f in r.gated)


def test_at_least_fourteen_tools_validated_on_real_kernels(results):
    designed = {t for c in C.CASES.values() for t in c.expect}
    assert len(designed) >= 14
    fired = {t for r in results.values() for t in r.fired}
    assert designed <= fired


def test_findings_are_complete(results):
    for r in results.values():
        for f in r.gated:
            assert f.tool and f.severity in SEVERITIES and f.title and f.action
            assert f.estimated_gain is not None and 0 <= f.estimated_gain <= 1
            assert any(ch.isdigit() for ch in f.message)


def test_source_lines_point_at_the_flawed_statement(results):
    """kernels.cu line 29 (the strided load) and 48 (the column read of the shared tile);
    load_inline's generated cuda.cu puts three lines before the file."""
    naive = next(f for f in results["transpose_naive"].gated if f.tool == "uncoalesced_global")
    assert naive.source_lines and naive.source_lines[0].startswith("cuda.cu:32 ")
    conflict = next(f for f in results["transpose_conflict"].gated if f.tool == "shared_bank_conflicts")
    assert conflict.source_lines[0].startswith("cuda.cu:51 ")
    local = next(f for f in results["spill"].gated if f.tool == "local_memory")
    assert local.source_lines


@pytest.mark.parametrize("case,kind,pipe", [
    ("copy_vec4", "memory", None), ("matmul_bf16", "compute", "tensor"), ("fused_fp32", "compute", "fp32"),
    ("tiny_grid", "too_little_work", None), ("pointer_chase", "latency", None), ("smem_hog", "latency", None),
    ("chain_unfused", "memory", None),
])
def test_classes(results, case, kind, pipe):
    b = results[case].bottleneck
    assert b.kind == kind and b.pipe == pipe
    assert b.evidence["duration_us"] > 0 and "dram_bytes" in b.evidence


def test_roofline_fractions(results):
    assert results["copy_vec4"].bottleneck.roofline_fraction > 0.9
    assert results["transpose_padded"].bottleneck.roofline_fraction > 0.8
    assert results["transpose_naive"].bottleneck.roofline_fraction < 0.5
    assert results["divergent"].bottleneck.roofline_fraction < 0.1


def test_tensor_op_counter_counts_two_flops_per_multiply_add():
    kernels, _ = R.read_report(FIX / "cases" / "matmul_bf16" / "ncu_stage1.ncu-rep")
    assert kernels[0].metrics["sm__ops_path_tensor_src_bf16_dst_fp32.sum"] == 2 * C.MATMUL_N ** 3


def test_analyzer_reads_a_real_report_and_its_sidecar(spec):
    folder = FIX / "cases" / "chain_unfused"
    s1, _ = R.read_report(folder / "ncu_stage1.ncu-rep")
    s1 = R.profile_data(s1, _)
    s2 = NcuAnalyzer().load(folder / "ncu_stage2.ncu-rep")
    assert "merged with ncu_stage1.ncu-rep" in s2.notes
    assert s1.payload["device_name"] == "NVIDIA H200" and len(s1.kernels) == 3
    assert s2.payload["io"] == {"input_bytes": 268435456, "param_bytes": 0, "output_bytes": 268435456}
    ctx = ProfileContext(gpu=spec, device="cuda")
    bottleneck = RooflineClassifier().classify({"kernel": s1}, ctx)
    assert bottleneck.kind == "memory"
    merged = R.profile_data(R.merge_kernels(list(s1.kernels), list(s2.kernels)), s2.payload)
    tools = {f.tool: f for cls in ALL_MICRO_PROFILERS if cls().applies(bottleneck)
             for f in cls().analyze(merged, bottleneck, ctx)}
    assert "dram_excess" in tools and tools["dram_excess"].evidence["excess_factor"] == pytest.approx(2.9, abs=0.1)
    assert "3 kernels" in tools["dram_excess"].message


def test_per_candidate_stage2_asked_only_gated_metrics():
    side = json.loads((FIX / "cases" / "matmul_bf16" / "ncu_stage2.json").read_text())
    asked = set(side["metrics_requested"])
    assert M.GLD_BYTES_PER_SECTOR_PCT not in asked  # memory-only profiler, gated out for a compute kernel
    assert "--clock-control" in side["command"] and side["command"][side["command"].index("--clock-control") + 1] == "none"


def test_csv_and_report_agree():
    rep, _ = R.read_report(FIX / "suite" / "ncu_stage1.ncu-rep")
    raw, _ = R.read_report(FIX / "suite" / "ncu_stage1.raw.csv")
    details, _ = R.read_report(FIX / "suite" / "ncu_stage1.details.csv")
    assert [R.kernel_key(k.name) for k in rep] == [R.kernel_key(k.name) for k in raw]
    assert len(details) == len(rep)
    for a, b, d in zip(rep, raw, details):
        for name in (M.DURATION_NS, M.DRAM_READ_BYTES, M.FFMA, M.GRID_SIZE):
            assert b.metrics[name] == pytest.approx(a.metrics[name], rel=1e-6), name
        assert b.metrics[M.SM_THROUGHPUT_PCT] == pytest.approx(a.metrics[M.SM_THROUGHPUT_PCT], abs=0.01)
        assert d.duration_ns == pytest.approx(a.duration_ns, rel=1e-3)
        assert d.metrics[M.DRAM_THROUGHPUT_PCT] == pytest.approx(a.metrics[M.DRAM_THROUGHPUT_PCT], abs=0.05)


def test_kernelpro_analyze_json_through_core():
    from kernelpro.cli import cli

    result = CliRunner().invoke(cli, ["analyze", str(FIX / "cases" / "transpose_naive" / "ncu_stage1.ncu-rep"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["bottleneck"]["kind"] == "memory" and data["bottleneck"]["classifier"] == "roofline"
    # the stage-2 report beside it is merged in, so the stage-2 micro-profilers have their counters
    tools = [f["tool"] for f in data["findings"]]
    assert "uncoalesced_global" in tools
    for f in data["findings"]:
        assert {"tool", "severity", "title", "message", "action", "estimated_gain"} <= set(f)


def test_calibration_record_resolves_to_a_calibrated_spec(spec):
    cal = json.loads((FIX / "calibration.json").read_text())
    assert spec.source == "calibrated" and spec.dram_bandwidth_gbs == cal["dram_bandwidth_gbs"]
    assert spec.bf16_tflops == cal["bf16_tflops"] and spec.fp32_tflops == 67
