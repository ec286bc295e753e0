"""Plugin manager: registration, discovery through a real entry point, failures, blocking."""

from __future__ import annotations

import json
import types

import attrs
import pytest

from kernelpro.api import Generator
from kernelpro.hookspecs import hookimpl
from kernelpro.plugins import PluginError, Plugins, UnknownName

from helpers import kernelpro


class _Gen(Generator):
    name = "mine"

    def generate(self, request):
        return []


def _module(**hooks):
    return types.SimpleNamespace(**hooks)


def test_direct_registration_and_lookup():
    plugin = _module(kernelpro_register_generators=hookimpl(lambda register: register(_Gen)))
    plugins = Plugins(entry_points=False, extra=[("mine_plugin", plugin)])
    assert plugins.generator("mine") is _Gen
    with pytest.raises(UnknownName, match="unknown code generator 'other'.*available: mine"):
        plugins.generator("other")


def test_misspelt_hook_fails_at_start_up():
    plugin = _module(kernelpro_register_generator=hookimpl(lambda register: None))  # missing "s"
    with pytest.raises(PluginError, match="kernelpro_register_generator"):
        Plugins(entry_points=False, extra=[("typo", plugin)])


def test_duplicate_names_are_an_error():
    a = _module(kernelpro_register_generators=hookimpl(lambda register: register(_Gen)))
    b = _module(kernelpro_register_generators=hookimpl(lambda register: register(_Gen)))
    plugins = Plugins(entry_points=False, extra=[("a", a), ("b", b)])
    with pytest.raises(PluginError, match="registered twice"):
        plugins.names("generator")


def test_builtins_come_through_entry_points():
    plugins = Plugins()
    described = {p["name"]: p for p in plugins.describe()}
    assert described["core_generators"]["distribution"] == "kernelpro-core"
    assert "torch_compile" in described["core_generators"]["registers"]["generator"]
    assert "greedy" in plugins.names("search")
    assert plugins.resolve_gpu("NVIDIA H200", "sm_90").name == "H200 SXM"


def test_third_party_distribution_discovered():
    res = kernelpro("plugins", "--json")
    assert res.returncode == 0, res.stderr
    by_name = {p["name"]: p for p in json.loads(res.stdout)}
    test = by_name["testplugin"]
    assert test["distribution"] == "kernelpro-testplugin"
    assert test["version"] == "0.0.1"
    assert test["registers"] == {"generator": ["testplugin_echo"], "reward": ["testplugin_negated"],
                                 "measurement": ["testplugin_wall"]}
    assert "kernelpro_run_started" in test["hooks"]


def test_failing_plugin_is_reported_with_distribution():
    res = kernelpro("plugins", "--json", env={"KERNELPRO_TESTPLUGIN_FAIL": "1"})
    assert res.returncode == 0
    test = {p["name"]: p for p in json.loads(res.stdout)}["testplugin"]
    assert test["error"].startswith("ImportError: kernelpro_testplugin was asked to fail")
    assert "plugin 'testplugin' from kernelpro-testplugin failed to load" in res.stderr
    # and what to do about it, as every plugin failure line says
    assert "block it with KERNELPRO_BLOCK_PLUGINS=testplugin" in res.stderr


def test_block_by_environment():
    res = kernelpro("plugins", "--json", env={"KERNELPRO_BLOCK_PLUGINS": "testplugin"})
    test = {p["name"]: p for p in json.loads(res.stdout)}["testplugin"]
    assert test["blocked"] is True and test["registers"] == {}
    plugins = Plugins(block=["testplugin"])
    assert "testplugin_echo" not in plugins.names("generator")


def test_settings_class_validates_plugin_params():
    @attrs.frozen
    class S:
        k: float = 1.0

    class P(Generator):
        name = "p"
        Settings = S

        def generate(self, request):
            return []

    from kernelpro.config import ConfigError, plugin_settings

    assert plugin_settings(P, {"k": 2}, "generator.params").k == 2.0
    with pytest.raises(ConfigError) as exc:
        plugin_settings(P, {"k": "x"}, "generator.params")
    assert exc.value.problems == ["generator.params.k: expected float, got 'x'"]


def test_text_listing_shows_what_a_plugin_adds_besides_named_things():
    # a plugin that only adds commands, report sections or observers listed nothing under
    # its name in text mode (--json listed its hooks)
    res = kernelpro("plugins")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("core_bench "))
    assert lines[at + 1].strip() == "hooks: kernelpro_register_commands", lines[at:at + 3]
