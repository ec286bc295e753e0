"""Loads the validation kernels of kernels.cu as one PyTorch extension, ``kp_ncu_kernels``.

Built once with ``torch.utils.cpp_extension.load_inline`` (-O3 -lineinfo, so that Nsight
Compute can attribute counters to source lines). When ``KP_NCU_EXT_SO`` names the built
shared object, it is imported directly, which keeps every profiled subprocess free of
rebuild checks.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
FUNCTIONS = (
    "copy_vec4", "transpose_naive", "transpose_conflict", "transpose_padded", "spill",
    "tiny_grid", "tail_grid", "sgemm_fp32", "unfused_fp32", "fused_fp32", "divergent",
    "smem_hog", "occupancy_gap", "chain_unfused", "chain_fused", "strided_reuse", "pointer_chase",
)
DECLARATIONS = """
torch::Tensor copy_vec4(torch::Tensor x);
torch::Tensor transpose_naive(torch::Tensor x);
torch::Tensor transpose_conflict(torch::Tensor x);
torch::Tensor transpose_padded(torch::Tensor x);
torch::Tensor spill(torch::Tensor x);
torch::Tensor tiny_grid(torch::Tensor x);
torch::Tensor tail_grid(torch::Tensor x, int64_t blocks, int64_t iters);
torch::Tensor sgemm_fp32(torch::Tensor a, torch::Tensor b);
torch::Tensor unfused_fp32(torch::Tensor x, int64_t iters);
torch::Tensor fused_fp32(torch::Tensor x, int64_t iters);
torch::Tensor divergent(torch::Tensor x, int64_t iters);
torch::Tensor smem_hog(torch::Tensor x);
torch::Tensor occupancy_gap(torch::Tensor x, int64_t iters);
torch::Tensor chain_unfused(torch::Tensor x);
torch::Tensor chain_fused(torch::Tensor x);
torch::Tensor strided_reuse(torch::Tensor x);
torch::Tensor pointer_chase(torch::Tensor next, int64_t threads, int64_t steps);
"""

_module = None


def load(verbose: bool = False):
    """The extension module (built on first use, then cached)."""
    global _module
    if _module is not None:
        return _module
    import torch  # noqa: F401  (the extension links against torch's libraries)

    del torch

    so = os.environ.get("KP_NCU_EXT_SO")
    if so and Path(so).exists():
        loader = importlib.machinery.ExtensionFileLoader("kp_ncu_kernels", so)
        spec = importlib.util.spec_from_file_location("kp_ncu_kernels", so, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        _module = module
        return module
    from torch.utils.cpp_extension import load_inline

    _module = load_inline(
        name="kp_ncu_kernels",
        cpp_sources=DECLARATIONS,
        cuda_sources=(HERE / "kernels.cu").read_text(),
        functions=list(FUNCTIONS),
        extra_cuda_cflags=["-O3", "-lineinfo"],
        verbose=verbose,
    )
    return _module
