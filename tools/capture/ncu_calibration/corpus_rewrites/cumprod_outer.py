"""``torch.cumprod(x, 1)`` of a (64, 512, 1024) fp32 tensor (corpus v6): PyTorch's
``tensor_kernel_scan_outer_dim`` gives each thread one (batch, feature) column and walks its
512 steps one dependent load at a time (one 4-byte load in flight per thread, 4 warps per
scheduler, 98 % of stalls waiting on global memory). The rewrite gives a program a
(batch, 32-feature) column strip and walks the steps in 64 x 32 tiles: each tile is one batch
of independent loads (prefetched a stage ahead by the software pipeline), scanned in registers
with ``tl.cumprod`` along the steps and multiplied by the carry of the tiles before it;
64 x 32 = 2048 programs instead of 128 blocks."""

from __future__ import annotations

import triton
import triton.language as tl

CORPUS = "h200_v6"
WORKLOAD = "cumprod_outer@large"
KERNEL = "tensor_kernel_scan_outer_dim"
ACTS_ON = ("warp_stalls", "issue_slots", "occupancy_gap")
ACTION = ("per (batch, 32-feature strip) program: 64-step x 32-feature tiles loaded at once (pipelined), "
          "scanned in registers and chained by a carry: many loads in flight, 2048 programs")
SIZES = {"large": (64, 512, 1024), "small": (2, 150, 80)}
# a tile's scan multiplies in a tree order and chains tiles by their carry, where PyTorch's CUDA
# kernel multiplies strictly left to right (its CPU kernel accumulates in double): over 512
# factors in [0.99, 1.01] (products of order 1) the rounding differs by at most some 1e-6
# relative; 1e-5 / 1e-6 leaves room without hiding a wrong step
RTOL, ATOL = 1e-5, 1e-6


def inputs(torch, device, batch, steps, features):
    x = torch.rand(batch, steps, features, device=device)
    x.mul_(0.02).add_(0.99)
    return [x]


def before(torch, x):
    return torch.cumprod(x, 1)


@triton.jit
def _kp_r_cumprod_outer(x_ptr, y_ptr, S, F, BLOCK_S: tl.constexpr, BLOCK_F: tl.constexpr,
                        NUM_STAGES: tl.constexpr):
    pid_f = tl.program_id(0)
    b = tl.program_id(1)
    f = pid_f * BLOCK_F + tl.arange(0, BLOCK_F)
    fmask = f < F
    base = b.to(tl.int64) * S * F
    s_local = tl.arange(0, BLOCK_S)
    last = (s_local == BLOCK_S - 1)[:, None]
    carry = tl.full((BLOCK_F,), 1.0, tl.float32)
    for s0 in tl.range(0, S, BLOCK_S, num_stages=NUM_STAGES):
        s = s0 + s_local
        mask = (s[:, None] < S) & fmask[None, :]
        offs = base + s[:, None] * F + f[None, :]
        # padding rows are 1: the scan's last row is then the product of the valid rows
        v = tl.load(x_ptr + offs, mask=mask, other=1.0).to(tl.float32)
        p = tl.cumprod(v, axis=0) * carry[None, :]
        tl.store(y_ptr + offs, p.to(y_ptr.dtype.element_ty), mask=mask)
        # the next carry is the tile's last row (extracted exactly: one value plus zeros)
        carry = tl.sum(tl.where(last, p, 0.0), axis=0)


def after(torch, x):
    assert x.dim() == 3 and x.is_contiguous()
    batch, steps, features = x.shape
    y = torch.empty_like(x)
    block_f = min(32, triton.next_power_of_2(features))
    block_s = 64
    grid = (triton.cdiv(features, block_f), batch)
    _kp_r_cumprod_outer[grid](x, y, steps, features, BLOCK_S=block_s, BLOCK_F=block_f, NUM_STAGES=3,
                              num_warps=4)
    return y
