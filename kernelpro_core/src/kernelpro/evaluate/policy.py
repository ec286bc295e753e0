"""Call policies: what a candidate's forward may call.

* ``any``: anything.
* ``no_torch_compute``: every aten operator reached during forward (from Python or from a
  C++ extension: both go through the dispatcher) must be allocation, a view, a copy or a
  fill (:data:`NON_COMPUTE`); enforced on every correctness trial with a
  ``TorchDispatchMode``.
* ``own_kernel``: ``no_torch_compute`` and, on a GPU, at least one kernel launched
  during forward is defined in the candidate's source (a ``__global__`` function or a
  ``@triton.jit`` function): kernel names come from ``torch.profiler`` (CUPTI/Kineto).
  On a CPU there are no kernels to observe: only the ``no_torch_compute`` part is
  enforced and the result carries the flag ``own_kernel_unverified_on_cpu``.
"""

from __future__ import annotations

import re

import torch

NON_COMPUTE = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "scalar_tensor",
    "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand", "expand_as",
    "select", "slice", "unsqueeze", "squeeze", "contiguous", "clone", "copy_", "_to_copy", "to",
    "detach", "alias", "lift_fresh", "split", "split_with_sizes", "chunk", "unbind", "flatten", "view_as",
    "size", "sym_size", "stride", "sym_stride", "numel", "sym_numel", "is_contiguous", "resize_", "set_",
    "fill_", "zero_", "_reshape_alias", "unfold", "narrow", "item", "_local_scalar_dense", "dim",
    "storage_offset", "sym_storage_offset", "record_stream", "is_same_size", "_has_compatible_shallow_copy_type",
}


class ComputeRecorder(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the aten operators reached that compute (not in :data:`NON_COMPUTE`)."""

    def __init__(self) -> None:
        super().__init__()
        self.compute_ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        if name not in NON_COMPUTE and name.rstrip("_") not in NON_COMPUTE:
            self.compute_ops.add(name)
        return func(*args, **(kwargs or {}))


_GLOBAL_FN = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?(?:inline\s+)?"
                        r"void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)")
_TRITON_FN = re.compile(r"@triton\.(?:jit|autotune\([^@]*?\)\s*@triton\.jit)[^\n]*\n\s*def\s+(\w+)", re.S)


def own_kernel_names(source: str) -> set[str]:
    """Names of kernels the candidate's source defines (CUDA ``__global__``, Triton)."""
    names = set(_GLOBAL_FN.findall(source)) | set(_TRITON_FN.findall(source))
    names |= set(re.findall(r"@triton\.jit\s*(?:\([^)]*\))?\s*\n\s*def\s+(\w+)", source))
    return {n for n in names if n}


def launched_kernels(fn) -> list[str]:
    """Names of the GPU kernels ``fn()`` launches, from torch.profiler (CUDA activity)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = []
    for evt in prof.events():
        dev = getattr(evt, "device_type", None)
        if dev is not None and "CUDA" in str(dev) and evt.name not in names:
            names.append(evt.name)
    return names


def uses_own_kernel(kernels: list[str], own: set[str]) -> bool:
    return any(re.search(rf"\b{re.escape(n)}\b", k) for k in kernels for n in own)
