"""The plugin API's version: what a plugin declares is checked when it loads."""

from __future__ import annotations

import sys
import types
from importlib import metadata

import pytest

from kernelpro import api
from kernelpro import plugins as plugins_mod
from kernelpro.api import Generator, hookimpl
from kernelpro.plugins import PluginError, Plugins

from helpers import kernelpro


@pytest.mark.parametrize("declared, ok", [
    (api.API_VERSION, True), ("1", True), ("1.0", True),
    ("2.0", False), ("0.9", False), ("1.99", False), ("one", False), ("1.0.0", False), ("", False),
])
def test_the_version_rule(declared, ok):
    problem = api.api_version_problem(declared)
    assert (problem is None) == ok, problem
    if problem is not None:
        assert "\n" not in problem and api.API_VERSION in problem


class _Gen(Generator):
    name = "versioned"

    def generate(self, request):
        return []


def _plugin(version):
    mod = types.ModuleType("versioned_plugin")
    mod.kernelpro_register_generators = hookimpl(lambda register: register(_Gen))
    if version is not None:
        mod.KERNELPRO_API_VERSION = version
    return mod


def test_a_plugin_for_this_api_or_undeclared_loads():
    for version in (api.API_VERSION, None):
        assert Plugins(entry_points=False, extra=[("p", _plugin(version))]).generator("versioned") is _Gen


def test_a_plugin_for_another_major_is_refused_in_one_line():
    with pytest.raises(PluginError, match=r"plugin 'p': written for KernelPro plugin API 2\.0"):
        Plugins(entry_points=False, extra=[("p", _plugin("2.0"))])


def test_an_entry_point_for_another_major_is_left_out_and_reported(monkeypatch, tmp_path):
    (tmp_path / "future_kp_plugin.py").write_text(
        "from kernelpro.api import hookimpl\nKERNELPRO_API_VERSION = '7.0'\n"
        "@hookimpl\ndef kernelpro_register_generators(register):\n    raise AssertionError('never called')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    real = metadata.entry_points

    def entry_points(**kw):
        found = list(real(**kw))
        if kw.get("group") == plugins_mod.GROUP:
            found.append(metadata.EntryPoint(name="future", value="future_kp_plugin", group=plugins_mod.GROUP))
        return found

    monkeypatch.setattr(plugins_mod.metadata, "entry_points", entry_points)
    plugins = Plugins()
    failed = {f.name: f.error for f in plugins.failures}
    assert "future" in failed and "written for KernelPro plugin API 7.0" in failed["future"]
    assert plugins.pm.get_plugin("future") is None
    plugins.generator("torch_compile")  # the rest loaded
    sys.modules.pop("future_kp_plugin", None)


@pytest.mark.slow
def test_the_shipped_plugins_declare_this_api():
    proc = kernelpro("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    import kernelpro_plugins_ncu.plugin as ncu
    import kernelpro_testplugin

    assert ncu.KERNELPRO_API_VERSION == api.API_VERSION
    assert kernelpro_testplugin.KERNELPRO_API_VERSION == api.API_VERSION
