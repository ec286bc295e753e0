"""Registration of the expert generator (entry point ``kernelpro: expert``)."""

from kernelpro.api import hookimpl

#: the KernelPro plugin API this plugin is written for (checked when it loads)
KERNELPRO_API_VERSION = "1.9"


@hookimpl
def kernelpro_register_generators(register):
    # imported when the registry is read, not when the entry point is loaded: the
    # generator's modules import torch
    from kernelpro_plugins_expert.generator import ExpertGenerator

    register(ExpertGenerator)
