"""KernelPro instruction-level profiling.

Disassembles the machine code of a candidate's kernels (torch ``load_inline`` shared
objects, nvcc objects and cubins, Triton's cached cubins) with ``cuobjdump`` /
``nvdisasm``, reads ptxas' resource usage and warnings, and turns the instruction stream
into findings through micro-profilers of level ``"instruction"``.
"""

__version__ = "0.1.0"
