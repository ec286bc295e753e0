"""The two-stage gate, with plugin classes registered directly (no GPU needed)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from kernelpro.api import (
    ANY,
    BottleneckClassifier,
    Collector,
    MicroProfiler,
    ProfileContext,
    ProfileTarget,
)
from kernelpro.hookspecs import hookimpl
from kernelpro.plugins import Plugins
from kernelpro.profile.pipeline import Profiler
from kernelpro.records import Bottleneck, Finding, KernelProfile, ProfileData

CALLS: list[tuple] = []


class FakeKernelCollector(Collector):
    name = "fake_kernel"
    level = "kernel"

    def collect(self, target, stage, metrics=()):
        CALLS.append(("kernel", stage, tuple(metrics)))
        return ProfileData(level="kernel", collector=self.name,
                           kernels=(KernelProfile(name="k", metrics={"dram_pct": 90.0, f"stage{stage}": 1.0}),))


class MissingCollector(Collector):
    name = "missing"
    level = "system"

    def unavailable_reason(self, target):
        return "the tool is not installed (install it)"

    def collect(self, target, stage, metrics=()):  # pragma: no cover - never called
        raise AssertionError("an unavailable collector must not run")


class FakeClassifier(BottleneckClassifier):
    name = "fake"

    def classify(self, profiles, context):
        dram = profiles["kernel"].kernels[0].metrics["dram_pct"]
        return Bottleneck(kind="memory" if dram > 60 else "compute", summary=f"DRAM {dram}%", classifier=self.name)


def _mp(name, applies, metrics):
    def analyze(self, profile, bottleneck, context):
        k = profile.kernels[0]
        return [Finding(tool=self.name, severity="medium", title=name, message=f"saw {sorted(k.metrics)}",
                        action="act", estimated_gain=0.1)]

    return type(name, (MicroProfiler,), {"name": name, "level": "kernel", "applies_to": frozenset(applies),
                                         "metrics": metrics, "analyze": analyze})


MemOnly = _mp("mem_only", {"memory"}, ("m1", "m2"))
ComputeOnly = _mp("compute_only", {"compute"}, ("c1",))
Always = _mp("always", {ANY}, ("m2", "a1"))


def _plugins():
    plugin = types.SimpleNamespace(
        kernelpro_register_collectors=hookimpl(lambda register: [register(FakeKernelCollector),
                                                                 register(MissingCollector)]),
        kernelpro_register_classifiers=hookimpl(lambda register: register(FakeClassifier)),
        kernelpro_register_micro_profilers=hookimpl(
            lambda register: [register(MemOnly), register(ComputeOnly), register(Always)]),
    )
    return Plugins(entry_points=False, extra=[("fake", plugin)])


def _target(tmp_path: Path) -> ProfileTarget:
    return ProfileTarget(problem_path=tmp_path / "p.py", candidate_path=tmp_path / "c.py", device="cuda",
                         workdir=tmp_path)


def test_gate_runs_only_matching_micro_profilers_and_stage2_gets_their_metrics(tmp_path):
    CALLS.clear()
    profiler = Profiler(_plugins(), classifier="fake")
    analysis, profiles = profiler.profile(_target(tmp_path), ProfileContext(gpu=None, device="cuda"))
    assert analysis.bottleneck.kind == "memory"
    assert sorted(f.tool for f in analysis.findings) == ["always", "mem_only"]
    assert CALLS == [("kernel", 1, ()), ("kernel", 2, ("a1", "m1", "m2"))]
    # stage-2 numbers are merged with stage-1 numbers
    assert {"stage1", "stage2"} <= set(profiles["kernel"].kernels[0].metrics)
    assert any("missing: the tool is not installed" in n for n in analysis.notes)


def test_named_micro_profilers_only(tmp_path):
    profiler = Profiler(_plugins(), classifier="fake")
    analysis, _ = profiler.profile(_target(tmp_path), ProfileContext(gpu=None, device="cuda"), only=["always"])
    assert [f.tool for f in analysis.findings] == ["always"]


def test_unknown_classifier_is_a_note_not_a_failure(tmp_path):
    profiler = Profiler(_plugins(), classifier="nope")
    analysis, _ = profiler.profile(_target(tmp_path), ProfileContext(gpu=None, device="cuda"))
    assert analysis.bottleneck is None
    assert any("unknown bottleneck classifier 'nope'" in n for n in analysis.notes)
    # nothing to gate on: every micro-profiler ran
    assert sorted(f.tool for f in analysis.findings) == ["always", "compute_only", "mem_only"]


def test_blocked_micro_profiler_does_not_run(tmp_path):
    profiler = Profiler(_plugins(), classifier="fake", block_micro_profilers=["always"])
    analysis, _ = profiler.profile(_target(tmp_path), ProfileContext(gpu=None, device="cuda"))
    assert [f.tool for f in analysis.findings] == ["mem_only"]


class CombiningKernelCollector(FakeKernelCollector):
    """A kernel collector that collects stage 1 and stage-2 metrics in one pass; its DRAM
    share is what the test sets (memory-bound above 60 %)."""

    name = "fake_kernel"
    combines_stages = True
    dram = 90.0

    def collect(self, target, stage, metrics=()):
        CALLS.append(("kernel", stage, tuple(metrics)))
        values = {"dram_pct": self.dram, f"stage{stage}": 1.0, **{m: 1.0 for m in metrics}}
        return ProfileData(level="kernel", collector=self.name, kernels=(KernelProfile(name="k", metrics=values),))


def _combining_plugins(collector):
    plugin = types.SimpleNamespace(
        kernelpro_register_collectors=hookimpl(lambda register: register(collector)),
        kernelpro_register_classifiers=hookimpl(lambda register: register(FakeClassifier)),
        kernelpro_register_micro_profilers=hookimpl(
            lambda register: [register(MemOnly), register(ComputeOnly), register(Always)]),
    )
    return Plugins(entry_points=False, extra=[("fake", plugin)])


MEMORY = Bottleneck(kind="memory", summary="the parent's", classifier="fake")


def test_the_parent_s_bottleneck_puts_its_metrics_into_stage_1_and_saves_stage_2(tmp_path):
    CALLS.clear()
    profiler = Profiler(_combining_plugins(CombiningKernelCollector), classifier="fake")
    analysis, profiles = profiler.profile(_target(tmp_path), ProfileContext(gpu=None, device="cuda"),
                                          predicted=MEMORY)
    assert CALLS == [("kernel", 1, ("a1", "m1", "m2"))]  # one pass
    assert analysis.bottleneck.kind == "memory"
    assert sorted(f.tool for f in analysis.findings) == ["always", "mem_only"]
    assert {"m1", "m2", "a1"} <= set(profiles["kernel"].kernels[0].metrics)
    assert any("fake_kernel: one pass" in n for n in analysis.notes)


def test_a_wrong_prediction_costs_the_usual_second_pass(tmp_path):
    class ComputeBound(CombiningKernelCollector):
        dram = 20.0

    CALLS.clear()
    profiler = Profiler(_combining_plugins(ComputeBound), classifier="fake")
    analysis, _ = profiler.profile(_target(tmp_path), ProfileContext(gpu=None, device="cuda"), predicted=MEMORY)
    assert analysis.bottleneck.kind == "compute"
    assert CALLS == [("kernel", 1, ("a1", "m1", "m2")), ("kernel", 2, ("a1", "c1", "m2"))]
    assert sorted(f.tool for f in analysis.findings) == ["always", "compute_only"]
    assert not any("one pass" in n for n in analysis.notes)


def test_a_collector_that_does_not_combine_is_never_asked_to(tmp_path):
    CALLS.clear()
    profiler = Profiler(_combining_plugins(FakeKernelCollector), classifier="fake")
    profiler.profile(_target(tmp_path), ProfileContext(gpu=None, device="cuda"), predicted=MEMORY)
    assert CALLS == [("kernel", 1, ()), ("kernel", 2, ("a1", "m1", "m2"))]
    # nor when the micro-profilers are named (the LLM tool): the prediction is not used
    CALLS.clear()
    Profiler(_combining_plugins(CombiningKernelCollector), classifier="fake").profile(
        _target(tmp_path), ProfileContext(gpu=None, device="cuda"), only=["always"], predicted=MEMORY)
    assert CALLS[0] == ("kernel", 1, ())


@pytest.mark.parametrize("dram,kind", [(90.0, "memory"), (20.0, "compute")])
def test_stage1_ahead_all_takes_every_kernel_metric_in_one_pass(tmp_path, dram, kind):
    class Collector(CombiningKernelCollector):
        pass

    Collector.dram = dram
    CALLS.clear()
    profiler = Profiler(_combining_plugins(Collector), classifier="fake", ahead="all")
    analysis, _ = profiler.profile(_target(tmp_path), ProfileContext(gpu=None, device="cuda"))  # no parent
    assert CALLS == [("kernel", 1, ("a1", "c1", "m1", "m2"))]  # whatever the bottleneck: one pass
    assert analysis.bottleneck.kind == kind
    assert any("stage1_ahead: all" in n for n in analysis.notes)


def test_stage1_ahead_none_never_combines(tmp_path):
    CALLS.clear()
    Profiler(_combining_plugins(CombiningKernelCollector), classifier="fake", ahead="none").profile(
        _target(tmp_path), ProfileContext(gpu=None, device="cuda"), predicted=MEMORY)
    assert CALLS == [("kernel", 1, ()), ("kernel", 2, ("a1", "m1", "m2"))]


def test_the_next_profile_s_first_pass_is_started_ahead_when_it_is_known(tmp_path):
    """With ``stage1_ahead`` all (or none), the next profile's first kernel pass asks for
    what this one's did: the collector is told so when a profile ends (``start_ahead``);
    with ``parent`` it depends on the next parent, and nothing is started."""
    started = []

    class Ahead(CombiningKernelCollector):
        def start_ahead(self, target, stage=1, metrics=()):
            started.append((stage, tuple(metrics)))

    class Broken(CombiningKernelCollector):
        def start_ahead(self, target, stage=1, metrics=()):
            raise RuntimeError("no head start here")

    for mode, want in (("all", [(1, ("a1", "c1", "m1", "m2"))]), ("none", [(1, ())]), ("parent", [])):
        started.clear()
        Profiler(_combining_plugins(Ahead), classifier="fake", ahead=mode).profile(
            _target(tmp_path), ProfileContext(gpu=None, device="cuda"))
        assert started == want, mode
    # not for a profile of named micro-profilers (the LLM's tool), and a failing head start
    # costs the profile nothing
    started.clear()
    Profiler(_combining_plugins(Ahead), classifier="fake", ahead="all").profile(
        _target(tmp_path), ProfileContext(gpu=None, device="cuda"), only=["always"])
    assert started == []
    analysis, _ = Profiler(_combining_plugins(Broken), classifier="fake", ahead="all").profile(
        _target(tmp_path), ProfileContext(gpu=None, device="cuda"))
    assert analysis.bottleneck is not None


def test_stage1_ahead_is_checked_in_config():
    from kernelpro.config import ProfilingConfig

    assert ProfilingConfig(stage1_ahead="all").stage1_ahead == "all"
    with pytest.raises(ValueError, match="stage1_ahead"):
        ProfilingConfig(stage1_ahead="everything")


def test_the_profile_command_and_the_loop_build_the_same_profiler():
    # make_profiler is what both use: profiling.stage1_ahead reaches the pipeline either way
    from kernelpro.config import Config, ProfilingConfig, profiling_settings
    from kernelpro.executors.calls import make_profiler

    plugins = _combining_plugins(CombiningKernelCollector)
    config = Config(profiling=ProfilingConfig(classifier="fake", stage1_ahead="all"))
    profiler = make_profiler(config, plugins, profiling_settings(config, plugins))
    assert profiler.ahead == "all" and [c.name for c in profiler.collectors] == ["fake_kernel"]
