"""``x.t().contiguous()`` of an 8192 x 8192 fp32 matrix (corpus v1): PyTorch's copy kernel reads
along columns (4 of each 32-byte sector used); the rewrite stages 64 x 64 tiles so that both
the loads and the stores walk the contiguous dimension."""

from __future__ import annotations

import triton
import triton.language as tl

CORPUS = "h200"
WORKLOAD = "transpose@large"
KERNEL = "direct_copy_kernel_cuda"
ACTS_ON = ("uncoalesced_global",)
ACTION = "a tiled transpose: coalesced loads of a 64 x 64 tile along rows, coalesced stores of its transpose"
SIZES = {"large": (8192, 8192), "small": (96, 160)}
RTOL, ATOL = 0.0, 0.0


def inputs(torch, device, rows, cols):
    return [torch.randn(rows, cols, device=device)]


def before(torch, x):
    return x.t().contiguous()


@triton.jit
def _kp_r_transpose(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    r = pid_r * BLOCK + tl.arange(0, BLOCK)
    c = pid_c * BLOCK + tl.arange(0, BLOCK)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    tile = tl.load(x_ptr + r[:, None] * cols + c[None, :], mask=mask)
    # y is (cols, rows): element (c, r) = x[r, c]; the transposed tile is stored along r
    tl.store(y_ptr + c[:, None] * rows + r[None, :], tl.trans(tile), mask=tl.trans(mask))


def after(torch, x):
    rows, cols = x.shape
    y = torch.empty(cols, rows, device=x.device, dtype=x.dtype)
    block = 64
    _kp_r_transpose[(triton.cdiv(rows, block), triton.cdiv(cols, block))](x, y, rows, cols, BLOCK=block,
                                                                         num_warps=8)
    return y
