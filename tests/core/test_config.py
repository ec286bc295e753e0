"""Config loading and validation: one line per problem, with its path."""

from __future__ import annotations

import pytest
import yaml

from kernelpro import config as cfg
from kernelpro.plugins import Plugins

from helpers import DATA, kernelpro


def _write(tmp_path, data):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return p


def _problems(tmp_path, data):
    with pytest.raises(cfg.ConfigError) as exc:
        config = cfg.load_config(_write(tmp_path, data))
        cfg.validate(config, Plugins())
    return exc.value.problems


def test_defaults_load_and_round_trip(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    config = cfg.load_config()
    assert config.generator.name == "expert"  # auto without an API key: the offline expert
    assert config.evaluator.trials == 5
    again = cfg.structure(yaml.safe_load(cfg.to_yaml(config)), cfg.Config)
    assert again == config


def test_auto_generator_is_the_llm_when_its_key_is_set_else_the_expert(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert cfg.load_config().generator.name == "anthropic"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert cfg.load_config().generator.name == "expert"
    # an explicit name is kept, and auto also works from a file or the command line
    assert cfg.load_config(overrides={"generator.name": "torch_compile"}).generator.name == "torch_compile"
    assert cfg.load_config(_write(tmp_path, {"generator": {"name": "auto"}})).generator.name == "expert"
    monkeypatch.setattr(cfg, "auto_generator", lambda: "torch_compile")  # expert not installed
    assert cfg.load_config().generator.name == "torch_compile"


def test_wrong_types_are_reported_with_paths(tmp_path):
    problems = _problems(tmp_path, {"budget": "many", "evaluator": {"trials": 2.5, "rep_ms": "x"}})
    assert "budget: expected int, got 'many'" in problems
    assert "evaluator.trials: expected int, got 2.5" in problems
    assert "evaluator.rep_ms: expected float, got 'x'" in problems


def test_unknown_keys_are_errors(tmp_path):
    assert _problems(tmp_path, {"evaluator": {"trails": 3}}) == ["evaluator.trails: unknown key (did you mean 'trials'?)"]
    assert _problems(tmp_path, {"colour": "blue"}) == ["colour: unknown key"]


def test_plugin_params_are_validated_by_the_plugin(tmp_path):
    problems = _problems(tmp_path, {"search": {"name": "greedy", "params": {"patience": "high"}}})
    assert problems == ["search.params.patience: expected int, got 'high'"]
    problems = _problems(tmp_path, {"generator": {"name": "torch_compile", "params": {"mode": 1}}})
    assert problems == ["generator.params.mode: unknown key"]


def test_unknown_plugin_lists_available(tmp_path):
    (problem,) = _problems(tmp_path, {"search": {"name": "anneal"}})
    assert problem.startswith("search.name: unknown search policy 'anneal'")
    assert "greedy" in problem


def test_bad_values_and_yaml(tmp_path):
    assert _problems(tmp_path, {"device": "tpu"}) == ["device: expected auto, cuda or cpu, got 'tpu'"]
    (problem,) = _problems(tmp_path, "budget: [1,\n")
    assert "not valid YAML" in problem
    (problem,) = _problems(tmp_path, "- a list\n")
    assert "expected a mapping" in problem


@pytest.mark.slow
def test_config_validate_cli(tmp_path):
    good = _write(tmp_path, {"budget": 3})
    res = kernelpro("config", "validate", str(good))
    assert res.returncode == 0 and "ok" in res.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("search:\n  name: greedy\n  params:\n    patience: high\nbudget: x\n")
    res = kernelpro("config", "validate", str(bad))
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "error: budget: expected int, got 'x'" in lines
    assert "Traceback" not in res.stderr


def test_config_show_prints_resolved(tmp_path):
    res = kernelpro("config", "show", "-c", str(_write(tmp_path, {"budget": 3})))
    assert res.returncode == 0
    shown = yaml.safe_load(res.stdout)
    assert shown["budget"] == 3 and shown["evaluator"]["trials"] == 5


def test_reward_that_needs_a_measurement_gets_it():
    from kernelpro.api import Reward

    class NeedsEnergy(Reward):
        name = "needs_energy"
        requires_measurements = ("no_such_measurement",)

        def score(self, result, context):
            return 0.0

    import types

    from kernelpro.hookspecs import hookimpl

    plugin = types.SimpleNamespace(kernelpro_register_rewards=hookimpl(lambda register: register(NeedsEnergy)))
    plugins = Plugins(extra=[("needs", plugin)])
    config = cfg.load_config(overrides={"reward": {"name": "needs_energy", "params": {}}})
    with pytest.raises(cfg.ConfigError) as exc:
        cfg.validate(config, plugins)
    assert exc.value.problems == [
        "reward.name: 'needs_energy' needs the measurement 'no_such_measurement', which is not installed; "
        f"available: {', '.join(sorted(plugins.measurements())) or 'none'}"
    ]


def test_a_single_config_problem_is_said_once(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("budget: x\n")
    res = kernelpro("optimize", str(DATA / "tiny_problem.py"), "-c", str(bad), "--device", "cpu")
    assert res.returncode == 2
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("error:")] == \
        ["error: budget: expected int, got 'x'"]


@pytest.mark.parametrize("text, expected", [
    ("evaluatr:\n  trials: 2\n", "error: evaluatr: unknown key (did you mean 'evaluator'?)"),
    ("evaluator:\n  warmup_msec: 2\n", "error: evaluator.warmup_msec: unknown key (did you mean 'warmup_ms'?)"),
    ("search:\n  name: gredy\n", "error: search.name: unknown search policy 'gredy' (did you mean 'greedy'?); "
                                 "available: "),
    ("zzz_unrelated: 1\n", "error: zzz_unrelated: unknown key"),
])
def test_misspelt_keys_and_plugin_names_get_a_suggestion(tmp_path, text, expected):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    res = kernelpro("config", "validate", str(path))
    assert res.returncode == 2
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(expected), errors
    if "zzz" in text:
        assert "did you mean" not in errors[0]


def test_measure_within_is_a_non_negative_number_or_null(tmp_path):
    assert cfg.load_config(_write(tmp_path, {"evaluator": {"measure_within": 0.1}})).evaluator.measure_within == 0.1
    assert cfg.load_config(_write(tmp_path, {"evaluator": {"measure_within": None}})).evaluator.measure_within is None
    problems = _problems(tmp_path, {"evaluator": {"measure_within": -0.5}})
    assert len(problems) == 1 and "measure_within: expected a number >= 0 or null, got -0.5" in problems[0]


@pytest.mark.parametrize("text, expected", [
    ("evaluator: 5\n", "error: evaluator: expected a mapping, got int 5"),
    ("plugins: {block: 5}\n", "error: plugins.block: expected a list, got int 5"),
    ("evaluator: {tolerances: [1, 2]}\n", "error: evaluator.tolerances: expected a mapping, got list [1, 2]"),
    ("evaluator: {tolerances: {float32: 5}}\n", "error: evaluator.tolerances.float32: expected a mapping, got int 5"),
    ("generator: expert\n", "error: generator: expected a mapping such as {name: expert}, got str 'expert'"),
    ("search: [1]\n", "error: search: expected a mapping, got list [1]"),
])
def test_a_value_of_the_wrong_shape_says_what_was_expected(tmp_path, text, expected):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    res = kernelpro("config", "validate", str(bad))
    assert res.returncode == 2, res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [expected]


def test_a_binary_config_file_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "cfg.yaml"
    bad.write_bytes(b"\xf3\x00\xff" * 300)
    for args in (["config", "validate", str(bad)], ["config", "show", "-c", str(bad)],
                 ["eval", str(DATA / "tiny_problem.py"), str(DATA / "good.py"), "-c", str(bad)],
                 ["optimize", str(DATA / "tiny_problem.py"), "-c", str(bad), "--device", "cpu"],
                 ["analyze", str(DATA / "tiny_problem.py"), "-c", str(bad)]):
        res = kernelpro(*args)
        assert res.returncode == 2, (args, res.stderr)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
        assert lines == [f"error: {bad}: not a text file (byte 0 is not UTF-8)"], (args, res.stderr)
