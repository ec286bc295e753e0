"""benchmarks/throughput_summary.py over a bench whose problems ran at once: the rate over
the bench's span (first start to last end) beside the one over the summed walls, and the
seconds the evaluations waited for the GPU's lock."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("throughput_summary", REPO / "benchmarks" / "throughput_summary.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _bench(tmp_path: Path, spans: dict[str, tuple[float, float]], worker: dict[str, str]) -> Path:
    out = tmp_path / "bench"
    rows = []
    for name, (start, end) in spans.items():
        run = out / "runs" / name
        run.mkdir(parents=True)
        (run / "bench.json").write_text(json.dumps({"wall_s": end - start, "started_unix_s": start,
                                                     "ended_unix_s": end, "worker": worker[name]}))
        (run / "baseline.json").write_text(json.dumps({"wall_s": 10.0,
                                                       "measurements": {"evaluator": {"gpu_lock_held_s": 7.0}}}))
        (run / "candidates.jsonl").write_text("".join(
            json.dumps({"seconds": {"evaluate": 5.0},
                        "measurements": {"evaluator": {"gpu_lock_wait_s": 1.5, "stage_timing_s": 2.0,
                                                       "timing_call_s": 1.5, "timing_prepare_s": 0.25 * i,
                                                       "timing_timed_calls": 100.0,
                                                       "gpu_lock_held_s": 3.0, "first_trial_s": 0.5 + i}}}) + "\n"
            for i in range(4)))
        rows.append({"name": name, "run_dir": str(run), "evaluated": 4, "wall_s": end - start})
    (out / "results.json").write_text(json.dumps({"problems": rows}))
    return out


def test_problems_at_once_are_rated_over_the_span(tmp_path):
    mod = _module()
    out = _bench(tmp_path, {"a": (1000.0, 1060.0), "b": (1000.5, 1090.0)}, {"a": "local.0", "b": "local.1"})
    s = mod.summarize(out, set())
    assert s["candidates"] == 8 and s["wall_s"] == 149.5
    assert abs(s["candidates_per_min"] - 8 / (149.5 / 60)) < 1e-9  # the summed walls
    assert s["span_s"] == 90.0 and abs(s["candidates_per_min_span"] - 8 / 1.5) < 1e-9
    assert s["workers"] == ["local.0", "local.1"]
    assert [p["gpu_lock_wait_s"] for p in s["problems"]] == [6.0, 6.0]
    assert [p["gpu_lock_held_s"] for p in s["problems"]] == [19.0, 19.0]  # four candidates and the baseline job
    assert s["first_trial_s"] == {"sum": 2 * (0.5 + 1.5 + 2.5 + 3.5), "median": 2.0, "n": 8}
    # the timing stage's parts (a count among the notes is not one)
    assert s["timing_parts"] == {"call": {"sum": 12.0, "median": 1.5, "n": 8},
                                 "prepare": {"sum": 3.0, "median": 0.375, "n": 8}}


def test_a_bench_from_before_the_span_was_recorded_has_none(tmp_path):
    mod = _module()
    out = _bench(tmp_path, {"a": (1000.0, 1060.0)}, {"a": "local"})
    (out / "runs" / "a" / "bench.json").write_text(json.dumps({"wall_s": 60.0}))
    s = mod.summarize(out, set())
    assert s["span_s"] is None and s["candidates_per_min_span"] is None and s["candidates_per_min"] == 4.0
