"""Every plugin failure is one line naming the plugin, the hook and the fix, and never costs
the run its data; ``config validate`` checks every plugin name the config uses.

The broken plugins are throwaway distributions written into a temporary directory (a
module plus a ``*.dist-info`` with its entry point) and put on PYTHONPATH, so the real
command line discovers them exactly as it discovers an installed package.
"""

from __future__ import annotations

import json
import os
import textwrap
import types
from pathlib import Path

import pytest

from kernelpro.api import BottleneckClassifier, Collector, SearchPolicy
from kernelpro.config import ConfigError, load_config, validate
from kernelpro.hookspecs import hookimpl
from kernelpro.plugins import PluginError, PluginFailed, Plugins

from helpers import DATA, FAST, kernelpro

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

PROBLEM = str(DATA / "tiny_problem.py")

# Plugin sources, each a module of a throwaway distribution.
BROKEN = '''
from kernelpro.api import Analyzer, BottleneckClassifier, Collector, SearchPolicy
from kernelpro.hookspecs import hookimpl
from kernelpro.records import KernelProfile, ProfileData
from kernelpro.search.tree import ROOT


class FirstThenFails(SearchPolicy):
    """Expands the root once, then raises."""
    name = "brk_select"

    def select(self, tree, n):
        if len(tree) > 1:
            raise ValueError("select exploded")
        return [ROOT]


class RaisingClassifier(BottleneckClassifier):
    name = "brk_classifier"

    def classify(self, profiles, context):
        raise RuntimeError("classify exploded\\nsecond line")


def _profile():
    return ProfileData(level="kernel", collector="brk_collector",
                       kernels=(KernelProfile(name="k", duration_ns=1000.0),))


class CpuCollector(Collector):
    """A kernel-level collector that works anywhere, so that the classifier is called."""
    name = "brk_collector"

    def unavailable_reason(self, target):
        return None

    def collect(self, target, stage, metrics=()):
        return _profile()


class BrkAnalyzer(Analyzer):
    name = "brk_analyzer"

    def accepts(self, path):
        return path.suffix == ".brk"

    def load(self, path):
        return _profile()


@hookimpl
def kernelpro_register_search_policies(register):
    register(FirstThenFails)


@hookimpl
def kernelpro_register_classifiers(register):
    register(RaisingClassifier)


@hookimpl
def kernelpro_register_collectors(register):
    register(CpuCollector)


@hookimpl
def kernelpro_register_analyzers(register):
    register(BrkAnalyzer)


@hookimpl
def kernelpro_candidate_evaluated(run, record):
    raise RuntimeError("observer exploded " + "x" * 80)


@hookimpl
def kernelpro_report_sections(run, records):
    raise RuntimeError("section exploded")
'''

# a second plugin whose report section is not markdown text
JUNK_SECTION = '''
from kernelpro.hookspecs import hookimpl


@hookimpl
def kernelpro_report_sections(run, records):
    return [42]
'''

DUPLICATE = '''
from kernelpro.api import SearchPolicy
from kernelpro.hookspecs import hookimpl


class Greedy(SearchPolicy):
    name = "greedy"

    def select(self, tree, n):
        return []


@hookimpl
def kernelpro_register_search_policies(register):
    register(Greedy)
'''

RAISING_REGISTRATION = '''
from kernelpro.api import SearchPolicy
from kernelpro.hookspecs import hookimpl


class Mine(SearchPolicy):
    name = "brk_mine"

    def select(self, tree, n):
        return []


@hookimpl
def kernelpro_register_search_policies(register):
    register(Mine)
    raise KeyError("registration exploded")


@hookimpl
def kernelpro_register_gpu_specs(register):
    raise ValueError("spec table exploded")


@hookimpl
def kernelpro_register_commands(cli):
    raise RuntimeError("commands exploded")
'''


def make_dist(root: Path, dist: str, modules: dict[str, str]) -> dict[str, str]:
    """Write a distribution ``dist`` whose entry points (group kernelpro) are ``modules``
    (entry-point name -> module source) and return the environment that finds it."""
    site = root / "site"
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    eps = "".join(f"{name} = {name}\n" for name in modules)
    (info / "entry_points.txt").write_text(f"[kernelpro]\n{eps}")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def one_line_error(res, *needles: str) -> str:
    """The run's error: no traceback, exactly one ``error:`` line, holding every needle."""
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, res.stderr
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def config_file(tmp_path: Path, extra: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(FAST.read_text().replace("profiling:\n  enabled: false\n", "") + textwrap.dedent(extra))
    return str(path)


# --- the same name registered twice --------------------------------------------------------


def test_duplicate_name_is_one_line_exit_2_and_blocking_one_fixes_it(tmp_path):
    env = make_dist(tmp_path, "dup-dist", {"dupa": DUPLICATE})
    listing = kernelpro("plugins", env=env)
    # the listing is still printed (it is how the user sees both providers), then exit 2
    assert listing.returncode == 2, listing.stderr
    assert "dupa  [dup-dist 0.1]" in listing.stdout and "core_search" in listing.stdout
    one_line_error(listing, "search policy 'greedy' is registered twice", "plugin 'core_search' (kernelpro-core",
                   "plugin 'dupa' (dup-dist, dupa)", "KERNELPRO_BLOCK_PLUGINS=dupa")
    validated = kernelpro("config", "validate", str(FAST), env=env)
    assert validated.returncode == 2
    one_line_error(validated, "search policy 'greedy' is registered twice")
    # the fix the message names works, from the environment and from the config
    blocked = kernelpro("plugins", env={**env, "KERNELPRO_BLOCK_PLUGINS": "dupa"})
    assert blocked.returncode == 0, blocked.stderr
    cfg = config_file(tmp_path, "plugins:\n  block: [dupa]\n")
    assert kernelpro("config", "validate", cfg, env=env).returncode == 0


def test_duplicate_name_makes_every_lookup_fail_but_describe_works():
    a = types.SimpleNamespace(kernelpro_register_search_policies=hookimpl(lambda register: register(_Pol)))
    b = types.SimpleNamespace(kernelpro_register_search_policies=hookimpl(lambda register: register(_Pol)))
    plugins = Plugins(entry_points=False, extra=[("a", a), ("b", b)])
    described = {p["name"]: p for p in plugins.describe()}
    assert described["b"]["error"] == "search policy 'mine' is registered twice"
    for lookup in (lambda: plugins.names("generator"), lambda: plugins.search_policy("mine"),
                   plugins.micro_profilers):
        with pytest.raises(PluginError, match="'mine' is registered twice: by plugin 'a'.* and by plugin 'b'"):
            lookup()


class _Pol(SearchPolicy):
    name = "mine"

    def select(self, tree, n):
        return []


# --- hooks that raise while plugins load -----------------------------------------------------


def test_raising_registration_hooks_are_warnings_and_the_rest_works(tmp_path):
    env = make_dist(tmp_path, "brk-reg", {"brkreg": RAISING_REGISTRATION})
    res = kernelpro("plugins", "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: plugin 'brkreg'")]
    hooks = ("kernelpro_register_search_policies", "kernelpro_register_gpu_specs", "kernelpro_register_commands")
    for hook in hooks:
        assert any(f"failed in {hook}" in w and "KERNELPRO_BLOCK_PLUGINS=brkreg" in w for w in warnings), (hook, warnings)
    described = {p["name"]: p for p in json.loads(res.stdout)}
    # what the failing call registered before raising is left out; the others are all there
    assert described["brkreg"]["registers"] == {}
    assert "registration exploded" in described["brkreg"]["error"]
    assert "greedy" in described["core_search"]["registers"]["search"]
    # a config naming what the broken hook would have registered: one line that says why
    cfg = config_file(tmp_path, "search:\n  name: brk_mine\n")
    bad = kernelpro("config", "validate", cfg, env=env)
    assert bad.returncode == 2
    one_line_error(bad, "unknown search policy 'brk_mine'",
                   "plugin 'brkreg' failed in kernelpro_register_search_policies")


def test_raising_gpu_spec_resolver_is_one_plugin_failure():
    def resolve(device_name, arch):
        raise OSError("calibration file unreadable")

    plugin = types.SimpleNamespace(kernelpro_resolve_gpu_spec=hookimpl(resolve))
    plugins = Plugins(entry_points=False, extra=[("calib", plugin)])
    with pytest.raises(PluginFailed) as exc:
        plugins.resolve_gpu("NVIDIA H200", "sm_90")
    assert str(exc.value) == ("plugin 'calib' failed in kernelpro_resolve_gpu_spec: "
                              "OSError: calibration file unreadable")


# --- plugins that raise during a run --------------------------------------------------------


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]


def test_raising_select_stops_with_one_line_and_the_run_resumes(tmp_path):
    env = make_dist(tmp_path, "brk-dist", {"brk": BROKEN})
    run = tmp_path / "run"
    res = kernelpro("optimize", PROBLEM, "-c", str(FAST), "--device", "cpu", "--budget", "3",
                    "--generator", "testplugin_echo", "--search", "brk_select", "-o", str(run), "--quiet", env=env)
    assert res.returncode == 2, res.stderr
    one_line_error(res, "search policy 'brk_select' (plugin 'brk' from brk-dist) failed in select(): "
                        "ValueError: select exploded", f"kernelpro optimize --resume {run}")
    first = _records(run)
    assert [r["id"] for r in first] == ["c0001"] and first[0]["correct"]
    assert json.loads((run / "pending.json").read_text()) == []
    # another policy continues the same run: nothing evaluated is lost or evaluated again
    resumed = kernelpro("optimize", "--resume", str(run), "--search", "greedy", "--budget", "3", "--quiet", env=env)
    assert resumed.returncode == 0, resumed.stderr
    records = _records(run)
    assert [r["id"] for r in records] == ["c0001", "c0002", "c0003"]
    assert records[0] == first[0]
    assert (run / "report.md").exists()


def test_raising_classifier_stops_with_one_line_after_writing_the_record(tmp_path):
    env = make_dist(tmp_path, "brk-dist", {"brk": BROKEN})
    run = tmp_path / "run"
    cfg = config_file(tmp_path, """
        profiling:
          classifier: brk_classifier
          collectors: [brk_collector]
    """)
    res = kernelpro("optimize", PROBLEM, "-c", cfg, "--device", "cpu", "--budget", "2",
                    "--generator", "testplugin_echo", "-o", str(run), "--quiet", env=env)
    assert res.returncode == 2, res.stderr
    one_line_error(res, "bottleneck classifier 'brk_classifier' (plugin 'brk' from brk-dist) failed in classify(): "
                        "RuntimeError: classify exploded;", f"--resume {run}")
    records = _records(run)
    assert [r["id"] for r in records] == ["c0001"] and records[0]["correct"]
    assert json.loads((run / "pending.json").read_text()) == []
    assert "c0001" in [n["id"] for n in json.loads((run / "tree.json").read_text())["nodes"]]


def test_raising_classifier_in_analyze_is_one_line(tmp_path):
    env = make_dist(tmp_path, "brk-dist", {"brk": BROKEN})
    report = tmp_path / "kernel.brk"
    report.write_text("anything")
    cfg = config_file(tmp_path, "profiling:\n  classifier: brk_classifier\n")
    res = kernelpro("analyze", str(report), "-c", cfg, env=env)
    assert res.returncode == 2, res.stderr
    one_line_error(res, "bottleneck classifier 'brk_classifier' (plugin 'brk' from brk-dist) failed in classify()")


def test_raising_observer_and_report_sections_are_warnings_and_report_md_is_written(tmp_path):
    env = make_dist(tmp_path, "brk-dist", {"brk": BROKEN, "brkjunk": JUNK_SECTION})
    run = tmp_path / "run"
    res = kernelpro("optimize", PROBLEM, "-c", str(FAST), "--device", "cpu", "--budget", "2",
                    "--generator", "testplugin_echo", "-o", str(run), "--quiet", env=env)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    observer = [ln for ln in lines if "failed in kernelpro_candidate_evaluated" in ln]
    # one whole line per failure, however wide the terminal
    assert len(observer) == 2 and all(ln.startswith("warning: plugin 'brk' from brk-dist") and "x" * 80 in ln
                                      and "KERNELPRO_BLOCK_PLUGINS=brk" in ln for ln in observer), lines
    assert any("plugin 'brk' from brk-dist failed in kernelpro_report_sections: RuntimeError: section exploded" in ln
               and "report.md says so in its place" in ln for ln in lines)
    assert any("plugin 'brkjunk' from brk-dist failed in kernelpro_report_sections: TypeError: expected a list of markdown "
               "strings, got [42]" in ln for ln in lines)
    assert len(_records(run)) == 2
    report = (run / "report.md").read_text()
    assert "## Best result" in report
    assert ("(not written: plugin 'brk' from brk-dist failed in kernelpro_report_sections: RuntimeError: section "
            "exploded)") in report
    assert "(not written: plugin 'brkjunk' from brk-dist failed in kernelpro_report_sections: TypeError" in report
    assert (run / "summary.json").exists()


# --- config validate checks every plugin name --------------------------------------------------


def _validate(tmp_path: Path, text: str, plugins: Plugins) -> list[str]:
    path = tmp_path / "names.yaml"
    path.write_text(text)
    try:
        validate(load_config(path), plugins)
    except ConfigError as exc:
        return exc.problems
    return []


class _Collector(Collector):
    name = "mycollector"


class _Classifier(BottleneckClassifier):
    name = "myclassifier"

    def classify(self, profiles, context):
        return None


@pytest.fixture(scope="module")
def core_plus_mine():
    mine = types.SimpleNamespace(kernelpro_register_collectors=hookimpl(lambda register: register(_Collector)),
                                 kernelpro_register_classifiers=hookimpl(lambda register: register(_Classifier)))
    return Plugins(extra=[("mine", mine)])


def test_every_profiling_and_plugin_name_is_checked(tmp_path, core_plus_mine):
    problems = _validate(tmp_path, textwrap.dedent("""
        profiling:
          classifier: rooflin
          collectors: [mycollector, nope]
          block_micro_profilers: [occupancy_gap, no_such_micro]
        plugins:
          block: [testplugin, no_such_plugin]
    """), core_plus_mine)
    assert problems[0].startswith("profiling.classifier: unknown bottleneck classifier 'rooflin' "
                                  "(did you mean 'roofline'?); available: ")
    assert "myclassifier" in problems[0]
    assert problems[1].startswith("profiling.collectors[1]: unknown collector 'nope'; available: ")
    assert "mycollector" in problems[1]
    assert problems[2].startswith("profiling.block_micro_profilers[1]: unknown micro-profiler 'no_such_micro'; "
                                  "available: ")
    assert "occupancy_gap" in problems[2]
    assert problems[3].startswith("plugins.block[1]: unknown plugin 'no_such_plugin'; available: ")
    assert "core_search" in problems[3]
    assert len(problems) == 4


def test_known_names_and_the_default_classifier_pass(tmp_path, core_plus_mine):
    assert _validate(tmp_path, "profiling:\n  classifier: myclassifier\n  collectors: [mycollector]\n", core_plus_mine) == []
    # without the plugin that provides the default classifier, profiling goes on unclassified
    without_ncu = Plugins(block=["ncu"])
    assert "roofline" not in without_ncu.names("classifier")
    assert _validate(tmp_path, "profiling:\n  enabled: true\n", without_ncu) == []


def test_analyze_checks_the_profiling_names_of_its_config(tmp_path):
    env = make_dist(tmp_path, "brk-dist", {"brk": BROKEN})
    report = tmp_path / "kernel.brk"
    report.write_text("anything")
    cfg = config_file(tmp_path, "profiling:\n  block_micro_profilers: [no_such_micro]\n")
    res = kernelpro("analyze", str(report), "-c", cfg, env=env)
    assert res.returncode == 2, (res.stdout, res.stderr)
    one_line_error(res, "profiling.block_micro_profilers[0]: unknown micro-profiler 'no_such_micro'")


@pytest.mark.parametrize("command", ["validate", "optimize"])
def test_unknown_collector_is_caught_before_the_run(tmp_path, command):
    cfg = config_file(tmp_path, "profiling:\n  collectors: [nope]\n")
    run = tmp_path / "run"
    if command == "validate":
        res = kernelpro("config", "validate", cfg)
    else:
        res = kernelpro("optimize", PROBLEM, "-c", cfg, "--device", "cpu", "--budget", "1",
                        "--generator", "testplugin_echo", "-o", str(run), "--quiet")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert any(ln.startswith("error: profiling.collectors[0]: unknown collector 'nope'; available: ")
               and "ncu" in ln for ln in res.stderr.splitlines()), res.stderr
    assert not run.exists()


# --- the search policy's and the reward's other methods, and constructors ----------------------

MORE_BROKEN = '''
from kernelpro.api import ROOT, ArchHeuristic, Reward, SearchPolicy, hookimpl


class UpdateFails(SearchPolicy):
    name = "brk_update"

    def select(self, tree, n):
        return [ROOT]

    def update(self, tree, node_id):
        raise KeyError("update exploded")


class StateFails(SearchPolicy):
    name = "brk_state"

    def select(self, tree, n):
        return [ROOT]

    def state(self):
        raise RuntimeError("state exploded")


class InitFails(SearchPolicy):
    name = "brk_init"

    def __init__(self, settings=None, rng=None):
        raise RuntimeError("init exploded")

    def select(self, tree, n):
        return []


class ScoreFails(Reward):
    name = "brk_score"

    def score(self, result, context):
        raise ZeroDivisionError("score exploded")


class SelectsNowhere(SearchPolicy):
    name = "brk_nowhere"

    def select(self, tree, n):
        return ["nowhere"]  # no node of the tree: the policy's fault, not the generator's


class NotesFail(ArchHeuristic):
    name = "brk_notes"

    def prompt_notes(self, gpu):
        raise RuntimeError("notes exploded")


@hookimpl
def kernelpro_register_search_policies(register):
    for cls in (UpdateFails, StateFails, InitFails, SelectsNowhere):
        register(cls)


@hookimpl
def kernelpro_register_heuristics(register):
    register(NotesFail)


@hookimpl
def kernelpro_register_rewards(register):
    register(ScoreFails)
'''


@pytest.mark.parametrize("choice, needle", [
    (("--search", "brk_update"), "search policy 'brk_update' (plugin 'brk2' from brk2-dist) failed in update(): "
                                 "KeyError: 'update exploded'"),
    (("--search", "brk_state"), "search policy 'brk_state' (plugin 'brk2' from brk2-dist) failed in state(): "
                                "RuntimeError: state exploded"),
    (("--reward", "brk_score"), "reward 'brk_score' (plugin 'brk2' from brk2-dist) failed in score(): "
                                "ZeroDivisionError: score exploded"),
    (("--search", "brk_nowhere"), "search policy 'brk_nowhere' (plugin 'brk2' from brk2-dist) failed in select(): "
                                  "ValueError: returned 'nowhere', which is no node of the tree"),
])
def test_raising_policy_and_reward_methods_stop_with_one_line(tmp_path, choice, needle):
    env = make_dist(tmp_path, "brk2-dist", {"brk2": MORE_BROKEN})
    run = tmp_path / "run"
    res = kernelpro("optimize", PROBLEM, "-c", str(FAST), "--device", "cpu", "--budget", "2",
                    "--generator", "testplugin_echo", *choice, "-o", str(run), "--quiet", env=env)
    assert res.returncode == 2, res.stderr
    one_line_error(res, needle, f"kernelpro optimize --resume {run}")


def test_a_constructor_that_raises_is_one_line_before_the_run_starts(tmp_path):
    env = make_dist(tmp_path, "brk2-dist", {"brk2": MORE_BROKEN})
    run = tmp_path / "run"
    res = kernelpro("optimize", PROBLEM, "-c", str(FAST), "--device", "cpu", "--budget", "1",
                    "--generator", "testplugin_echo", "--search", "brk_init", "-o", str(run), "--quiet", env=env)
    assert res.returncode == 2, res.stderr
    one_line_error(res, "search policy 'brk_init' (plugin 'brk2' from brk2-dist) failed in __init__(): "
                        "RuntimeError: init exploded")
    assert not (run / "candidates.jsonl").exists()


BROKEN_READERS = '''
from kernelpro.api import Analyzer, Collector, hookimpl



class LoadFails(Analyzer):
    name = "brk_reader"

    def accepts(self, path):
        return path.suffix == ".brk3"

    def load(self, path):
        raise IndexError("load exploded")


class CollectFails(Collector):
    name = "brk_collect"
    level = "kernel"

    def collect(self, target, stage, metrics=()):
        raise AttributeError("collect exploded")


@hookimpl
def kernelpro_register_analyzers(register):
    register(LoadFails)


@hookimpl
def kernelpro_register_collectors(register):
    register(CollectFails)
'''


def test_an_analyzer_that_raises_is_one_line_in_analyze(tmp_path):
    env = make_dist(tmp_path, "brk3-dist", {"brk3": BROKEN_READERS})
    report = tmp_path / "kernel.brk3"
    report.write_text("anything")
    res = kernelpro("analyze", str(report), env=env)
    assert res.returncode == 2, res.stderr
    one_line_error(res, "analyzer 'brk_reader' (plugin 'brk3' from brk3-dist) failed in load(): "
                        "IndexError: load exploded")


def test_a_collector_that_raises_costs_its_own_data_only():
    from kernelpro.api import ProfileContext, ProfileTarget
    from kernelpro.profile.pipeline import Profiler

    mod = types.ModuleType("brk3_inline")
    exec(BROKEN_READERS, mod.__dict__)
    plugins = Plugins(entry_points=False, extra=[("brk3", mod)])
    target = ProfileTarget(problem_path=Path("p.py"), candidate_path=Path("c.py"), device="cpu", workdir=Path("."))
    analysis, profiles = Profiler(plugins, classifier=None, collectors=["brk_collect"]).profile(
        target, ProfileContext(gpu=None, device="cpu"))
    assert profiles == {}
    assert any("brk_collect failed in collect(): AttributeError: collect exploded" in n for n in analysis.notes)


@pytest.mark.parametrize("env", ["KERNELPRO_BLOCK_PLUGINS", "KERNELPRO_LOAD_PLUGINS"])
def test_an_unknown_name_in_the_plugin_environment_is_a_warning(env):
    res = kernelpro("plugins", "--json", env={env: "core_search,no_such_plugin"})
    assert res.returncode == 0, res.stderr
    warnings = [ln for ln in res.stderr.splitlines() if "no_such_plugin" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("warning:") and "installed: " in warnings[0]
    assert "Traceback" not in res.stderr


def test_a_candidate_whose_score_failed_is_evaluated_again_on_resume(tmp_path):
    env = make_dist(tmp_path, "brk2-dist", {"brk2": MORE_BROKEN})
    run = tmp_path / "run"
    res = kernelpro("optimize", PROBLEM, "-c", str(FAST), "--device", "cpu", "--budget", "2",
                    "--generator", "testplugin_echo", "--reward", "brk_score", "-o", str(run), "--quiet", env=env)
    assert res.returncode == 2, res.stderr
    assert not (run / "candidates.jsonl").exists() or _records(run) == []
    assert [d["id"] for d in json.loads((run / "pending.json").read_text())] == ["c0001"]
    resumed = kernelpro("optimize", "--resume", str(run), "--reward", "log_speedup", "--quiet", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert [r["id"] for r in _records(run)] == ["c0001", "c0002"]


def test_a_heuristic_whose_prompt_notes_raise_is_named_once_and_the_run_goes_on(tmp_path):
    # the notes are gathered for the generator's request, but they are not the generator's
    # failure: before, three of them ended the run as "generator failed", with nothing evaluated
    env = make_dist(tmp_path, "brk2-dist", {"brk2": MORE_BROKEN})
    run = tmp_path / "run"
    config = tmp_path / "c.yaml"
    config.write_text(FAST.read_text() + "gpu: H200\n")
    res = kernelpro("optimize", PROBLEM, "-c", str(config), "--device", "cpu",
                    "--budget", "2", "--generator", "testplugin_echo", "-o", str(run), env=env)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "generator testplugin_echo failed" not in res.stderr
    warnings = [ln for ln in res.stderr.splitlines() if "brk_notes" in ln]
    assert warnings == ["warning: architecture heuristic 'brk_notes' (plugin 'brk2' from brk2-dist) failed in "
                        "prompt_notes(): RuntimeError: notes exploded; its notes are left out of the "
                        "generators' requests"], res.stderr
    assert len(_records(run)) == 2
