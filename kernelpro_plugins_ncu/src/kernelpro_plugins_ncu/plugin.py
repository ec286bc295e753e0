"""Registration of the ncu plugin's contributions (entry point ``kernelpro: ncu``)."""

from __future__ import annotations

from kernelpro.api import hookimpl

from kernelpro_plugins_ncu.analyzer import NcuAnalyzer
from kernelpro_plugins_ncu.calibrate import register_command, resolve_gpu_spec
from kernelpro_plugins_ncu.classifier import RooflineClassifier
from kernelpro_plugins_ncu.collector import NcuCollector
from kernelpro_plugins_ncu.llm_tool import FetchMetrics
from kernelpro_plugins_ncu.micro import ALL_MICRO_PROFILERS

#: the KernelPro plugin API this plugin is written for (checked when it loads)
KERNELPRO_API_VERSION = "1.9"


@hookimpl
def kernelpro_register_collectors(register):
    register(NcuCollector)


@hookimpl
def kernelpro_register_analyzers(register):
    register(NcuAnalyzer)


@hookimpl
def kernelpro_register_classifiers(register):
    register(RooflineClassifier)


@hookimpl
def kernelpro_register_micro_profilers(register):
    for cls in ALL_MICRO_PROFILERS:
        register(cls)


@hookimpl
def kernelpro_register_llm_tools(register):
    register(FetchMetrics)


@hookimpl
def kernelpro_register_commands(cli):
    register_command(cli)


@hookimpl
def kernelpro_resolve_gpu_spec(device_name, arch):
    return resolve_gpu_spec(device_name, arch)
