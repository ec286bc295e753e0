"""The micro-profilers on Kineto traces recorded on an H200 (tests/nsys/fixtures/h200/,
captured by tools/capture/nsys/gpu_capture.py; see docs/validation/nsys_tools.md).
Each problem in fixtures/problems/ was written to show one system-level issue; each
finding must fire on its trace, and only the kernel time share may speak on the good one."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelpro.api import ProfileContext

from kernelpro_plugins_nsys.analyzer import TraceAnalyzer
from kernelpro_plugins_nsys.micro import MICRO_PROFILERS

H200 = Path(__file__).parent / "fixtures" / "h200"
CTX = ProfileContext(gpu=None, device="cuda")

EXPECTED = {
    "fused_matmul": {"kernel_time_share"},
    "launch_bound": {"launch_bound", "idle_gaps", "kernel_time_share"},
    "launch_bound_graphed": {"idle_gaps", "kernel_time_share"},
    "host_sync": {"host_sync", "host_device_copies", "idle_gaps", "kernel_time_share"},
    "alloc_churn": {"allocator_churn", "idle_gaps", "kernel_time_share"},
    "cpu_overhead": {"cpu_overhead", "idle_gaps", "kernel_time_share"},
}


def load(name: str):
    return TraceAnalyzer().load(H200 / f"{name}.json.gz")


def findings(profile) -> dict:
    out = {}
    for cls in MICRO_PROFILERS:
        found = cls().analyze(profile, None, CTX)
        if found:
            out[cls.name] = found
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_which_findings_fire(name):
    profile = load(name)
    assert profile.payload.source == "kineto" and profile.payload.device == "cuda"
    assert profile.payload.window_kind == "annotation" and len(profile.payload.forwards) == 3
    assert set(findings(profile)) == EXPECTED[name]


def test_every_tool_fires_somewhere_and_only_kernel_share_on_the_good_forward():
    fired_anywhere = set().union(*EXPECTED.values())
    assert fired_anywhere == {cls.name for cls in MICRO_PROFILERS}
    assert EXPECTED["fused_matmul"] == {"kernel_time_share"}


def test_launch_bound_numbers():
    tl = load("launch_bound").payload
    assert tl.per_call("launches") == 200 and tl.per_call("kernels") == 200
    assert tl.per_call("median_kernel_us") < 2.0
    assert tl.gpu_idle_share > 0.9
    (f,) = findings(load("launch_bound"))["launch_bound"]
    assert f.severity == "high" and f.estimated_gain > 0.9


def test_graph_replay_kernels_are_attributed_to_the_graph_launch():
    tl = load("launch_bound_graphed").payload
    assert tl.per_call("launches") == 1 and tl.per_call("graph_launches") == 1
    assert tl.per_call("kernels") == 200
    assert tl.per_call("dtod_copies") == 2  # static input copy in, static output clone out


def test_host_sync_sites_and_copies():
    tl = load("host_sync").payload
    f = tl.typical_forward()
    assert dict(f.sync_sites) == {"aten::to": 2, "aten::item": 1}
    assert (f.htod_copies, f.dtoh_copies) == (1, 2)
    assert f.dtoh_bytes == 2048 * 4 + 4  # .cpu() of 2048 floats + the .item() scalar


def test_allocator_churn_counts():
    tl = load("alloc_churn").payload
    assert tl.per_call("malloc_calls") == 4 and tl.per_call("free_calls") == 4
    (f,) = findings(load("alloc_churn"))["allocator_churn"]
    assert f.severity == "high"


def test_cpu_overhead_and_fused_shares():
    cpu = load("cpu_overhead").payload
    assert cpu.per_call("python_us") / cpu.per_call("host_us") > 0.9
    fused = load("fused_matmul").payload
    assert fused.gpu_busy_share > 0.85
    assert fused.kernels[0].share == pytest.approx(1.0)
