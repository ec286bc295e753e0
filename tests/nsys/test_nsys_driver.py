"""The trace driver and the collector end to end on CPU: a real torch.profiler recording."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from kernelpro.api import CollectorError, ProfileTarget

from kernelpro_plugins_nsys import kineto, nsys_tool
from kernelpro_plugins_nsys.analysis import analyze
from kernelpro_plugins_nsys.collector import TimelineCollector, TimelineSettings, cost_seconds
from kernelpro_plugins_nsys.trace import TRACE_META_KEY, command

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            for _ in range(6):
                x = torch.sin(x) * 0.5
            return x

    def get_inputs():
        return [torch.randn(16, 16)]

    def get_init_inputs():
        return []
''')


@pytest.fixture()
def tiny(tmp_path):
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    candidate = tmp_path / "candidate.py"
    candidate.write_text(PROBLEM.replace("class Model(", "class ModelNew("))
    return problem, candidate


def test_driver_records_cpu_forwards(tiny, tmp_path):
    problem, candidate = tiny
    out = tmp_path / "trace.json.gz"
    proc = subprocess.run(command(problem, candidate, out, device="cpu", warmup=1, iters=2),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    data = kineto.load_json(out)
    meta = data[TRACE_META_KEY]
    assert meta["device"] == "cpu" and meta["iters"] == 2 and len(meta["forward_wall_ms"]) == 2
    st = analyze(kineto.read(out))
    assert st.device == "cpu" and st.window_kind == "annotation" and len(st.forwards) == 2
    ops = dict((name, count) for name, _, count in st.forwards[0].top_host_ops)
    assert ops["aten::sin"] == 6 and ops["aten::mul"] == 6
    assert st.forwards[0].alloc_events >= 12  # one fresh output per operator


def test_driver_failure_is_one_line(tiny, tmp_path):
    problem, _ = tiny
    proc = subprocess.run(command(problem, problem, tmp_path / "t.json", device="cpu", warmup=0, iters=1),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("trace failed:")]
    assert lines == ["trace failed: AttributeError: module 'kernelpro_candidate' has no attribute 'ModelNew'"]


def test_collector_on_cpu(tiny, tmp_path):
    problem, candidate = tiny
    target = ProfileTarget(problem_path=problem, candidate_path=candidate, device="cpu",
                           workdir=tmp_path / "work", python=sys.executable)
    collector = TimelineCollector(TimelineSettings(warmup=1, iters=2, timeout_s=240))
    assert collector.unavailable_reason(target) is None
    data = collector.collect(target, stage=1)
    assert data.level == "system" and data.collector == "timeline"
    assert data.payload.source == "kineto" and len(data.payload.forwards) == 2
    assert collector.collect(target, stage=2) is data  # stage 2 reuses the recording
    assert (tmp_path / "work" / "timeline" / "trace.json.gz").exists()
    # where the recording's seconds went, the driver's stages from its own clock
    parts = data.seconds
    assert set(parts) == {"driver_startup", "driver_torch_import", "driver_prepare", "driver_warmup",
                          "driver_record", "driver_export", "driver_write", "read_trace"}, parts
    assert all(v >= 0 for v in parts.values()) and parts["driver_record"] > 0
    assert not any("cost" in n for n in data.notes)  # none of it reaches the LLM's prompt


def test_cost_seconds_without_the_driver_s_stages():
    # an older driver (or a lost sidecar) leaves only the collector's two clocks
    assert cost_seconds(4.0, {}, 0.5) == {"driver": 4.0, "read_trace": 0.5}
    assert cost_seconds(10.0, {"torch_import": 3.0, "prepare": 2.0}, 1.0) == {
        "driver_startup": 5.0, "driver_torch_import": 3.0, "driver_prepare": 2.0, "read_trace": 1.0}


def test_collector_errors_are_one_line(tiny, tmp_path):
    problem, _ = tiny
    target = ProfileTarget(problem_path=problem, candidate_path=problem, device="cpu",
                           workdir=tmp_path / "work", python=sys.executable)
    with pytest.raises(CollectorError) as err:
        TimelineCollector(TimelineSettings(warmup=0, iters=1, timeout_s=240)).collect(target, stage=1)
    assert "\n" not in str(err.value) and "has no attribute 'ModelNew'" in str(err.value)
    odd = ProfileTarget(problem_path=problem, candidate_path=problem, device="mps", workdir=tmp_path)
    assert "not 'mps'" in TimelineCollector().unavailable_reason(odd)
    missing = ProfileTarget(problem_path=problem, candidate_path=problem, device="cpu", workdir=tmp_path,
                            python="/nonexistent/python3")
    assert "not found" in TimelineCollector().unavailable_reason(missing)


def test_nsys_that_leaves_only_qdstrm_is_marked_unusable(tiny, tmp_path, monkeypatch):
    """A stand-in nsys that behaves like the H200 image's: writes a .qdstrm, no report."""
    fake = tmp_path / "nsys"
    fake.write_text(textwrap.dedent('''\
        #!/bin/sh
        while [ "$1" != "-o" ]; do shift; done
        : > "$2.qdstrm"
        echo "Importer not found" >&2
        exit 0
    '''))
    fake.chmod(0o755)
    with pytest.raises(nsys_tool.NsysUnusable) as err:
        nsys_tool.record(str(fake), ["true"], tmp_path / "out", {}, tmp_path, 30)
    assert "out.qdstrm" in str(err.value) and "no report" in str(err.value)
    monkeypatch.setenv(nsys_tool.NSYS_ENV, str(fake))
    assert nsys_tool.find_nsys() == str(fake)
    monkeypatch.setenv(nsys_tool.NSYS_ENV, "off")
    assert nsys_tool.find_nsys() is None


def test_collector_falls_back_from_unusable_nsys(tiny, tmp_path, monkeypatch):
    """With a CUDA device the collector would try nsys first; a recorded verdict that this
    nsys cannot report sends it straight to the PyTorch profiler, with a note."""
    problem, candidate = tiny
    monkeypatch.setitem(nsys_tool.UNUSABLE, "/opt/fake/nsys", "left launch.qdstrm and no report")
    monkeypatch.setattr(nsys_tool, "find_nsys", lambda explicit="": "/opt/fake/nsys")
    monkeypatch.setattr(nsys_tool, "record", lambda *a, **k: pytest.fail("nsys was tried again"))
    collector = TimelineCollector(TimelineSettings(warmup=0, iters=1, timeout_s=240))
    target = ProfileTarget(problem_path=problem, candidate_path=candidate, device="cuda:0",
                           workdir=tmp_path / "work", python=sys.executable)
    with pytest.raises(CollectorError, match="torch sees no CUDA device"):
        collector.collect(target, stage=1)  # this CPU machine: the fallback driver runs and says why


def test_collector_tries_nsys_once_then_remembers(tiny, tmp_path, monkeypatch):
    problem, candidate = tiny
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fake = tmp_path / "nsys"
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != \"-o\" ]; do shift; done\n: > \"$2.qdstrm\"\n")
    fake.chmod(0o755)
    monkeypatch.setattr(nsys_tool, "UNUSABLE", {})
    collector = TimelineCollector(TimelineSettings(nsys_path=str(fake), warmup=0, iters=1, timeout_s=240))
    target = ProfileTarget(problem_path=problem, candidate_path=candidate, device="cuda",
                           workdir=tmp_path / "work", python=sys.executable)
    with pytest.raises(CollectorError, match="torch sees no CUDA device"):
        collector.collect(target, stage=1)
    assert "nsys.qdstrm" in nsys_tool.UNUSABLE[str(fake)]
    # a later run (a fresh process) reads the verdict back instead of trying again
    monkeypatch.setattr(nsys_tool, "UNUSABLE", {})
    assert "nsys.qdstrm" in nsys_tool.known_unusable(str(fake))


def test_hung_nsys_is_killed_and_marked_unusable(tmp_path, monkeypatch):
    """The H200 image's nsys neither finished nor wrote a file within 45 s."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(nsys_tool, "UNUSABLE", {})
    fake = tmp_path / "nsys"
    fake.write_text("#!/bin/sh\nsleep 300 &\nsleep 300\n")
    fake.chmod(0o755)
    with pytest.raises(nsys_tool.NsysUnusable, match="did not finish within 2 s") as err:
        nsys_tool.record(str(fake), ["true"], tmp_path / "out", {}, tmp_path, 2)
    nsys_tool.mark_unusable(str(fake), str(err.value))
    monkeypatch.setattr(nsys_tool, "UNUSABLE", {})
    assert "did not finish" in nsys_tool.known_unusable(str(fake))
    assert nsys_tool.known_unusable(str(tmp_path / "other-nsys")) is None


def test_nvtx_mode_runs_without_recording(tiny, tmp_path):
    """The program nsys runs: annotated calls, nothing written by the driver itself."""
    problem, candidate = tiny
    out = tmp_path / "unused.json"
    proc = subprocess.run(command(problem, candidate, out, device="cpu", warmup=1, iters=1, mode="nvtx"),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert not out.exists()
