"""Candidates for rowsum_problem: one Triton program per row, blocked over columns,
optionally with redundant FMAs per element (bounded chain folded in as ``* 0.0``, see
affine_candidates), and with different block sizes.

``half_*``: a persistent grid of one program per two SMs, each looping over rows. It is
slower than the full grid, but it keeps the GPU below its power limit (every full-grid
variant drew ~690-700 W on the H200), where redundant arithmetic costs energy without
costing time. ``VARIANTS`` maps a name to a ModelNew factory."""

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


@triton.jit
def _rowsum_persistent(x_ptr, y_ptr, n_rows, n_cols, row_stride, BLOCK: tl.constexpr,
                       EXTRA_FMA: tl.constexpr):
    # row * row_stride stays below 2**31 for the problem's 16384 x 16384 matrix
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row_ptr = x_ptr + row * row_stride
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


def half_the_sms(device) -> int:
    if device.type == "cuda":
        return max(1, torch.cuda.get_device_properties(device).multi_processor_count // 2)
    return 4


class HalfGrid(nn.Module):
    def __init__(self, extra_fma=0, block=4096, warps=8):
        super().__init__()
        self.extra_fma = extra_fma
        self.block = block
        self.warps = warps

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        grid = (min(rows, half_the_sms(x.device)),)
        _rowsum_persistent[grid](x, y, rows, cols, x.stride(0), BLOCK=self.block,
                                 EXTRA_FMA=self.extra_fma, num_warps=self.warps)
        return y


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
    "half_fma0": functools.partial(HalfGrid, extra_fma=0),
    "half_fma8": functools.partial(HalfGrid, extra_fma=8),
}
