"""``torch.triu(x, 1)`` of an 8192 x 8192 fp32 matrix (corpus v4): PyTorch's
``triu_tril_kernel`` gives each thread two neighbouring elements with scalar accesses, so a
warp's load or store instruction touches every other 4-byte word of its sectors (half of each
sector used per request). The rewrite works on 32 x 128 tiles whose rows are 512 contiguous
bytes, read and written with 16-byte vector accesses: a tile wholly below the diagonal is only
written (zeros), a tile wholly on or above it is copied, and only a tile the diagonal crosses
selects per element."""

from __future__ import annotations

import triton
import triton.language as tl

CORPUS = "h200_v4"
WORKLOAD = "triu@large"
KERNEL = "triu_tril_kernel"
ACTS_ON = ("uncoalesced_global",)
ACTION = ("32 x 128 tiles with 16-byte vector loads and stores along rows; the per-element diagonal "
          "select only in tiles the diagonal crosses")
SIZES = {"large": (8192, 8192), "small": (150, 200)}
RTOL, ATOL = 0.0, 0.0
DIAGONAL = 1


def inputs(torch, device, rows, cols):
    return [torch.randn(rows, cols, device=device)]


def before(torch, x):
    return torch.triu(x, 1)


@triton.jit
def _kp_r_triu(x_ptr, y_ptr, rows, cols, k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    r0 = pid_m * BLOCK_M
    c0 = pid_n * BLOCK_N
    r = r0 + tl.arange(0, BLOCK_M)
    c = c0 + tl.arange(0, BLOCK_N)
    offs = r[:, None] * cols + c[None, :]
    inb = (r[:, None] < rows) & (c[None, :] < cols)
    # kept: c - r >= k. The tile's largest c - r is (c0 + BLOCK_N - 1) - r0, its smallest
    # c0 - (r0 + BLOCK_M - 1).
    if c0 + BLOCK_N - 1 - r0 < k:
        # wholly below the diagonal: zeros, nothing to read
        tl.store(y_ptr + offs, tl.zeros((BLOCK_M, BLOCK_N), dtype=y_ptr.dtype.element_ty), mask=inb)
    elif c0 - (r0 + BLOCK_M - 1) >= k:
        # wholly on or above it: a copy
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=inb), mask=inb)
    else:
        v = tl.load(x_ptr + offs, mask=inb)
        keep = (c[None, :] - r[:, None]) >= k
        tl.store(y_ptr + offs, tl.where(keep, v, tl.zeros_like(v)), mask=inb)


def after(torch, x):
    assert x.dim() == 2 and x.is_contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    bm, bn = 32, 128
    grid = (triton.cdiv(cols, bn), triton.cdiv(rows, bm))
    _kp_r_triu[grid](x, y, rows, cols, DIAGONAL, BLOCK_M=bm, BLOCK_N=bn, num_warps=4)
    return y
