"""Each system micro-profiler fires on the synthetic trace built for it, with its numbers,
and stays quiet on a good (fused) forward."""

from __future__ import annotations

import pytest
from kernelpro.api import ProfileContext
from kernelpro.records import Bottleneck, ProfileData

import nsys_synth as synth
from kernelpro_plugins_nsys.analyzer import TraceAnalyzer
from kernelpro_plugins_nsys.micro import (
    MICRO_PROFILERS,
    AllocatorChurn,
    CpuOverhead,
    HostDeviceCopies,
    HostSync,
    IdleGaps,
    KernelTimeShare,
    LaunchBound,
)

CTX = ProfileContext(gpu=None, device="cuda")


def load(builder, tmp_path, name="t.json"):
    return TraceAnalyzer().load(builder.write(tmp_path / name))


def fired(profile) -> dict[str, list]:
    out = {}
    for cls in MICRO_PROFILERS:
        found = cls().analyze(profile, None, CTX)
        if found:
            out[cls.name] = found
    return out


def check_filled(finding):
    assert finding.level == "system"
    assert finding.message and finding.action and finding.title
    assert finding.estimated_gain is not None and 0.0 <= finding.estimated_gain <= 0.95
    assert finding.evidence and all(isinstance(v, float) or isinstance(v, int) for v in finding.evidence.values())


def test_good_forward_is_quiet_except_kernel_share(tmp_path):
    got = fired(load(synth.fused(), tmp_path))
    assert set(got) == {"kernel_time_share"}
    (f,) = got["kernel_time_share"]
    assert f.severity == "info" and f.kernel == "sm90_gemm_kernel"
    assert f.evidence["top1_share"] == pytest.approx(1.0)
    check_filled(f)


def test_launch_bound(tmp_path):
    (f,) = LaunchBound().analyze(load(synth.launch_bound(), tmp_path), None, CTX)
    check_filled(f)
    assert f.severity == "high"
    assert f.evidence["launches_per_forward"] == 50
    assert f.evidence["median_kernel_us"] == pytest.approx(2.0)
    assert f.evidence["gpu_idle_share"] == pytest.approx(405.0 / 505.0)
    assert f.estimated_gain == pytest.approx(405.0 / 505.0, abs=1e-4)
    assert "CUDA graph" in f.action


def test_launch_bound_needs_many_launches(tmp_path):
    assert LaunchBound().analyze(load(synth.launch_bound(launches=10), tmp_path), None, CTX) == []


def test_host_sync(tmp_path):
    (f,) = HostSync().analyze(load(synth.host_sync(), tmp_path), None, CTX)
    check_filled(f)
    assert "aten::item" in f.message
    assert f.evidence["syncs_per_forward"] == 1
    assert f.evidence["sync_bubble_us"] == pytest.approx(38.0)
    assert f.estimated_gain == pytest.approx(38.0 / 260.0, abs=1e-4)


def test_host_device_copies(tmp_path):
    (f,) = HostDeviceCopies().analyze(load(synth.copies(), tmp_path), None, CTX)
    check_filled(f)
    assert f.evidence["htod_bytes_per_forward"] == 1 << 20
    assert "1.0 MiB" in f.message
    (g,) = HostDeviceCopies().analyze(load(synth.host_sync(), tmp_path), None, CTX)
    assert g.evidence["dtoh_copies_per_forward"] == 1


def test_allocator_churn(tmp_path):
    (f,) = AllocatorChurn().analyze(load(synth.alloc_churn(), tmp_path), None, CTX)
    check_filled(f)
    assert f.severity == "high"  # 240 us of malloc/free in a 500 us call
    assert f.evidence["malloc_calls_per_forward"] == 1 and f.evidence["free_calls_per_forward"] == 1
    # reserved memory grows and shrinks once per call; the very first event of the trace
    # has no predecessor to compare with, so the first call shows one change;
    assert f.evidence["reserved_changes_per_forward"] == 2  # median over the calls


def test_allocator_churn_from_allocator_events_alone(tmp_path):
    b = synth.TraceBuilder()
    b.annotation("kernelpro:forward", 0.0, 400.0)
    b.launch("aten::mul", 0.0, "k", 5.0)
    for i in range(40):  # 40 allocations, 1 kernel, no reserved change
        b.memory(20.0 + i * 5, 4096, 4096 * (i + 1), 1 << 21)
    (f,) = AllocatorChurn().analyze(load(b, tmp_path), None, CTX)
    assert f.severity == "low" and f.evidence["alloc_events_per_forward"] == 40


def test_cpu_overhead(tmp_path):
    (f,) = CpuOverhead().analyze(load(synth.cpu_overhead(), tmp_path), None, CTX)
    check_filled(f)
    assert f.severity == "high"
    assert f.evidence["python_us"] == pytest.approx(5005.0)
    assert f.evidence["gpu_busy_share"] < 0.02


def test_idle_gaps(tmp_path):
    (f,) = IdleGaps().analyze(load(synth.cpu_overhead(), tmp_path), None, CTX)
    check_filled(f)
    assert f.evidence["largest_gap_us"] == pytest.approx(5008.0)
    assert "python (no operator running)" in f.message


def test_quiet_without_gpu_and_on_other_levels(tmp_path):
    b = synth.TraceBuilder()
    b.annotation("kernelpro:forward", 0.0, 100.0)
    b.op("aten::mm", 1.0, 98.0)
    cpu_profile = load(b, tmp_path)
    assert cpu_profile.payload.device == "cpu"
    assert fired(cpu_profile) == {}
    other = ProfileData(level="kernel", collector="ncu")
    assert all(cls().analyze(other, None, CTX) == [] for cls in MICRO_PROFILERS)


def test_cpu_trace_python_overhead(tmp_path):
    b = synth.TraceBuilder()
    b.annotation("kernelpro:forward", 0.0, 1000.0)
    b.op("aten::mm", 900.0, 90.0)
    (f,) = CpuOverhead().analyze(load(b, tmp_path), None, CTX)
    assert f.evidence["python_us"] == pytest.approx(910.0)
    assert "CPU trace" in f.message


def test_gate():
    memory = Bottleneck(kind="memory", summary="")
    latency = Bottleneck(kind="latency", summary="")
    assert LaunchBound().applies(None) and LaunchBound().applies(latency)
    assert not LaunchBound().applies(memory) and not IdleGaps().applies(memory)
    assert not CpuOverhead().applies(memory)
    assert HostSync().applies(memory) and KernelTimeShare().applies(memory)
    for cls in MICRO_PROFILERS:
        assert cls.level == "system" and cls.metrics == () and cls.name
