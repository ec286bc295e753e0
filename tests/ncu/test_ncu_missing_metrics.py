"""A profile without the Speed Of Light throughputs is not called latency-bound: the
classifier says which metrics are missing (a stage-2-only report of a kernel whose memory
is 95 % busy once read as "neither memory (0%) nor compute (0%) is busy")."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelpro import cli as cli_mod
from kernelpro.api import ProfileContext
from kernelpro.gpus import SPECS

from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu.classifier import RooflineClassifier

from ncu_helpers import kernel, profile, raw_csv

H200 = next(s for s in SPECS if s.name.startswith("H200"))
CTX = ProfileContext(gpu=H200, device="cuda")
CASE = Path(__file__).with_name("fixtures") / "h200" / "cases" / "transpose_naive"
# what a stage-2 pass asks for: stalls and sectors, no throughput percentages
STAGE2_ONLY = {"smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio": 68.1,
               "smsp__issue_active.avg.pct_of_peak_sustained_active": 17.0,
               M.ACHIEVED_OCCUPANCY_PCT: 83.0, M.GRID_SIZE: 4096, M.SM_COUNT: 132}


def classify(**metrics):
    return RooflineClassifier().classify({"kernel": profile(kernel("k", 1e6, **metrics))}, CTX)


def test_no_throughputs_is_unknown_and_names_both_metrics():
    b = classify(**STAGE2_ONLY)
    assert b.kind == "unknown"
    assert "latency" not in b.summary and "0%" not in b.summary
    assert M.SM_THROUGHPUT_PCT in b.summary and M.MEM_THROUGHPUT_PCT in b.summary
    assert M.DRAM_THROUGHPUT_PCT in b.summary


def test_one_missing_throughput_is_named_alone():
    b = classify(**STAGE2_ONLY, **{M.SM_THROUGHPUT_PCT: 10.0})
    assert b.kind == "unknown"
    assert M.MEM_THROUGHPUT_PCT in b.summary and M.SM_THROUGHPUT_PCT not in b.summary


def test_a_busy_unit_still_classifies_and_says_what_was_not_measured():
    b = classify(**STAGE2_ONLY, **{M.DRAM_THROUGHPUT_PCT: 95.0})
    assert b.kind == "memory"
    assert f"SM throughput ({M.SM_THROUGHPUT_PCT}) is not in the report" in b.summary


def test_both_throughputs_present_keep_the_latency_verdict():
    b = classify(**STAGE2_ONLY, **{M.SM_THROUGHPUT_PCT: 5.0, M.MEM_THROUGHPUT_PCT: 15.0})
    assert b.kind == "latency" and "neither" in b.summary


def test_analyze_of_a_csv_without_throughputs_names_the_missing_metrics(tmp_path):
    path = tmp_path / "stage2.raw.csv"
    path.write_text(raw_csv([("kp_transpose", {M.DURATION_NS: 1e6, **STAGE2_ONLY})]))
    res = CliRunner().invoke(cli_mod.cli, ["analyze", str(path), "--gpu", "H200 SXM"])
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("bottleneck:"))
    assert line.startswith("bottleneck: unknown") and "the report lacks" in line
    assert M.SM_THROUGHPUT_PCT in line and "latency-bound" not in line


def test_the_real_stage2_report_alone_is_unknown_and_with_stage1_memory(tmp_path):
    alone = tmp_path / "ncu_stage2.ncu-rep"
    shutil.copy(CASE / "ncu_stage2.ncu-rep", alone)
    kinds = []
    for report in (alone, CASE / "ncu_stage2.ncu-rep"):  # the fixture directory has stage 1 beside it
        res = CliRunner().invoke(cli_mod.cli, ["analyze", str(report), "--json"])
        assert res.exit_code == 0, res.output
        out = json.loads(res.output[res.output.index("{"):])
        kinds.append(out["bottleneck"]["kind"])
        if report == alone:
            assert "the report lacks" in out["bottleneck"]["summary"]
            # nothing to gate on: the micro-profilers still run on what the report holds
            assert {f["tool"] for f in out["findings"]} >= {"uncoalesced_global", "warp_stalls"}
    assert kinds == ["unknown", "memory"]
