"""A vendor's GPU spec and heuristics are consulted wherever a GPU is known: ``analyze``
(from the device the file names, or --gpu / config gpu), ``profile`` and ``optimize``
(also on a CPU when the config names a GPU); with none known, the output says so."""

from __future__ import annotations

import json
import types
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from kernelpro import cli as cli_mod
from kernelpro import config as cfg
from kernelpro import gpus
from kernelpro.api import Analyzer, ArchHeuristic, BottleneckClassifier
from kernelpro.hookspecs import hookimpl
from kernelpro.loop import Optimizer, gpu_spec
from kernelpro.plugins import Plugins
from kernelpro.problem import load_problem
from kernelpro.records import Bottleneck, Finding, KernelProfile, ProfileData

from helpers import DATA

LAB = attrs.evolve(gpus.SPECS[1], name="Lab H200 NVL", match=("H200 NVL",), dram_bandwidth_gbs=3900.0)
DEVICE = {"name": None}  # the device name the fake analyzer's file says


class FileAnalyzer(Analyzer):
    name = "fake_file"
    level = "kernel"

    def accepts(self, path):
        return str(path).endswith(".fake")

    def load(self, path):
        return ProfileData(level="kernel", collector=self.name, kernels=(KernelProfile(name="k"),),
                           device_name=DEVICE["name"])


class CeilingClassifier(BottleneckClassifier):
    """Names the ceilings it was handed, as a roofline classifier would use them."""

    name = "ceilings"

    def classify(self, profiles, context):
        gpu = context.gpu.name if context.gpu else "none"
        return Bottleneck(kind="memory", summary=f"ceilings: {gpu}", classifier=self.name)


@attrs.frozen
class HopperSettings:
    word: str = "wgmma"


class HopperHeuristic(ArchHeuristic):
    name = "hopper_notes"
    archs = ("sm_90",)
    Settings = HopperSettings

    def advise(self, bottleneck, profiles, context):
        return [Finding(tool=self.name, severity="info", title=f"use {self.settings.word}",
                        message=f"on {context.gpu.name}", action="read the Hopper guide")]

    def prompt_notes(self, gpu):
        return [f"{gpu.name}: use {self.settings.word}"]


def vendor_plugins(entry_points: bool = False) -> Plugins:
    """The vendor plugin on its own with the built-in specs, or next to every installed plugin."""
    plugin = types.SimpleNamespace(
        kernelpro_register_gpu_specs=hookimpl(lambda register: register(LAB)),
        kernelpro_register_heuristics=hookimpl(lambda register: register(HopperHeuristic)),
        kernelpro_register_analyzers=hookimpl(lambda register: register(FileAnalyzer)),
        kernelpro_register_classifiers=hookimpl(lambda register: register(CeilingClassifier)),
    )
    builtins = [] if entry_points else [("core_gpus", gpus)]
    # without the example vendor package (tests/plugin_examples/vendor): its spec and heuristic would join in
    p = Plugins(block=("example_vendor",), entry_points=entry_points, extra=[*builtins, ("vendor", plugin)])
    p.on_warning = lambda message: None
    return p


@pytest.fixture
def analyze(tmp_path, monkeypatch):
    plugins = vendor_plugins()
    monkeypatch.setattr(cli_mod, "load_plugins", lambda block=(): plugins)
    report = tmp_path / "k.fake"
    report.write_text("")
    config = tmp_path / "c.yaml"

    def run(device_name, *args, config_text="profiling: {classifier: ceilings}\n"):
        DEVICE["name"] = device_name
        config.write_text(config_text)
        res = CliRunner().invoke(cli_mod.cli, ["analyze", str(report), "-c", str(config), *args])
        return res

    return run


def _json(res) -> dict:
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_analyze_uses_the_vendor_spec_and_heuristic_of_the_file_s_device(analyze):
    data = _json(analyze("NVIDIA H200 NVL", "--json"))
    assert data["bottleneck"]["summary"] == "ceilings: Lab H200 NVL"
    assert [(f["tool"], f["message"]) for f in data["findings"]] == [("hopper_notes", "on Lab H200 NVL")]


def test_analyze_gpu_option_and_config_gpu_name_the_gpu(analyze):
    data = _json(analyze(None, "--gpu", "lab h200 nvl", "--json"))
    assert data["bottleneck"]["summary"] == "ceilings: Lab H200 NVL"
    data = _json(analyze("NVIDIA H200 NVL", "--gpu", "H100", "--json"))  # the user's choice wins
    assert data["bottleneck"]["summary"] == "ceilings: H100 SXM"
    data = _json(analyze(None, "--json", config_text="profiling: {classifier: ceilings}\ngpu: NVIDIA H200\n"))
    assert data["bottleneck"]["summary"] == "ceilings: H200 SXM" and data["findings"]


def test_analyze_heuristic_settings_come_from_the_config(analyze):
    data = _json(analyze("NVIDIA H200", "--json", config_text=(
        "profiling: {classifier: ceilings}\nheuristic_params: {hopper_notes: {word: tma}}\n")))
    assert [f["title"] for f in data["findings"]] == ["use tma"]
    res = analyze("NVIDIA H200", config_text="heuristic_params: {hopper_notes: {wurd: tma}}\n")
    assert res.exit_code == 2
    assert res.output.strip() == "error: heuristic_params.hopper_notes.wurd: unknown key (did you mean 'word'?)"


def test_analyze_unknown_gpu_is_one_line(analyze):
    res = analyze("NVIDIA H200", "--gpu", "X9000")
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "error: unknown GPU 'X9000'; known: A100 40GB, A100 80GB PCIe, A100 SXM 80GB, B200, H100 PCIe, H100 SXM, H200 SXM, L40S, Lab H200 NVL"]
    res = analyze("NVIDIA H200", config_text="gpu: X9000\n")
    assert res.exit_code == 2 and res.output.startswith("error: gpu: unknown GPU 'X9000'")


def test_analyze_without_a_known_gpu_says_so(analyze):
    data = _json(analyze(None, "--json"))
    assert data["bottleneck"]["summary"] == "ceilings: none" and data["findings"] == []
    assert ("no GPU spec known for the device (the file does not name it): GPU ceilings and the "
            "architecture heuristics hopper_notes (sm_90) are not consulted; name the GPU with --gpu") in data["notes"]
    data = _json(analyze("Mystery GPU", "--json"))
    assert any(n.startswith("no GPU spec known for device 'Mystery GPU'") for n in data["notes"])


def test_gpu_spec_of_a_cpu_run_comes_from_config_gpu():
    plugins = vendor_plugins()
    assert gpu_spec(plugins, "cpu") is None
    assert gpu_spec(plugins, "cpu", "H200 NVL").name == "Lab H200 NVL"


def _optimizer(tmp_path: Path, **overrides) -> tuple[Optimizer, list[str]]:
    warnings: list[str] = []
    from kernelpro.loop import Progress

    config = cfg.load_config(None, {"device": "cpu", "profiling": {"classifier": "ceilings"}, **overrides})
    opt = Optimizer(load_problem(DATA / "tiny_problem.py"), config, vendor_plugins(True), tmp_path / "run", "cpu",
                    Progress(warning=warnings.append))
    return opt, warnings


def test_cpu_run_with_config_gpu_hands_heuristic_notes_to_generators(tmp_path):
    opt, warnings = _optimizer(tmp_path, gpu="NVIDIA H200", heuristic_params={"hopper_notes": {"word": "tma"}})
    request = opt._request("root")
    assert request.gpu.name == "H200 SXM"
    assert request.heuristic_notes == ("H200 SXM: use tma",)
    assert warnings == []


def test_cpu_run_without_a_gpu_says_heuristics_asked_for_are_not_consulted(tmp_path):
    opt, warnings = _optimizer(tmp_path, heuristic_params={"hopper_notes": {}})
    assert opt._request("root").heuristic_notes == ()
    assert warnings == ["no GPU spec known for device cpu: GPU ceilings and the architecture heuristics "
                        "hopper_notes (sm_90) are not consulted; name the GPU with gpu: in the config"]
    _, quiet = _optimizer(tmp_path / "other")  # not asked for: nothing to say
    assert quiet == []


def test_config_gpu_is_validated(tmp_path):
    config = cfg.load_config(None, {"gpu": "X9000"})
    with pytest.raises(cfg.ConfigError) as exc:
        cfg.validate(config, vendor_plugins(True))
    assert exc.value.problems == [
        "gpu: unknown GPU 'X9000'; known: A100 40GB, A100 80GB PCIe, A100 SXM 80GB, B200, H100 PCIe, H100 SXM, H200 SXM, L40S, Lab H200 NVL"]
