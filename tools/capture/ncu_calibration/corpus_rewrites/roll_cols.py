"""``torch.roll(x, 7, 1)`` of an 8192 x 8192 fp32 matrix (corpus v3): PyTorch's
``roll_cuda_kernel`` gives each thread one element of a grid-stride loop and works out its
source with 64-bit division and modulo; its scalar loads start 7 elements (28 bytes) off every
32-byte sector, so each warp's 128-byte load spans 5 sectors instead of 4 (the finding's excess
sectors, all on the load side). The rewrite reads only whole, aligned 16-byte groups: an output
group of 4 columns ``4g..4g+3`` takes its elements from the two aligned source groups
``g - q - 1`` and ``g - q`` (``shift = 4q + r``), both loaded as 16-byte vectors, and
assembles the shifted group in registers (split and join of the 4-vectors); the wrap-around is
a group index taken modulo the row's group count, so no per-element division. Each program
writes 2048 columns of one row with 16-byte stores. A row length that is not a multiple of 4
(never the workload's) goes to a plain kernel with coalesced scalar loads."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 2
CORPUS = "h200_v3"
WORKLOAD = "roll_cols@large"
KERNEL = "roll_cuda_kernel"
ACTS_ON = ("uncoalesced_global",)
ACTION = ("aligned 16-byte vector loads of the two source groups of each 4-column output group, the shift "
          "by shift % 4 done in registers, 16-byte stores; the wrap a group index modulo the row's groups")
SIZES = {"large": (8192, 8192), "small": (6, 1036)}
RTOL, ATOL = 0.0, 0.0
SHIFT = 7


def inputs(torch, device, rows, cols):
    return [torch.randn(rows, cols, device=device)]


def before(torch, x):
    return torch.roll(x, 7, 1)


@triton.jit
def _kp_r_roll_cols(x_ptr, y_ptr, cols, groups, q, R: tl.constexpr, BLOCK_G: tl.constexpr):
    """y[row, 4g + k] = x[row, (4g + k - shift) mod cols] with shift = 4q + R (0 <= R < 4)."""
    pid_g = tl.program_id(0)
    row = tl.program_id(1).to(tl.int64)
    g = pid_g * BLOCK_G + tl.arange(0, BLOCK_G)
    gmask = g < groups
    # the aligned source groups: b = g - q holds elements k >= R, a = g - q - 1 those k < R
    gb = g - q
    gb = tl.where(gb < 0, gb + groups, gb)
    ga = gb - 1
    ga = tl.where(ga < 0, ga + groups, ga)
    k = tl.arange(0, 4)
    x_row = x_ptr + row * cols
    m2 = gmask[:, None] & (k[None, :] < 4)
    b = tl.load(x_row + gb[:, None] * 4 + k[None, :], mask=m2)
    if R == 0:
        out = b
    else:
        a = tl.load(x_row + ga[:, None] * 4 + k[None, :], mask=m2)
        # the four elements of each 4-vector: reshape to (.., 2, 2), split twice
        a_even, a_odd = tl.split(tl.reshape(a, (BLOCK_G, 2, 2)))
        a0, a2 = tl.split(a_even)
        a1, a3 = tl.split(a_odd)
        b_even, b_odd = tl.split(tl.reshape(b, (BLOCK_G, 2, 2)))
        b0, b2 = tl.split(b_even)
        b1, b3 = tl.split(b_odd)
        # y_k = a[k - R + 4] for k < R, b[k - R] otherwise
        if R == 1:
            y0, y1, y2, y3 = a3, b0, b1, b2
        elif R == 2:
            y0, y1, y2, y3 = a2, a3, b0, b1
        else:
            y0, y1, y2, y3 = a1, a2, a3, b0
        # the inverse of the splits: [g, i, j] -> element 2i + j
        out = tl.reshape(tl.join(tl.join(y0, y2), tl.join(y1, y3)), (BLOCK_G, 4))
    tl.store(y_ptr + row * cols + g[:, None] * 4 + k[None, :], out, mask=m2)


@triton.jit
def _kp_r_roll_cols_any(x_ptr, y_ptr, cols, shift, BLOCK: tl.constexpr):
    pid_c = tl.program_id(0)
    row = tl.program_id(1).to(tl.int64)
    c = pid_c * BLOCK + tl.arange(0, BLOCK)
    src = c - shift
    src = tl.where(src < 0, src + cols, src)
    m = c < cols
    tl.store(y_ptr + row * cols + c, tl.load(x_ptr + row * cols + src, mask=m), mask=m)


def after(torch, x):
    assert x.dim() == 2 and x.is_contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return y
    shift = SHIFT % cols
    if cols % 4 == 0:
        groups = cols // 4
        block_g = 512
        grid = (triton.cdiv(groups, block_g), rows)
        _kp_r_roll_cols[grid](x, y, cols, groups, shift // 4, R=shift % 4, BLOCK_G=block_g, num_warps=4)
    else:
        block = 2048
        _kp_r_roll_cols_any[(triton.cdiv(cols, block), rows)](x, y, cols, shift, BLOCK=block, num_warps=4)
    return y
