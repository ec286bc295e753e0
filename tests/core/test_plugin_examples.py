"""The example plugin distributions under tests/plugin_examples/, one per extension kind
(micro-profiler, bottleneck classifier, search policy, vendor GPU spec + heuristic): each
is installed on its own and exercised end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import DATA, FAST, kernelpro

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "tests" / "ncu" / "fixtures" / "h200" / "cases" / "transpose_naive" / "ncu_stage1.ncu-rep"
EXAMPLES = {  # entry point -> (distribution, kind, name)
    "example_microprofiler": ("kernelpro-example-microprofiler", "micro_profiler", "launch_count"),
    "example_classifier": ("kernelpro-example-classifier", "classifier", "speed_of_light"),
    "example_search": ("kernelpro-example-search", "search", "breadth_first_best"),
    "example_vendor": ("kernelpro-example-vendor", "heuristic", "example_hopper_tma"),
}


def test_each_example_is_its_own_distribution_found_through_its_entry_point():
    res = kernelpro("plugins", "--json")
    assert res.returncode == 0, res.stderr
    by_name = {p["name"]: p for p in json.loads(res.stdout)}
    for ep, (dist, kind, name) in EXAMPLES.items():
        assert ep in by_name, f"{dist} is not installed (scripts/test.sh installs tests/plugin_examples/*)"
        info = by_name[ep]
        assert info["distribution"] == dist and info["error"] is None
        assert name in info["registers"][kind]
        module = __import__(info["module"])
        assert (ROOT / "tests" / "plugin_examples") in Path(module.__file__).resolve().parents


def test_analyze_runs_the_example_classifier_micro_profiler_spec_and_heuristic(tmp_path):
    pytest.importorskip("kernelpro_plugins_ncu")
    config = tmp_path / "c.yaml"
    config.write_text("profiling:\n  classifier: speed_of_light\n  classifier_params: {busy_pct: 60}\n"
                      "  micro_profiler_params:\n    launch_count: {max_kernels: 0}\n")
    res = kernelpro("analyze", str(REPORT), "-c", str(config), "--gpu", "Example Hopper", "--json",
                    env={"XDG_CACHE_HOME": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    bottleneck = out["bottleneck"]
    assert bottleneck["classifier"] == "speed_of_light" and bottleneck["kind"] == "memory"
    assert "on Example Hopper" in bottleneck["summary"]  # the vendor's spec, named with --gpu
    tools = {f["tool"]: f for f in out["findings"]}
    assert tools["launch_count"]["evidence"]["launches"] == 1.0  # its setting came from the config
    assert tools["example_hopper_tma"]["title"].startswith("Hopper")
    # the same report with the classifier's threshold above both units: no heuristic finding
    config.write_text("profiling:\n  classifier: speed_of_light\n  classifier_params: {busy_pct: 99}\n")
    out = json.loads(kernelpro("analyze", str(REPORT), "-c", str(config), "--gpu", "Example Hopper", "--json",
                               env={"XDG_CACHE_HOME": str(tmp_path)}).stdout)
    assert out["bottleneck"]["kind"] == "latency"
    assert not any(f["tool"] in ("example_hopper_tma", "launch_count") for f in out["findings"])


@pytest.mark.slow
def test_optimize_runs_with_the_example_search_policy(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(FAST.read_text() + "search:\n  name: breadth_first_best\n  params: {max_expansions: 1}\n")
    run = tmp_path / "run"
    res = kernelpro("optimize", str(DATA / "tiny_problem.py"), "-c", str(config), "--device", "cpu",
                    "--budget", "3", "--generator", "testplugin_echo", "-o", str(run), "--quiet")
    assert res.returncode == 0, res.stderr
    nodes = {n["id"]: n for n in json.loads((run / "tree.json").read_text())["nodes"]}
    # the policy's own setting: no node is expanded twice
    assert all(n["expansions"] <= 1 for n in nodes.values()), {k: n["expansions"] for k, n in nodes.items()}
    assert len(nodes) == 4 and nodes["root"]["children"]
    assert max(n["depth"] for n in nodes.values()) >= 2  # the best child was expanded in turn
