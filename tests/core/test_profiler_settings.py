"""Classifier and micro-profiler settings come from the YAML config (profiling.classifier_params,
profiling.micro_profiler_params), validated by each plugin's Settings class, unknown keys and
names rejected in one line each; the loop, ``profile`` and ``analyze`` all apply them."""

from __future__ import annotations

import json
import types

import attrs
import pytest
from click.testing import CliRunner

from kernelpro import cli as cli_mod
from kernelpro import config as cfg
from kernelpro.api import Analyzer, BottleneckClassifier, MicroProfiler
from kernelpro.hookspecs import hookimpl
from kernelpro.loop import Optimizer, Progress
from kernelpro.plugins import Plugins
from kernelpro.problem import load_problem
from kernelpro.records import Bottleneck, Finding, KernelProfile, ProfileData

from helpers import DATA


@attrs.frozen
class ThresholdSettings:
    busy_pct: float = 60.0


class ThresholdClassifier(BottleneckClassifier):
    name = "threshold"
    Settings = ThresholdSettings

    def classify(self, profiles, context):
        dram = profiles["kernel"].kernels[0].metrics["dram_pct"]
        kind = "memory" if dram >= self.settings.busy_pct else "latency"
        return Bottleneck(kind=kind, summary=f"DRAM {dram}% vs {self.settings.busy_pct}%", classifier=self.name)


@attrs.frozen
class ShareSettings:
    min_share: float = 0.5
    label: str = "default"


class ShareProfiler(MicroProfiler):
    name = "share"
    Settings = ShareSettings

    def analyze(self, profile, bottleneck, context):
        share = profile.kernels[0].metrics["share"]
        if share < self.settings.min_share:
            return []
        return [Finding(tool=self.name, severity="low", title=self.settings.label, message=f"share {share}",
                        action="act")]


class PlainProfiler(MicroProfiler):
    name = "plain"

    def analyze(self, profile, bottleneck, context):
        return []


class FileAnalyzer(Analyzer):
    name = "fake_file"

    def accepts(self, path):
        return str(path).endswith(".fake")

    def load(self, path):
        return ProfileData(level="kernel", collector=self.name,
                           kernels=(KernelProfile(name="k", metrics={"dram_pct": 70.0, "share": 0.4}),))


PLUGIN = types.SimpleNamespace(
    kernelpro_register_classifiers=hookimpl(lambda register: register(ThresholdClassifier)),
    kernelpro_register_micro_profilers=hookimpl(lambda register: [register(ShareProfiler), register(PlainProfiler)]),
    kernelpro_register_analyzers=hookimpl(lambda register: register(FileAnalyzer)),
)


def plugins(entry_points: bool = False) -> Plugins:
    return Plugins(entry_points=entry_points, extra=[("settings_test", PLUGIN)])


def settings_of(yaml_profiling: dict) -> dict:
    config = cfg.structure({"profiling": {"classifier": "threshold", **yaml_profiling}}, cfg.Config)
    return cfg.profiling_settings(config, plugins())


def test_params_are_validated_into_each_plugin_s_settings():
    got = settings_of({"classifier_params": {"busy_pct": 80}, "micro_profiler_params": {"share": {"min_share": 0.3}}})
    assert got["classifier"] == ThresholdSettings(busy_pct=80.0)
    assert got["micro_profilers"] == {"share": ShareSettings(min_share=0.3)}
    assert settings_of({})["classifier"] is None and settings_of({})["micro_profilers"] == {}


@pytest.mark.parametrize("profiling, problem", [
    ({"classifier_params": {"bussy_pct": 80}}, "profiling.classifier_params.bussy_pct: unknown key (did you mean 'busy_pct'?)"),
    ({"classifier_params": {"busy_pct": "high"}}, "profiling.classifier_params.busy_pct: expected float, got 'high'"),
    ({"classifier": "roofline_x", "classifier_params": {"busy_pct": 1}},
     "profiling.classifier_params: the classifier 'roofline_x' is not installed; available: threshold"),
    ({"micro_profiler_params": {"share": {"min_shar": 1}}},
     "profiling.micro_profiler_params.share.min_shar: unknown key (did you mean 'min_share'?)"),
    ({"micro_profiler_params": {"plain": {"x": 1}}}, "profiling.micro_profiler_params.plain.x: unknown key"),
    ({"micro_profiler_params": {"shares": {}}},
     "profiling.micro_profiler_params.shares: unknown micro-profiler 'shares' (did you mean 'share'?); "
     "available: plain, share"),
])
def test_bad_params_are_one_line_each(profiling, problem):
    with pytest.raises(cfg.ConfigError) as exc:
        settings_of(profiling)
    assert exc.value.problems == [problem]


def test_config_validate_reports_them(tmp_path, monkeypatch):
    monkeypatch.setattr(cli_mod, "load_plugins", lambda block=(): plugins(entry_points=True))
    path = tmp_path / "c.yaml"
    path.write_text("profiling:\n  classifier: threshold\n  micro_profiler_params: {share: {min_shar: 1}}\n")
    res = CliRunner().invoke(cli_mod.cli, ["config", "validate", str(path)])
    assert res.exit_code == 2
    assert res.output.strip() == ("error: profiling.micro_profiler_params.share.min_shar: unknown key "
                                  "(did you mean 'min_share'?)")


def test_analyze_applies_the_settings(tmp_path, monkeypatch):
    monkeypatch.setattr(cli_mod, "load_plugins", lambda block=(): plugins())
    report = tmp_path / "k.fake"
    report.write_text("")
    config = tmp_path / "c.yaml"

    def analyze(profiling: str) -> dict:
        config.write_text(f"profiling:\n  classifier: threshold\n{profiling}")
        res = CliRunner().invoke(cli_mod.cli, ["analyze", str(report), "-c", str(config), "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    default = analyze("")
    assert default["bottleneck"]["kind"] == "memory" and default["findings"] == []
    tuned = analyze("  classifier_params: {busy_pct: 80}\n"
                    "  micro_profiler_params: {share: {min_share: 0.3, label: tuned}}\n")
    assert tuned["bottleneck"]["kind"] == "latency"
    assert [f["title"] for f in tuned["findings"]] == ["tuned"]


def test_the_loop_s_profiler_gets_the_settings(tmp_path):
    config = cfg.load_config(None, {"device": "cpu", "profiling": {
        "classifier": "threshold", "classifier_params": {"busy_pct": 75},
        "micro_profiler_params": {"share": {"label": "loop"}}}})
    opt = Optimizer(load_problem(DATA / "tiny_problem.py"), config, plugins(entry_points=True), tmp_path / "run",
                    "cpu", Progress(warning=lambda s: None))
    assert opt.profiler.classifier.settings == ThresholdSettings(busy_pct=75.0)
    by_name = {m.name: m for m in opt.profiler.micro_profilers}
    assert by_name["share"].settings == ShareSettings(label="loop")


def test_collector_settings_come_from_the_config_and_unknown_ones_are_one_line():
    pytest.importorskip("kernelpro_plugins_ncu")
    from kernelpro.profile.pipeline import Profiler

    plugins = Plugins()
    config = cfg.load_config(None, {"profiling": {"collector_params": {"ncu": {"max_kernels": 7}}}})
    settings = cfg.profiling_settings(config, plugins)
    profiler = Profiler(plugins, None, ["ncu"], collector_settings=settings["collectors"])
    assert profiler.collectors[0].settings.max_kernels == 7
    for params, needle in (({"ncu": {"max_kernel": 7}}, "profiling.collector_params.ncu"),
                           ({"nvprof": {}}, "profiling.collector_params.nvprof: unknown collector 'nvprof'")):
        bad = cfg.load_config(None, {"profiling": {"collector_params": params}})
        with pytest.raises(cfg.ConfigError) as info:
            cfg.profiling_settings(bad, plugins)
        assert len(info.value.problems) == 1 and needle in info.value.problems[0], info.value.problems
