"""KernelPro plugin module of kernelpro_cute (entry point ``cute`` in group ``kernelpro``).

Registers the corpus tools for LLM generators, the Hopper CuTe preset heuristic and the
``kernelpro cute`` command group.
"""

from __future__ import annotations

from kernelpro.hookspecs import hookimpl

from kernelpro_cute.heuristics import CutePresetHeuristic
from kernelpro_cute.tools import TOOLS


@hookimpl
def kernelpro_register_llm_tools(register):
    for tool in TOOLS:
        register(tool)


@hookimpl
def kernelpro_register_heuristics(register):
    register(CutePresetHeuristic)


@hookimpl
def kernelpro_register_commands(cli):
    from kernelpro_cute.cli import cute_group

    cli.add_command(cute_group)
