"""What a plugin returns or registers is checked where core receives it, so that a plugin
that breaks its contract is named in one line instead of failing later inside core as an
internal error (or being blamed on another plugin). Plugins registered in-process: fast."""

from __future__ import annotations

import types
from importlib import metadata

import click
import pytest

from kernelpro.api import ArchHeuristic, BottleneckClassifier, MicroProfiler, ProfileContext
from kernelpro.hookspecs import hookimpl
from kernelpro.plugins import PluginError, PluginFailed, Plugins
from kernelpro.profile.pipeline import Profiler
from kernelpro.records import Bottleneck, Finding, GpuSpec, KernelProfile, ProfileData

PROFILE = ProfileData(level="kernel", collector="x", kernels=(KernelProfile(name="k", duration_ns=1.0),))
CONTEXT = ProfileContext(gpu=None, device="cpu")


def _plugins(**hooks) -> Plugins:
    plugin = types.SimpleNamespace(**{name: hookimpl(fn) for name, fn in hooks.items()})
    return Plugins(entry_points=False, extra=[("mine", plugin)])


def _classifier_returning(value) -> Plugins:
    class Returns(BottleneckClassifier):
        name = "returns"

        def classify(self, profiles, context):
            return value

    return _plugins(kernelpro_register_classifiers=lambda register: register(Returns))


@pytest.mark.parametrize("value, needle", [
    ("memory", "returned str, expected a Bottleneck or None"),
    (Bottleneck(kind="membound", summary="s"), "of kind 'membound', expected one of memory"),
])
def test_a_classifier_returning_the_wrong_thing_is_named(value, needle):
    profiler = Profiler(_classifier_returning(value), classifier="returns")
    with pytest.raises(PluginFailed) as exc:
        profiler.analyze_profile(PROFILE, CONTEXT)
    assert "bottleneck classifier 'returns' (plugin 'mine'" in str(exc.value)
    assert "failed in classify()" in str(exc.value) and needle in str(exc.value)


def test_a_classifier_returning_a_bottleneck_or_none_passes():
    for value in (None, Bottleneck(kind="memory", summary="s")):
        assert Profiler(_classifier_returning(value), classifier="returns").analyze_profile(
            PROFILE, CONTEXT).bottleneck == value


@pytest.mark.parametrize("value, needle", [
    (["a string"], "returned a list holding str, expected Finding"),
    (None, "returned NoneType, expected a list of Finding"),
])
def test_a_micro_profiler_or_heuristic_returning_the_wrong_thing_is_a_note(value, needle):
    class Micro(MicroProfiler):
        name = "bad_micro"

        def analyze(self, profile, bottleneck, context):
            return value

    class Heur(ArchHeuristic):
        name = "bad_heur"

        def advise(self, bottleneck, profiles, context):
            return value

    good = Finding(tool="good", severity="info", title="t", message="m", action="a")

    class Good(MicroProfiler):
        name = "good"

        def analyze(self, profile, bottleneck, context):
            return (good,)  # a tuple is a list of findings too

    def register_micro(register):
        register(Micro)
        register(Good)

    plugins = _plugins(kernelpro_register_micro_profilers=register_micro,
                       kernelpro_register_heuristics=lambda register: register(Heur))
    analysis = Profiler(plugins, classifier=None).analyze_profile(PROFILE, CONTEXT)
    assert analysis.findings == (good,)
    assert f"micro-profiler 'bad_micro' (plugin 'mine') failed: TypeError: {needle}" in analysis.notes
    assert f"architecture heuristic 'bad_heur' (plugin 'mine') failed: TypeError: {needle}" in analysis.notes


def test_a_gpu_spec_resolver_returning_the_wrong_thing_is_named():
    plugins = _plugins(kernelpro_resolve_gpu_spec=lambda device_name, arch: {"name": "X"})
    with pytest.raises(PluginFailed) as exc:
        plugins.resolve_gpu("NVIDIA H200", "sm_90")
    assert str(exc.value) == ("plugin 'mine' failed in kernelpro_resolve_gpu_spec: "
                              "TypeError: returned dict, expected a GpuSpec or None")
    spec = GpuSpec(name="Mine", match=("h200",), arch="sm_90", sm_count=1, dram_bandwidth_gbs=1, l2_bytes=1,
                   smem_per_sm_bytes=1, fp32_tflops=1, fp64_tflops=1, tf32_tflops=1, bf16_tflops=1,
                   fp16_tflops=1)
    assert _plugins(kernelpro_resolve_gpu_spec=lambda device_name, arch: spec).resolve_gpu(
        "NVIDIA H200", "sm_90") is spec


def test_registering_an_instance_or_another_class_is_a_hook_failure():
    class Micro(MicroProfiler):
        name = "inst"

        def analyze(self, profile, bottleneck, context):
            return []

    class NotAReward:
        name = "not_a_reward"

    plugins = _plugins(kernelpro_register_micro_profilers=lambda register: register(Micro()),
                       kernelpro_register_rewards=lambda register: register(NotAReward))
    plugins.collect()
    errors = {f.hook: f.error for f in plugins.hook_failures}
    assert errors["kernelpro_register_micro_profilers"] == (
        "PluginError: registered 'inst' as a micro-profiler, but it is a Micro instance, not a subclass of "
        "kernelpro.api.MicroProfiler")
    assert "class NotAReward, not a subclass of kernelpro.api.Reward" in errors["kernelpro_register_rewards"]
    assert "inst" not in plugins.names("micro_profiler")


def test_a_misspelt_hook_argument_says_which_argument(monkeypatch):
    def kernelpro_register_rewards(registr):
        pass

    plugin = types.SimpleNamespace(kernelpro_register_rewards=hookimpl(kernelpro_register_rewards))
    entry_point = types.SimpleNamespace(name="typo", value="typo_module", dist=None, load=lambda: plugin)
    monkeypatch.setattr("kernelpro.plugins.metadata.entry_points", lambda group: [entry_point])
    (failure,) = Plugins().failures
    assert failure.name == "typo" and "\n" not in failure.error
    # pluggy's first line names only the hook; the argument is on the later ones
    assert failure.error.startswith("PluginValidationError: Plugin 'typo' for hook 'kernelpro_register_rewards'")
    assert "Argument(s) {'registr'} are declared in the hookimpl but can not be found" in failure.error


def test_an_installed_plugin_with_a_misspelt_hook_name_is_left_out_like_a_misspelt_argument(monkeypatch):
    # both are the plugin's own mistake: it is reported and left out, the others keep working
    # (a misspelt name stopped every command with exit 2, a misspelt argument did not)
    def kernelpro_register_reward(register):  # the hook is kernelpro_register_rewards
        pass

    plugin = types.SimpleNamespace(kernelpro_register_reward=hookimpl(kernelpro_register_reward))
    typo = types.SimpleNamespace(name="typo", value="typo_module", dist=None, load=lambda: plugin)
    real = [ep for ep in metadata.entry_points(group="kernelpro") if ep.name == "core_generators"]
    monkeypatch.setattr("kernelpro.plugins.metadata.entry_points", lambda group: real + [typo])
    plugins = Plugins()
    (failure,) = plugins.failures
    assert failure.name == "typo" and "\n" not in failure.error
    assert "unknown hook 'kernelpro_register_reward' (did you mean 'kernelpro_register_rewards'?)" in failure.error
    assert "typo" not in [i.name for i in plugins.infos if i.hooks]
    assert "torch_compile" in plugins.names("generator")


def test_a_plugin_command_cannot_replace_an_existing_one():
    @click.group()
    def cli():
        pass

    @cli.command(name="analyze")
    def analyze():
        """The real one."""

    original = cli.commands["analyze"]

    def register_commands(cli):
        @cli.command(name="mine")
        def mine():
            """Its own, added in the same call."""

        @cli.command(name="analyze")
        def hijack():
            """Not allowed."""

    plugins = _plugins(kernelpro_register_commands=register_commands)
    plugins.register_commands(cli)
    assert cli.commands["analyze"] is original
    assert "mine" not in cli.commands  # what it registered in that call is left out
    (failure,) = plugins.hook_failures
    assert failure.plugin == "mine" and failure.hook == "kernelpro_register_commands"
    assert failure.error == "it registers the command 'analyze', which already exists"


def test_an_unknown_name_in_the_profiling_config_names_the_failed_registration_hook():
    from kernelpro.config import check_plugin_names, load_config

    def boom(register):
        raise RuntimeError("exploded")

    plugins = _plugins(kernelpro_register_classifiers=boom)
    plugins.collect()
    config = load_config(None, {"profiling": {"classifier": "mine_classifier"}})
    (line,) = check_plugin_names(config, plugins)
    assert "unknown bottleneck classifier 'mine_classifier' (plugin 'mine' failed in " \
           "kernelpro_register_classifiers)" in line


def test_a_run_whose_generator_proposes_nothing_says_why(tmp_path):
    """A run that ends without a candidate names the generator and its reason (API 1.6's
    Generator.why_nothing), not a bare "search exhausted"."""
    from kernelpro.api import Generator
    from kernelpro.loop import Optimizer

    class Nothing(Generator):
        name = "nothing"

        def generate(self, request):
            return []

        def why_nothing(self, request):
            return "no template for a model of this shape\nsecond line dropped"

    opt = Optimizer.__new__(Optimizer)
    opt.generator = Nothing(None)
    opt._request = lambda parent_id: None
    assert opt._why_nothing("root") == "no template for a model of this shape"

    class Raises(Nothing):
        def why_nothing(self, request):
            raise RuntimeError("boom")

    opt.generator = Raises(None)
    assert opt._why_nothing("root") == ""


def _scoring(value):
    """An optimizer whose reward scores ``value`` for anything, reduced to its scoring."""
    from kernelpro.api import Reward
    from kernelpro.loop import Optimizer

    class Fixed(Reward):
        name = "fixed"

        def score(self, result, context):
            return value

    opt = Optimizer.__new__(Optimizer)
    opt.reward = Fixed(None)
    opt.plugins = Plugins(entry_points=False)
    return opt


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), "fast", "1.5", True, None])
def test_a_reward_that_scores_nan_or_no_number_is_named(value):
    """A NaN reward would poison every comparison of the search from then on; an infinity is
    no JSON number (tree.json, candidates.jsonl); a numeric string or a bool is no number."""
    with pytest.raises(PluginFailed, match="score"):
        _scoring(value)._score(None, None)


@pytest.mark.parametrize("value", [2, 1.5, -10.0])
def test_a_reward_that_scores_a_number_is_kept(value):
    assert _scoring(value)._score(None, None) == float(value)
