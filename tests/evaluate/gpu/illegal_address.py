"""A Triton kernel that stores far out of bounds: a sticky illegal-address error."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bad_store_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs + (1 << 40), 1.0, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = out.numel()
        bad_store_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK=1024)
        return out
