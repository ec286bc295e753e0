"""Compiler flags for CuTe/CUTLASS translation units built with ``load_inline``.

``build_flags()`` returns keyword arguments for
``torch.utils.cpp_extension.load_inline``. Passing a ``-gencode`` flag makes torch skip
its own architecture flags, so the binary holds exactly the ``sm_90a`` code WGMMA and
TMA need (plain ``sm_90`` has neither). Torch adds ``-D__CUDA_NO_HALF_OPERATORS__`` and
friends to every nvcc call; CUTLASS's numeric types need those operators, so they are
undefined again here (nvcc applies -D/-U in command-line order and ours come later).
"""

from __future__ import annotations

import os
import re

from kernelpro_cute.corpus import locate

# the macros torch's COMMON_NVCC_FLAGS defines; CUTLASS's half_t/bfloat16_t need them off
_TORCH_NO_OPERATOR_MACROS = (
    "__CUDA_NO_HALF_OPERATORS__",
    "__CUDA_NO_HALF_CONVERSIONS__",
    "__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "__CUDA_NO_HALF2_OPERATORS__",
    "__CUDA_NO_BFLOAT16_OPERATORS__",
)


def _gencode(arch: str) -> str:
    m = re.fullmatch(r"sm_(\d+)([a-z]?)", arch)
    if not m:
        raise ValueError(f"arch {arch!r} is not of the form sm_90a / sm_90 / sm_100a")
    num, suffix = m.groups()
    return f"-gencode=arch=compute_{num}{suffix},code=sm_{num}{suffix}"


def nvcc_flags(arch: str = "sm_90a") -> list[str]:
    """nvcc flags (without include paths) for a CuTe translation unit."""
    return [
        "-std=c++17",
        _gencode(arch),
        "--expt-relaxed-constexpr",
        "--expt-extended-lambda",
        "-O3",
        "-DNDEBUG",
        # CUTLASS's own CMake build defines this for every tensor-core kernel
        "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
        *(f"-U{macro}" for macro in _TORCH_NO_OPERATOR_MACROS),
    ]


def build_flags(arch: str = "sm_90a", cutlass_path: str | os.PathLike | None = None) -> dict:
    """``dict(extra_include_paths=[...], extra_cuda_cflags=[...], extra_cflags=[...])`` for
    ``load_inline``. Raises :class:`kernelpro_cute.corpus.CorpusError` (one line) when no
    CUTLASS tree is found."""
    corpus = locate(cutlass_path)
    return {
        "extra_include_paths": [str(p) for p in corpus.include_dirs],
        "extra_cuda_cflags": nvcc_flags(arch),
        # the host (g++) side keeps torch's own -std: its headers follow torch's standard
        "extra_cflags": ["-O3"],
    }
