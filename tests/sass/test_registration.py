"""The distribution registers its plugin module through the ``kernelpro`` entry-point group."""

from __future__ import annotations

from importlib.metadata import entry_points

import pluggy

from kernelpro import hookspecs
from kernelpro.api import Analyzer, Collector, LLMTool, MicroProfiler


def test_entry_point_declared():
    eps = {ep.name: ep.value for ep in entry_points(group="kernelpro")}
    assert eps.get("sass") == "kernelpro_plugins_sass.plugin"


def test_plugin_registers_everything():
    pm = pluggy.PluginManager("kernelpro")
    pm.add_hookspecs(hookspecs)
    ep = next(ep for ep in entry_points(group="kernelpro") if ep.name == "sass")
    pm.register(ep.load())
    got: dict[str, list[type]] = {}
    for hook in ("collectors", "analyzers", "micro_profilers", "llm_tools"):
        items: list[type] = []
        getattr(pm.hook, f"kernelpro_register_{hook}")(register=items.append)
        got[hook] = items
    assert [c.name for c in got["collectors"]] == ["sass"] and issubclass(got["collectors"][0], Collector)
    assert [c.name for c in got["analyzers"]] == ["sass"] and issubclass(got["analyzers"][0], Analyzer)
    assert [c.name for c in got["llm_tools"]] == ["show_sass"] and issubclass(got["llm_tools"][0], LLMTool)
    names = [c.name for c in got["micro_profilers"]]
    assert len(names) == len(set(names)) >= 9
    assert all(issubclass(c, MicroProfiler) and c.level == "instruction" for c in got["micro_profilers"])
