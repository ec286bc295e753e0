"""Registration through the plugin manager, the analyzer's accept/reject, and
``kernelpro analyze TRACE --json`` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernelpro.api import CollectorError
from kernelpro.plugins import Plugins

import nsys_synth as synth
from kernelpro_plugins_nsys import plugin
from kernelpro_plugins_nsys.analyzer import TraceAnalyzer


def test_registers_collector_analyzer_and_micro_profilers():
    plugins = Plugins(extra=[("nsys_timeline", plugin)], entry_points=False)
    assert [c.name for c in plugins.collectors()] == ["timeline"]
    assert [a.name for a in plugins.analyzers()] == ["timeline"]
    assert {m.name for m in plugins.micro_profilers()} == {
        "launch_bound", "host_sync", "host_device_copies", "allocator_churn",
        "cpu_overhead", "idle_gaps", "kernel_time_share",
    }


def test_entry_point_declared():
    from importlib import metadata

    eps = {ep.name: ep.value for ep in metadata.entry_points(group="kernelpro")}
    assert eps.get("nsys_timeline") == "kernelpro_plugins_nsys.plugin"


@pytest.mark.parametrize("name, accepted", [
    ("trace.json", True), ("trace.json.gz", True), ("run.PT.TRACE.JSON", True), ("export.sqlite", True),
    ("report.ncu-rep", False), ("kernel.cubin", False), ("trace.gz", False), ("notes.txt", False),
])
def test_accepts_by_name(name, accepted):
    assert TraceAnalyzer().accepts(Path(name)) is accepted


def test_load_errors(tmp_path):
    with pytest.raises(CollectorError, match="no such file"):
        TraceAnalyzer().load(tmp_path / "absent.json")
    other = tmp_path / "x.txt"
    other.write_text("x")
    with pytest.raises(CollectorError, match="not a timeline trace"):
        TraceAnalyzer().load(other)


def _kernelpro(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, KERNELPRO_LOAD_PLUGINS="nsys_timeline,core_gpus")
    return subprocess.run([sys.executable, "-m", "kernelpro.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_cli_analyze_json(tmp_path):
    trace = synth.host_sync().write(tmp_path / "sync.json")
    proc = _kernelpro("analyze", str(trace), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= {"bottleneck", "findings"}
    tools = {f["tool"] for f in out["findings"]}
    assert {"host_sync", "host_device_copies", "kernel_time_share"} <= tools
    assert "launch_bound" not in tools
    sync = next(f for f in out["findings"] if f["tool"] == "host_sync")
    assert sync["level"] == "system" and sync["evidence"]["syncs_per_forward"] == 1


def test_cli_analyze_bad_trace_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    proc = _kernelpro("analyze", str(bad))
    assert proc.returncode != 0
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "not a JSON trace" in errors[0]
    assert "Traceback" not in proc.stderr


PY_LOOP = '''
import math
import torch
import torch.nn as nn

class {cls}(nn.Module):
    def forward(self, x):
        c = sum(math.cos(1e-3 * i) for i in range(200000)) / 200000
        return x * c

def get_inputs():
    return [torch.randn(16, 16)]

def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_cli_profile_runs_the_timeline_collector_on_cpu(tmp_path):
    problem = tmp_path / "problem.py"
    problem.write_text(PY_LOOP.format(cls="Model"))
    candidate = tmp_path / "candidate.py"
    candidate.write_text(PY_LOOP.format(cls="ModelNew"))
    env = dict(os.environ, KERNELPRO_LOAD_PLUGINS="nsys_timeline,core_gpus,core_generators,core_search,core_rewards")
    proc = subprocess.run([sys.executable, "-m", "kernelpro.cli", "profile", str(problem), str(candidate),
                           "--device", "cpu", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (finding,) = [f for f in out["findings"] if f["tool"] == "cpu_overhead"]
    assert finding["evidence"]["overhead_share"] > 0.9
