"""The offline ``expert`` generator (no LLM, no network).

recognize (torch.fx trace -> op graph -> fusible regions) -> render (Triton templates in
``kernels/``, CUDA-graph wrapper) -> moves (parameter changes chosen from profiler
findings). Registered by :mod:`kernelpro_plugins_expert.plugin`. See docs/expert.md.
"""
