"""The offline ``expert`` generator (no LLM, no network).

recognize (torch.fx trace -> op graph -> fusible regions) -> render (Triton templates,
CUDA-graph wrapper) -> moves (parameter changes chosen from profiler findings). See
docs/expert.md.
"""

from kernelpro.hookspecs import hookimpl


@hookimpl
def kernelpro_register_generators(register):
    from kernelpro.generate.expert.generator import ExpertGenerator

    register(ExpertGenerator)
