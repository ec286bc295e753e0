"""Reading Kineto traces into a timeline and the per-forward statistics, on synthetic traces."""

from __future__ import annotations

import gzip
import json

import pytest
from kernelpro.api import CollectorError

import nsys_synth as synth
from kernelpro_plugins_nsys import kineto
from kernelpro_plugins_nsys.analysis import analyze, merge, top_level
from kernelpro_plugins_nsys.timeline import HostOp, api_base_name


def test_launch_bound_windows_and_counts(tmp_path):
    tl = kineto.read(synth.launch_bound(forwards=3, launches=50).write(tmp_path / "t.json"))
    assert tl.window_kind == "annotation"
    assert len(tl.windows) == 3
    st = analyze(tl)
    assert st.device == "cuda"
    f = st.forwards[0]
    assert f.kernels == 50 and f.launches == 50
    assert f.median_kernel_us == pytest.approx(2.0)
    assert f.gpu_busy_us == pytest.approx(100.0)
    # span: window 505 us; last kernel ends at 490 + 8 + 2 = 500
    assert f.span_us == pytest.approx(505.0)
    assert f.idle_us == pytest.approx(405.0)
    # first gap is the launch latency: 8 us before the first kernel
    assert any(g.offset_us == 0.0 and g.dur_us == pytest.approx(8.0) for g in f.gaps)
    assert st.kernels[0].name == "elementwise_kernel" and st.kernels[0].invocations == 150
    assert st.kernels[0].share == pytest.approx(1.0)


def test_sync_attribution_and_bubble(tmp_path):
    st = analyze(kineto.read(synth.host_sync().write(tmp_path / "t.json")))
    f = st.forwards[0]
    assert f.syncs == 1
    assert f.sync_sites == (("aten::item", 1),)
    assert f.sync_us == pytest.approx(92.0)
    # sync returns at +112; the GPU was idle from +111 until the next kernel at +150
    assert f.sync_bubble_us == pytest.approx(38.0)
    assert f.dtoh_copies == 1 and f.dtoh_bytes == 4
    assert f.gpu_busy_us == pytest.approx(202.0)
    assert f.span_us == pytest.approx(260.0)


def test_copies_and_allocator(tmp_path):
    f = analyze(kineto.read(synth.copies().write(tmp_path / "c.json"))).forwards[1]
    assert (f.htod_copies, f.htod_bytes, f.htod_us) == (1, 1 << 20, pytest.approx(25.0))
    a = analyze(kineto.read(synth.alloc_churn().write(tmp_path / "a.json"))).forwards[2]
    assert (a.malloc_calls, a.free_calls) == (1, 1)
    assert a.alloc_api_us == pytest.approx(240.0)
    assert a.alloc_events == 1 and a.free_events == 1 and a.alloc_bytes == 64 << 20
    assert a.reserved_changes == 2


def test_python_time_and_host_only_ops(tmp_path):
    f = analyze(kineto.read(synth.cpu_overhead().write(tmp_path / "t.json"))).forwards[0]
    assert f.python_us == pytest.approx(5020.0 - 15.0)
    assert f.host_only_op_us == 0.0
    assert f.gpu_busy_us == pytest.approx(50.0)


def test_flow_events_link_kernels_without_correlation_args(tmp_path):
    b = synth.TraceBuilder()
    b.annotation("kernelpro:forward", 0.0, 50.0)
    b.op("aten::mul", 1.0, 10.0)
    corr = b.call("cudaLaunchKernel", 2.0, 4.0)
    b.kernel("k", 20.0, 5.0, corr, flow=True)
    tl = kineto.read(b.write(tmp_path / "t.json"))
    assert tl.gpu[0].correlation == corr
    assert analyze(tl).forwards[0].kernels == 1


def test_profiler_steps_and_whole_trace_fallbacks(tmp_path):
    b = synth.TraceBuilder()
    b.annotation("ProfilerStep#4", 0.0, 100.0)
    b.annotation("ProfilerStep#5", 200.0, 100.0)
    b.launch("aten::mul", 10.0, "k", 5.0)
    b.launch("aten::mul", 210.0, "k", 5.0)
    tl = kineto.read(b.write(tmp_path / "steps.json"))
    assert tl.window_kind == "profiler_step" and len(tl.windows) == 2
    b = synth.TraceBuilder()
    b.launch("aten::mul", 10.0, "k", 5.0)
    b.launch("aten::add", 30.0, "k2", 5.0)
    tl = kineto.read(b.write(tmp_path / "whole.json"))
    assert tl.window_kind == "whole_trace" and len(tl.windows) == 1
    f = analyze(tl).forwards[0]
    assert f.kernels == 2 and f.launches == 2


def test_gzip_and_json_array_format(tmp_path):
    data = synth.launch_bound(forwards=1, launches=3).data()
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(data).encode()))
    assert len(kineto.read(gz).windows) == 1
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps(data["traceEvents"]))
    assert analyze(kineto.read(arr)).forwards[0].kernels == 3


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not json at all", "not a JSON trace"),
        (b'{"a": 1}', "no traceEvents list"),
        (b'{"schemaVersion": 1, "traceEvents": []}', "holds no CPU operators"),
        (b"\x1f\x8b\x08\x00garbage", "corrupt gzip trace"),
        (json.dumps({"traceEvents": [{"ph": "X", "cat": "v8", "name": "x", "ts": 1, "dur": 2}]}).encode(),
         "not one from the PyTorch profiler"),
    ],
)
def test_bad_files_give_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(CollectorError) as err:
        kineto.read(path)
    assert message in str(err.value)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(CollectorError, match="cannot read trace"):
        kineto.read(tmp_path / "absent.json")


def test_helpers():
    assert api_base_name("cudaMemcpyAsync_v3020_ptsz") == "cudaMemcpyAsync"
    assert api_base_name("cudaLaunchKernel") == "cudaLaunchKernel"
    assert merge([(5, 7), (0, 2), (1, 3), (7, 8)]) == [(0, 3), (5, 8)]
    ops = [HostOp("a", 0, 10, 1), HostOp("b", 1, 2, 1), HostOp("c", 12, 3, 1)]
    assert [o.name for o in top_level(ops)] == ["a", "c"]
    assert kineto.copy_kind_from_name("Memcpy DtoH (Device -> Pinned)") == "DtoH"


def test_real_cpu_trace_with_profiler_steps(tmp_path):
    """A user's own trace from torch.profiler stepped per iteration: ProfilerStep#N windows."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    x = torch.randn(32, 32)
    # an active window longer than the run: the trace holds both steps when the context exits
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=3),
                 profile_memory=True) as prof:
        for _ in range(2):
            torch.relu(x @ x)
            prof.step()
    path = tmp_path / "user.json"
    prof.export_chrome_trace(str(path))
    tl = kineto.read(path)
    # torch opens a third step range after the last step(); it holds nothing and is dropped
    assert tl.window_kind == "profiler_step" and len(tl.windows) == 3
    st = analyze(tl)
    assert st.device == "cpu" and len(st.forwards) == 2
    names = {name for name, _, _ in st.forwards[0].top_host_ops}
    assert {"aten::matmul", "aten::relu"} <= names
