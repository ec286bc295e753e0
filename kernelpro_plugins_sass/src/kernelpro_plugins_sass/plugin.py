"""Registration of the SASS plugin (entry point ``sass`` in group ``kernelpro``)."""

from __future__ import annotations

from kernelpro.api import hookimpl

from kernelpro_plugins_sass.collector import SassAnalyzer, SassCollector
from kernelpro_plugins_sass.llm_tool import ShowSass
from kernelpro_plugins_sass.profilers import ALL as MICRO_PROFILERS

#: the KernelPro plugin API this plugin is written for (checked when it loads)
KERNELPRO_API_VERSION = "1.9"


@hookimpl
def kernelpro_register_collectors(register):
    register(SassCollector)


@hookimpl
def kernelpro_register_analyzers(register):
    register(SassAnalyzer)


@hookimpl
def kernelpro_register_micro_profilers(register):
    for cls in MICRO_PROFILERS:
        register(cls)


@hookimpl
def kernelpro_register_llm_tools(register):
    register(ShowSass)
