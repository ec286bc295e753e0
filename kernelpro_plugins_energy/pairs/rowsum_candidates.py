"""Candidates for rowsum_problem: one Triton program per row, blocked over columns,
optionally with redundant FMAs per element (bounded chain folded in as ``* 0.0``, see
affine_candidates), and with different block sizes. ``VARIANTS`` maps a name to a
ModelNew factory."""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rowsum(x_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr, EXTRA_FMA: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = x_ptr + row.to(tl.int64) * row_stride
    partial = tl.zeros((BLOCK,), dtype=tl.float32)
    chain = tl.zeros((BLOCK,), dtype=tl.float32)
    for col in range(0, n_cols, BLOCK):
        offs = col + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + offs, mask=offs < n_cols, other=0.0)
        partial += x
        if EXTRA_FMA > 0:
            for _ in tl.static_range(EXTRA_FMA):
                chain = chain * 0.5 + x
    total = tl.sum(partial, axis=0)
    if EXTRA_FMA > 0:
        total = total + tl.sum(chain, axis=0) * 0.0
    tl.store(y_ptr + row, total)


class ModelNew(nn.Module):
    def __init__(self, extra_fma=0, block=4096, warps=8):
        super().__init__()
        self.extra_fma = extra_fma
        self.block = block
        self.warps = warps

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        _rowsum[(rows,)](x, y, cols, x.stride(0), BLOCK=self.block, EXTRA_FMA=self.extra_fma,
                         num_warps=self.warps)
        return y


VARIANTS = {
    "triton_b4096_fma0": functools.partial(ModelNew, extra_fma=0),
    "triton_b4096_fma8": functools.partial(ModelNew, extra_fma=8),
    "triton_b4096_fma16": functools.partial(ModelNew, extra_fma=16),
    "triton_b1024_fma0": functools.partial(ModelNew, extra_fma=0, block=1024, warps=4),
}
