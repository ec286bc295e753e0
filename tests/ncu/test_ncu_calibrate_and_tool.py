"""kernelpro calibrate (cache, spec resolution, CPU-only exit) and the fetch_metrics LLM tool."""

import json

import click
import pytest
from click.testing import CliRunner

from kernelpro.api import ParentInfo, ToolContext, ToolError
from kernelpro.problem import Problem
from kernelpro.records import ProfileData, to_json

from kernelpro_plugins_ncu import calibrate as C
from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu.llm_tool import FetchMetrics, render

from ncu_helpers import kernel, raw_csv

RECORD = {"device_name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132, "l2_bytes": 62914560,
          "dram_bandwidth_gbs": 4300.0, "bf16_tflops": 790.0, "fp16_tflops": 780.0, "tf32_tflops": 400.0,
          "fp32_tflops": 50.0, "fp64_tflops": 52.0}


def test_cache_path_uses_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert C.cache_path("NVIDIA H200") == tmp_path / "kernelpro" / "calibration" / "NVIDIA_H200.json"


def test_resolve_replaces_datasheet_ceilings(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert C.resolve_gpu_spec("NVIDIA H200", "sm_90") is None
    C.save_calibration(RECORD)
    spec = C.resolve_gpu_spec("NVIDIA H200", "sm_90")
    assert spec.source == "calibrated" and spec.name.startswith("H200")
    assert spec.dram_bandwidth_gbs == 4300.0 and spec.bf16_tflops == 790.0 and spec.tf32_tflops == 400.0
    assert spec.fp32_tflops == 67 and spec.fp64_tflops == 34  # GEMM rates do not replace pipe peaks
    assert spec.sm_count == 132 and spec.l2_bytes == 60 * 1024 * 1024  # the rest from the table


def test_calibration_of_unknown_gpu_builds_a_spec():
    spec = C.calibrated_spec("Future GPU", "sm_120", {**RECORD, "device_name": "Future GPU"}, None)
    assert spec.name == "Future GPU" and spec.sm_count == 132 and spec.source == "calibrated"
    with pytest.raises(ValueError, match="lacks"):
        C.calibrated_spec("X", "sm_1", {"dram_bandwidth_gbs": 1.0}, None)


def test_corrupt_cache_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = C.cache_path("NVIDIA H200")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert C.resolve_gpu_spec("NVIDIA H200", "sm_90") is None


def test_calibrate_command_on_cpu_exits_3_with_one_error_line(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cli = click.Group()
    C.register_command(cli)
    result = CliRunner().invoke(cli, ["calibrate"])
    assert result.exit_code == 3  # this machine lacks what the command needs (README.md)
    assert len(result.output.strip().splitlines()) == 1 and "CUDA" in result.output
    assert result.output.startswith("error: ")


def test_measure_refuses_without_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        C.measure()


def test_plugin_hook_returns_calibrated_spec(tmp_path, monkeypatch):
    from kernelpro_plugins_ncu import plugin

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    C.save_calibration(RECORD)
    assert plugin.kernelpro_resolve_gpu_spec("NVIDIA H200", "sm_90").source == "calibrated"


# --- fetch_metrics ------------------------------------------------------------------------------


def context(run_dir):
    problem = Problem(name="p", source="")
    parent = ParentInfo(id="n7", source="", result=None, analysis=None)
    return ToolContext(problem=problem, parent=parent, device="cuda", gpu=None, run_dir=run_dir)


def test_fetch_metrics_from_csv_export(tmp_path):
    folder = tmp_path / "profiles" / "n7"
    folder.mkdir(parents=True)
    (folder / "ncu_stage2.raw.csv").write_text(raw_csv([
        ("kp_transpose_naive(float const*, float*, int)", {M.DURATION_NS: 3e6, M.GLD_BYTES_PER_SECTOR_PCT: 12.5,
                                                           M.stall_metric("long_scoreboard"): 20.0}),
        ("kp_other(float*)", {M.DURATION_NS: 1e6, M.GLD_BYTES_PER_SECTOR_PCT: 100.0})]))
    out = FetchMetrics().run({"metrics": [M.GLD_BYTES_PER_SECTOR_PCT, "smsp__average_warps_issue_stalled_*"],
                              "kernel": "transpose"}, context(tmp_path))
    assert "kp_transpose_naive" in out and "kp_other" not in out
    assert f"{M.GLD_BYTES_PER_SECTOR_PCT} = 12.5" in out
    assert f"{M.stall_metric('long_scoreboard')} = 20" in out
    assert "75% of time" in out


def test_fetch_metrics_from_json_dump_and_suggestions(tmp_path):
    folder = tmp_path / "profiles" / "n7"
    folder.mkdir(parents=True)
    data = ProfileData(level="kernel", collector="ncu", kernels=(kernel("k", 1e6, **{M.DRAM_READ_BYTES: 5.0}),))
    (folder / "kernel.json").write_text(json.dumps(to_json(data)))
    out = FetchMetrics().run({"metrics": ["dram__bytes_read.sum", "dram__bytes_red.sum"]}, context(tmp_path))
    assert "dram__bytes_read.sum = 5" in out
    assert "not in the profile: dram__bytes_red.sum (close: dram__bytes_read.sum" in out


def test_fetch_metrics_bad_calls(tmp_path):
    tool = FetchMetrics()
    with pytest.raises(ToolError, match="non-empty list"):
        tool.run({"metrics": []}, context(tmp_path))
    with pytest.raises(ToolError, match="no profile stored"):
        tool.run({"metrics": ["x"]}, context(tmp_path))
    with pytest.raises(ToolError, match="parent"):
        tool.run({"metrics": ["x"]}, ToolContext(problem=Problem(name="p", source=""), parent=None,
                                                 device="cuda", gpu=None, run_dir=tmp_path))
    with pytest.raises(ToolError, match="no kernel name contains"):
        render([kernel("k")], ["x"], "nomatch")
    assert FetchMetrics.input_schema["required"] == ["metrics"]


def test_fetch_metrics_reads_what_core_saves(tmp_path):
    """The run directory layout core writes for a profiled node (profile.pipeline.save_profiles)."""
    from kernelpro.profile.pipeline import save_profiles

    data = ProfileData(level="kernel", collector="ncu", kernels=(kernel("kp_x", 2e6, **{M.L2_HIT_PCT: 42.0}),))
    save_profiles({"kernel": data}, tmp_path / "profiles" / "n7")
    out = FetchMetrics().run({"metrics": [M.L2_HIT_PCT]}, context(tmp_path))
    assert f"{M.L2_HIT_PCT} = 42" in out and "kp_x" in out


def test_the_table_lookup_matches_by_core_s_rule_not_by_substring():
    from kernelpro_plugins_ncu.calibrate import table_spec

    assert table_spec("NVIDIA H200").name == "H200 SXM"
    assert table_spec("NVIDIA GH200 480GB") is None  # "h200" is inside "gh200", not a token of it


def test_the_bandwidth_kernels_run_and_do_what_they_are_timed_for():
    """The calls `calibrate` times, run on the CPU: each must be a valid call of this torch
    (a sum with out= and no dim raised TypeError on the H200 once, after the calibration
    had been changed without a GPU run)."""
    import torch

    k = C.bandwidth_kernels(torch, torch.device("cpu"), 4 * 1000)
    assert set(k) == {"copy", "read", "write"}
    src = k["copy"]()
    assert src.shape == (1000,) and bool((src >= 0.5).all())
    total = k["read"]()
    assert total.dim() == 0 and float(total) == pytest.approx(float(src.double().sum()), rel=1e-5)
    assert bool((k["write"]() == 1.2345).all())
