"""KernelPro plugin module of kernelpro_cute (entry point ``cute`` in group ``kernelpro``).

Registers the corpus tools for LLM generators, the Hopper CuTe preset heuristic and the
``kernelpro cute`` command group.
"""

from __future__ import annotations

from kernelpro.api import hookimpl

from kernelpro_cute.heuristics import CutePresetHeuristic
from kernelpro_cute.tools import TOOLS

#: the KernelPro plugin API this plugin is written for (checked when it loads)
KERNELPRO_API_VERSION = "1.9"


@hookimpl
def kernelpro_register_llm_tools(register):
    for tool in TOOLS:
        register(tool)


@hookimpl
def kernelpro_register_heuristics(register):
    register(CutePresetHeuristic)


@hookimpl
def kernelpro_build_include_dirs():
    """CUTLASS/CuTe headers for candidate builds: $CUTLASS_PATH, else the nvidia-cutlass
    package; none when neither is there (a build that needs them then fails to compile)."""
    from kernelpro_cute.corpus import CorpusError, locate

    try:
        return [str(p) for p in locate().include_dirs]
    except CorpusError:
        return []


@hookimpl
def kernelpro_register_commands(cli):
    from kernelpro_cute.cli import cute_group

    cli.add_command(cute_group)
