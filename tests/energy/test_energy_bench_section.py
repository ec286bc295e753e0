"""``kernelpro bench --reward energy_at_matched_speed``: per problem, the speed winner's and
the energy winner's time and joules, their difference and its spread (runs prepared on
disk: the bench reads a run that holds a summary.json instead of running it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelpro_plugins_energy.bench_report import bench_section, problem_numbers, read_run_records

def run_cli(args):
    from kernelpro import cli as climod
    from kernelpro.cli import cli
    from kernelpro.plugins import Plugins

    plugins = Plugins()  # bench and the energy plugin come through their entry points
    climod._PLUGINS[()] = plugins
    if "bench" not in cli.commands:
        plugins.register_commands(cli)
    return CliRunner().invoke(cli, args)


FAST = Path(__file__).resolve().parents[1] / "core" / "data" / "fast_config.yaml"

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(8, 16)]

def get_init_inputs():
    return []
"""


def _rec(cid: str, ms: float, mj: float | None, cv: float = 0.004, correct: bool = True) -> dict:
    energy = {} if mj is None else {"energy": {"energy_j_per_call": mj / 1000, "energy_cv": cv,
                                               "reference_energy_j_per_call": 0.010, "measure_s": 3.0,
                                               "reference_measure_s": 3.0}}
    return {"id": cid, "correct": correct, "verdict": "correct" if correct else "incorrect", "runtime_ms": ms,
            "speedup": 2.0 / ms, "reward": 0.0, "seconds": {"evaluate": 10.0},
            "result": {"timing": {"median_ms": ms, "cv": 0.01}}, "measurements": energy}


def _write_run(run: Path, records: list[dict], best: str | None = None) -> Path:
    run.mkdir(parents=True)
    (run / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "summary.json").write_text(json.dumps({"best_id": best or records[0]["id"], "evaluated": len(records)}))
    return run


def test_energy_winner_is_least_energy_within_2_percent_not_a_3_percent_slower_one(tmp_path):
    run = _write_run(tmp_path / "r", [_rec("fast", 1.00, 9.0), _rec("near", 1.015, 7.0),
                                      _rec("slow3", 1.03, 4.0), _rec("bad", 0.5, 1.0, correct=False)])
    n = problem_numbers(read_run_records(run), 0.02, "timing")
    assert (n["speed_id"], n["energy_id"]) == ("fast", "near")
    assert n["speed_j"] == pytest.approx(0.009) and n["energy_j"] == pytest.approx(0.007)
    assert n["diff_j"] == pytest.approx(-0.002)
    assert n["diff_j_spread"] == pytest.approx(((0.009 * 0.004) ** 2 + (0.007 * 0.004) ** 2) ** 0.5)
    assert n["resolved"] is True and n["diff_ms_rel"] == pytest.approx(0.015)
    assert n["energy_seconds"] == pytest.approx(18.0) and n["evaluate_seconds"] == pytest.approx(40.0)
    # a wider window takes the 3 % slower one
    assert problem_numbers(read_run_records(run), 0.05, "timing")["energy_id"] == "slow3"


def test_a_retime_replaces_the_first_numbers(tmp_path):
    run = _write_run(tmp_path / "r", [_rec("fast", 1.00, 9.0), _rec("near", 1.015, 7.0)])
    retimed = {"verdict": "correct", "timing": {"median_ms": 1.05, "cv": 0.01},
               "measurements": {"energy": {"energy_j_per_call": 0.007, "energy_cv": 0.004,
                                           "reference_energy_j_per_call": 0.010}}}
    (run / "retimes.jsonl").write_text(json.dumps({"id": "near", "result": retimed}) + "\n")
    n = problem_numbers(read_run_records(run), 0.02, "timing")
    assert n["energy_id"] == "fast"  # near is 5 % slower once re-timed


def test_unresolved_difference_and_problem_without_energy(tmp_path):
    a = _write_run(tmp_path / "a", [_rec("x", 1.0, 9.0, cv=0.05), _rec("y", 1.01, 8.9, cv=0.05)])
    b = _write_run(tmp_path / "b", [_rec("z", 1.0, None)])
    text = bench_section([{"name": "pa", "run_dir": str(a)}, {"name": "pb", "run_dir": str(b)}])
    assert "| pa | x | 1 ± 0.01 | 9 ± 0.45 | y | 1.01 ± 0.0101 | 8.9 ± 0.445 | -0.1 ± 0.633 | -1.11 | +1.00 | no |" in text
    assert "| pb | - |" in text and "no energy numbers" in text
    assert "1 of 2 problems with energy numbers" in text and "by more than twice the spread in 0" in text
    assert bench_section([{"name": "pb", "run_dir": str(b)}]) is None


def test_bench_command_with_the_energy_reward_reports_both_winners(tmp_path):
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    (suite / "1_relu.py").write_text(PROBLEM)
    out = tmp_path / "out"
    _write_run(out / "runs" / "L1_1_relu", [_rec("c0001", 1.00, 9.0), _rec("c0002", 1.019, 7.0),
                                            _rec("c0003", 1.03, 4.0)], best="c0002")
    res = run_cli(["bench", str(tmp_path / "suite"), "-c", str(FAST), "--device", "cpu",
                                    "-o", str(out), "--reward", "energy_at_matched_speed"])
    assert res.exit_code == 0, res.output
    report = (out / "report.md").read_text()
    assert "reward `energy_at_matched_speed`" in report
    assert "## Energy at matched speed" in report
    assert "| 1_relu | c0001 | 1 ± 0.01 | 9 ± 0.036 | c0002 | 1.019 ± 0.01019 | 7 ± 0.028 |" in report
    assert "## Energy at matched speed" in res.output  # printed too
    meta = json.loads((out / "results.json").read_text())["meta"]
    assert meta["reward"] == "energy_at_matched_speed"


def test_bench_rejects_an_unknown_reward(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "1_relu.py").write_text(PROBLEM)
    res = run_cli(["bench", str(suite), "--reward", "energy_at_matchd_speed", "-o",
                                    str(tmp_path / "o")])
    assert res.exit_code == 2 and "reward.name" in res.output and "did you mean" in res.output


def test_the_gpu_benchmark_draws_8_problems_from_the_validation_sample():
    import importlib.util

    repo = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("energy_matched_h200", repo / "benchmarks" / "energy_matched_h200.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    validation = json.loads((repo / "benchmarks" / "kernelbench" / "split.json").read_text())["validation"]["problems"]
    picked = script.draw(validation)
    assert len(picked) == 8 and all(p in validation for p in picked)
    assert [p["level"] for p in picked] == [1] * 4 + [2] * 4
    assert picked == script.draw(validation)  # the fixed seed draws the same problems every time


def test_candidates_skipped_by_measure_within_count_in_the_cost_line(tmp_path):
    slow = _rec("slow", 2.0, None)
    slow["flags"] = ["measurement_skipped: energy: 2 ms is more than 1.1 ms (evaluator.measure_within over the "
                     "fastest candidate so far)"]
    run = _write_run(tmp_path / "r", [_rec("fast", 1.00, 9.0), slow, _rec("near", 1.015, 7.0)])
    n = problem_numbers(read_run_records(run), 0.02, "timing")
    assert n["skipped"] == 1 and n["energy_id"] == "near"
    # the skipped candidate's evaluation counts, its energy seconds are none
    assert n["energy_seconds"] == pytest.approx(12.0) and n["evaluate_seconds"] == pytest.approx(30.0)
    text = bench_section([{"name": "p", "run_dir": str(run)}])
    assert ("Energy measurement: 12.0 s of 30.0 s of evaluation (40 %; the rest of the evaluations took 18.0 s; "
            "1 candidates slower than `evaluator.measure_within` allows were timed but not measured).") in text
