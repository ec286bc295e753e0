"""bench's two roofline columns: the problem's minimum traffic against the run's GPU
ceilings over the best's time, beside ncu's achieved fraction."""

from __future__ import annotations

import json

import kernelpro.bench as bench


def _run_dir(tmp_path, best_notes, base_notes=None, best=True):
    run = tmp_path / "run"
    (run / "analyses").mkdir(parents=True)
    result = {"measurements": {"evaluator": best_notes}, "timing": {"median_ms": 2.0}, "baseline": {"median_ms": 3.0}}
    rec = {"id": "c0001", "verdict": "correct", "correct": True, "runtime_ms": 2.0, "baseline_ms": 3.0,
           "speedup": 1.5, "compiled_baseline_ms": 2.5, "result": result}
    (run / "candidates.jsonl").write_text(json.dumps(rec) + "\n")
    (run / "summary.json").write_text(json.dumps({"evaluated": 1, "best_id": "c0001" if best else None}))
    (run / "baseline.json").write_text(json.dumps({
        "baseline": {"median_ms": 3.0}, "baseline_compiled": {"median_ms": 2.5},
        "measurements": {"evaluator": base_notes or {}}}))
    (run / "analyses" / "c0001.json").write_text(json.dumps({"bottleneck": {"kind": "memory",
                                                                            "roofline_fraction": 0.93}}))
    return run


def test_the_best_s_minimum_traffic_fraction_beside_ncu_s(tmp_path):
    run = _run_dir(tmp_path, {"min_traffic_bound_ms": 1.5, "min_traffic_bound_calibrated": 1.0})
    row = bench.problem_row(bench.SuiteProblem(level=1, problem_id=1, name="p", source=""), run)
    assert row["min_traffic_fraction"] == 0.75 and row["min_traffic_calibrated"] is True
    assert row["roofline_fraction"] == 0.93  # ncu's, a separate column
    table = bench.problem_table([row])
    assert "| 75% | 93% |" in table
    summary = bench.summarise([row])
    assert summary["all"]["mean_min_traffic_fraction"] == 0.75
    assert "| 75% | 93% (1 profiled) |" in bench.summary_table(summary)


def test_datasheet_ceilings_are_named_and_a_kept_reference_has_its_own_fraction(tmp_path):
    run = _run_dir(tmp_path, {"min_traffic_bound_ms": 1.0, "min_traffic_bound_calibrated": 0.0})
    row = bench.problem_row(bench.SuiteProblem(level=1, problem_id=1, name="p", source=""), run)
    assert "50% (datasheet)" in bench.problem_table([row])
    kept = _run_dir(tmp_path / "k", {}, base_notes={"min_traffic_bound_ms": 0.6,
                                                  "min_traffic_bound_calibrated": 1.0}, best=False)
    row = bench.problem_row(bench.SuiteProblem(level=1, problem_id=2, name="q", source=""), kept)
    assert abs(row["min_traffic_fraction"] - 0.2) < 1e-12  # 0.6 ms of 3.0 ms: the eager reference kept
    no_bound = _run_dir(tmp_path / "n", {})
    row = bench.problem_row(bench.SuiteProblem(level=1, problem_id=3, name="r", source=""), no_bound)
    assert row["min_traffic_fraction"] is None  # a CPU run: no bound, no number


def test_a_time_below_the_reference_s_flops_is_read_against_the_bytes_alone(tmp_path):
    """A rewrite that does less arithmetic than the reference (2.0 ms where the reference's
    FLOPs need 3.2 ms at peak) is not 160 % of a roofline: its fraction is over the 1.2 ms
    its bytes need, and says so; a time above the FLOPs' part keeps the whole bound."""
    notes = {"min_traffic_bound_ms": 3.2, "min_traffic_memory_ms": 1.2, "min_traffic_compute_ms": 3.2,
             "min_traffic_bound_calibrated": 1.0}
    row = bench.problem_row(bench.SuiteProblem(level=2, problem_id=1, name="p", source=""), _run_dir(tmp_path, notes))
    assert abs(row["min_traffic_fraction"] - 0.6) < 1e-12 and row["min_traffic_bytes_only"] is True
    assert "| 60% (bytes only: fewer FLOPs than the reference) | 93% |" in bench.problem_table([row])
    notes = {**notes, "min_traffic_bound_ms": 1.6, "min_traffic_compute_ms": 1.6}
    row = bench.problem_row(bench.SuiteProblem(level=2, problem_id=2, name="q", source=""),
                            _run_dir(tmp_path / "q", notes))
    assert row["min_traffic_fraction"] == 0.8 and row["min_traffic_bytes_only"] is False


def test_the_autotune_baseline_column_shows_its_time_and_compile_seconds(tmp_path):
    run = _run_dir(tmp_path, {}, base_notes={"compile_autotune_s": 95.2})
    base = json.loads((run / "baseline.json").read_text())
    base["baseline_compiled_autotune"] = {"median_ms": 2.25}
    (run / "baseline.json").write_text(json.dumps(base))
    row = bench.problem_row(bench.SuiteProblem(level=1, problem_id=1, name="p", source=""), run)
    assert row["autotune_ms"] == 2.25 and row["autotune_compile_s"] == 95.2
    assert bench._autotune(row).endswith("(95 s)")
    assert bench._autotune({"autotune_ms": None}) == "not timed"
