"""End to end through the real CLI on a CPU: energy requested, unavailable, the run goes on
with the reward's speed fallback and the report says why."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

DATA = Path(__file__).parent / "data"


def _has_echo_generator() -> bool:
    from kernelpro.plugins import Plugins

    return "testplugin_echo" in Plugins().names("generator")


@pytest.mark.skipif(not _has_echo_generator(), reason="tests/plugin_dist (testplugin_echo) is not installed")
def test_cpu_run_with_energy_reward_falls_back_to_speed(tmp_path):
    run = tmp_path / "run"
    res = subprocess.run(
        [sys.executable, "-m", "kernelpro.cli", "optimize", str(DATA / "energy_tiny_problem.py"),
         "-c", str(DATA / "energy_cpu_config.yaml"), "--device", "cpu", "--budget", "2",
         "--generator", "testplugin_echo", "-o", str(run), "--quiet"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ),
    )
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    assert len(records) == 2
    expected_flag = ("measurement_unavailable: energy: energy unavailable: "
                     "energy is measured on CUDA devices only, not 'cpu'")
    for rec in records:
        assert rec["correct"]
        assert expected_flag in rec["flags"]
        assert "energy" not in rec["measurements"]
    # both echo candidates run at about the reference's speed; the faster one is matched
    # and scores its log-speedup; the other is either matched too or in the slow band
    fastest = min(records, key=lambda r: r["runtime_ms"])
    assert fastest["reward"] == pytest.approx(math.log(fastest["speedup"]), abs=1e-9)
    report = (run / "report.md").read_text()
    assert "## Energy" in report
    assert "ranked on speed alone" in report
    assert expected_flag in report


@pytest.mark.skipif(not _has_echo_generator(), reason="tests/plugin_dist (testplugin_echo) is not installed")
def test_measure_within_skips_the_measurement_of_slower_candidates(tmp_path):
    """evaluator.measure_within: 0 -- a candidate slower than the fastest correct one before
    it is timed and checked but not measured (flag measurement_skipped); the first and every
    new fastest one are measured (here: found unavailable, on a CPU)."""
    import yaml

    config = yaml.safe_load((DATA / "energy_cpu_config.yaml").read_text())
    config["evaluator"]["measure_within"] = 0.0
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    res = subprocess.run(
        [sys.executable, "-m", "kernelpro.cli", "optimize", str(DATA / "energy_tiny_problem.py"),
         "-c", str(cfg), "--device", "cpu", "--budget", "4", "--generator", "testplugin_echo",
         "-o", str(run), "--quiet"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["correct"] for r in records)
    fastest = math.inf
    for rec in records:
        skipped = [f for f in rec["flags"] if f.startswith("measurement_skipped: energy: ")]
        unavailable = [f for f in rec["flags"] if f.startswith("measurement_unavailable: energy")]
        if rec["runtime_ms"] > fastest:
            assert skipped and not unavailable, rec["flags"]
            assert "evaluator.measure_within" in skipped[0]
        else:
            assert unavailable and not skipped, rec["flags"]
        fastest = min(fastest, rec["runtime_ms"])
