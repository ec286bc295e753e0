"""Registration of the system-level plugin (entry point ``nsys_timeline``)."""

from __future__ import annotations

from kernelpro.api import hookimpl

from kernelpro_plugins_nsys.analyzer import TraceAnalyzer
from kernelpro_plugins_nsys.collector import TimelineCollector
from kernelpro_plugins_nsys.micro import MICRO_PROFILERS

#: the KernelPro plugin API this plugin is written for (checked when it loads)
KERNELPRO_API_VERSION = "1.9"


@hookimpl
def kernelpro_register_collectors(register):
    register(TimelineCollector)


@hookimpl
def kernelpro_register_analyzers(register):
    register(TraceAnalyzer)


@hookimpl
def kernelpro_register_micro_profilers(register):
    for cls in MICRO_PROFILERS:
        register(cls)
