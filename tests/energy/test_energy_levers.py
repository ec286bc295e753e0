"""Energy findings name the lever a profile shows, with its numbers; the expert generator
reacts to them with moves; an energy reward gives generators (the LLM prompt) its goal."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpro.api import Analysis, Finding, GenerationRequest, ParentInfo, ProfileContext
from kernelpro.config import structure
from kernelpro.problem import parse_problem
from kernelpro.records import EvalResult, KernelProfile, ProfileData, Verdict
from kernelpro_plugins_energy.levers import (EnergyIdleIssue, EnergyNarrowAccess, EnergyPrecision, EnergyTraffic,
                                             IdleIssueSettings, NarrowSettings, PrecisionSettings, TrafficSettings)
from kernelpro_plugins_energy.rewards import EnergyAtMatchedSpeedReward, EnergyReward, MatchedSpeedSettings

DATA = Path(__file__).parent / "data"
MEASURED = ProfileContext(gpu=None, device="cuda", result=EvalResult(
    verdict=Verdict.CORRECT, device="cuda", measurements={"energy": {"energy_j_per_call": 0.01}}))
UNMEASURED = ProfileContext(gpu=None, device="cuda", result=EvalResult(verdict=Verdict.CORRECT, device="cuda"))


def profile(*kernels: KernelProfile, io: dict | None = None) -> ProfileData:
    return ProfileData(level="kernel", collector="ncu", kernels=kernels, payload={"io": io or {}})


def rowsum(**metrics) -> KernelProfile:
    return KernelProfile(name="_kp_r0_kernel(float*, float*, int)", duration_ns=100_000.0, metrics=metrics)


def test_traffic_lever_compares_dram_bytes_with_the_minimum():
    prof = profile(rowsum(**{"dram__bytes_read.sum": 60e6, "dram__bytes_write.sum": 4e6}),
                   io={"input_bytes": 32e6, "output_bytes": 0.0})
    [f] = EnergyTraffic(TrafficSettings()).analyze(prof, None, MEASURED)
    assert f.tool == "energy_traffic" and "redundant global traffic" in f.message
    assert "64.0 MB through DRAM, 2.00x the 32.0 MB" in f.message
    assert f.evidence["excess_factor"] == pytest.approx(2.0) and f.estimated_gain == pytest.approx(0.5)
    # moved once: nothing to say
    once = profile(rowsum(**{"dram__bytes_read.sum": 32e6}), io={"input_bytes": 32e6})
    assert EnergyTraffic(TrafficSettings()).analyze(once, None, MEASURED) == []


def test_no_energy_finding_when_the_run_does_not_measure_energy():
    prof = profile(rowsum(**{"dram__bytes_read.sum": 64e6}), io={"input_bytes": 32e6})
    assert EnergyTraffic(TrafficSettings()).analyze(prof, None, UNMEASURED) == []


def test_narrow_access_lever_counts_bytes_per_global_instruction():
    # 4-byte loads by whole warps: 4 sectors (128 B) per warp-level instruction
    k = rowsum(**{"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 1_000_000.0,
                  "smsp__sass_inst_executed_op_global_ld.sum": 250_000.0,
                  "dram__throughput.avg.pct_of_peak_sustained_elapsed": 85.0,
                  "dram__bytes_read.sum": 32e6, "smsp__inst_executed.sum": 4e6})
    [f] = EnergyNarrowAccess(NarrowSettings()).analyze(profile(k), None, MEASURED)
    assert "128 bytes per warp-level global load/store instruction (4.0 B per thread" in f.message
    assert f.evidence["bytes_per_global_instruction"] == pytest.approx(128.0)
    assert f.evidence["instructions_per_kib_dram"] == pytest.approx(4e6 / 32e6 * 1024)
    # 16-byte loads: 512 B per instruction, no finding; nor on a kernel far from DRAM-bound
    wide = rowsum(**{**k.metrics, "smsp__sass_inst_executed_op_global_ld.sum": 62_500.0})
    assert EnergyNarrowAccess(NarrowSettings()).analyze(profile(wide), None, MEASURED) == []
    idle = rowsum(**{**k.metrics, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 10.0})
    assert EnergyNarrowAccess(NarrowSettings()).analyze(profile(idle), None, MEASURED) == []


def test_idle_issue_and_precision_levers():
    k = rowsum(**{"smsp__issue_active.avg.pct_of_peak_sustained_active": 8.0,
                  "dram__throughput.avg.pct_of_peak_sustained_elapsed": 90.0})
    [f] = EnergyIdleIssue(IdleIssueSettings()).analyze(profile(k), None, MEASURED)
    assert "issue an instruction in 8 % of their active cycles while DRAM runs at 90 %" in f.message
    busy = rowsum(**{**k.metrics, "smsp__issue_active.avg.pct_of_peak_sustained_active": 45.0})
    assert EnergyIdleIssue(IdleIssueSettings()).analyze(profile(busy), None, MEASURED) == []
    g = rowsum(**{"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 80.0,
                  "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": 0.0})
    [p] = EnergyPrecision(PrecisionSettings()).analyze(profile(g), None, MEASURED)
    assert "fp32 FMA pipe is busy 80 %" in p.message and "tolerance" in p.action
    tensor = rowsum(**{**g.metrics, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": 40.0})
    assert EnergyPrecision(PrecisionSettings()).analyze(profile(tensor), None, MEASURED) == []


def test_lever_settings_are_config_keys():
    assert structure({"min_excess_factor": 2.0}, TrafficSettings).min_excess_factor == 2.0


def _finding(tool: str, gain: float = 0.3) -> Finding:
    return Finding(tool=tool, severity="medium", title=tool, message="m", action="a", estimated_gain=gain)


def test_the_expert_generator_moves_on_energy_findings():
    moves = pytest.importorskip("kernelpro_plugins_expert.moves")
    plan = moves.plan(Analysis(bottleneck=None, findings=(_finding("energy_narrow_access"),)), ["r0"])
    assert plan[:2] == [("wider", None), ("fewer_warps", None)]
    plan = moves.plan(Analysis(bottleneck=None, findings=(_finding("energy_idle_issue"),)), ["r0"])
    assert plan[:2] == [("fewer_warps", None), ("persistent", None)]
    plan = moves.plan(Analysis(bottleneck=None, findings=(_finding("energy_traffic"),)), ["r0"])
    assert plan[:2] == [("larger_tile", None), ("wider", None)]
    assert moves.plan(Analysis(bottleneck=None, findings=(_finding("energy_precision"),)), ["r0"])[0] == ("precision", None)
    # the narrow-access moves give a pointwise tile more contiguous elements per thread
    tile = {"BLOCK": 1024, "num_warps": 8, "PER_SM": 0}
    assert moves.apply_tile_move("wider", tile)["BLOCK"] == 2048
    assert moves.apply_tile_move("fewer_warps", tile)["num_warps"] == 4


def test_energy_rewards_state_their_goal_and_speed_states_none():
    from kernelpro.rewards.speed import LogSpeedup, LogSpeedupSettings

    goal = EnergyAtMatchedSpeedReward(MatchedSpeedSettings(slowdown=0.03)).goal()
    assert "at most 3 % slower than the fastest" in goal and "Energy levers" in goal
    assert "whatever their speed" in EnergyReward(None).goal()
    assert LogSpeedup(LogSpeedupSettings()).goal() == ""


def test_the_llm_prompt_carries_the_energy_goal_and_the_energy_findings():
    from kernelpro.generate.llm.prompts import prompt_variables, render

    problem = parse_problem((DATA / "energy_tiny_problem.py").read_text(), name="tiny")
    finding = Finding(tool="energy_narrow_access", severity="medium", title="Energy: many narrow memory instructions",
                      message="rowsum: 128 bytes per warp-level global load/store instruction", action="use float4",
                      estimated_gain=0.2)
    parent = ParentInfo(id="c0003", source="class ModelNew: pass", analysis=Analysis(bottleneck=None, findings=(finding,)),
                        result=EvalResult(verdict=Verdict.CORRECT, device="cuda",
                                          measurements={"energy": {"energy_j_per_call": 0.0123}}))
    goal = EnergyAtMatchedSpeedReward(MatchedSpeedSettings()).goal()
    v = prompt_variables(GenerationRequest(problem=problem, n=1, device="cuda", parent=parent, goal=goal),
                         language="triton", language_required=True)
    system, task = render("system.j2", v), render("refine.j2", v)
    assert "# Objective of this run" in system and "at most 2 % slower" in system
    assert "does better on the objective of this run" in task and "Write a faster version" not in task
    assert "128 bytes per warp-level global load/store instruction" in task
    assert "energy: energy_j_per_call = 0.0123" in task
    plain = prompt_variables(GenerationRequest(problem=problem, n=1, device="cuda", parent=parent),
                             language="triton", language_required=True)
    assert "# Objective" not in render("system.j2", plain)
    assert "Write a faster version of c0003" in render("refine.j2", plain)
