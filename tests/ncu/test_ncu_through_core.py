"""``kernelpro analyze`` of a real Nsight Compute report through core: the GPU is resolved
from the device the report names, so a vendor's spec for it gives the roofline its ceilings
without --gpu; the roofline classifier's settings come from the config."""

import json
import types
from pathlib import Path

import attrs
from click.testing import CliRunner

from kernelpro import cli as cli_mod
from kernelpro.gpus import SPECS
from kernelpro.hookspecs import hookimpl
from kernelpro.plugins import Plugins

REPORT = Path(__file__).with_name("fixtures") / "h200" / "cases" / "transpose_naive" / "ncu_stage1.ncu-rep"
LAB = attrs.evolve(SPECS[1], name="Lab H200", match=("NVIDIA H200",), exact=True, priority=1,
                   dram_bandwidth_gbs=2000.0)


def test_analyze_takes_the_vendor_spec_of_the_report_s_device(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no calibration of this machine's
    vendor = types.SimpleNamespace(kernelpro_register_gpu_specs=hookimpl(lambda register: register(LAB)))
    plugins = Plugins(extra=[("lab_vendor", vendor)])
    monkeypatch.setattr(cli_mod, "load_plugins", lambda block=(): plugins)
    res = CliRunner().invoke(cli_mod.cli, ["analyze", str(REPORT), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)["bottleneck"]["summary"]
    assert "of 2000 GB/s" in summary and "ceilings: Lab H200" in summary


def test_analyze_takes_the_roofline_settings_from_the_config(tmp_path):
    config = tmp_path / "c.yaml"
    kinds = []
    for busy in (60, 99):  # memory is 95% busy: memory-bound, unless 99% is needed to count as busy
        config.write_text(f"profiling:\n  classifier_params: {{busy_pct: {busy}}}\n")
        res = CliRunner().invoke(cli_mod.cli, ["analyze", str(REPORT), "-c", str(config), "--json"])
        assert res.exit_code == 0, res.output
        kinds.append(json.loads(res.output)["bottleneck"]["kind"])
    assert kinds == ["memory", "latency"]
