"""``F.max_pool2d(x, 3, 2, 1)`` of a 32 x 64 x 112 x 112 fp32 tensor (corpus v1): PyTorch's
``max_pool_forward_nchw`` gives each thread one output and walks its 3 x 3 window with 9
stride-2 scalar loads (half of each fetched sector unused per request), bounds checks and 64-bit
index arithmetic per tap: it is issue-bound. The rewrite gives each program a strip of 8 output
rows x 64 output columns of one plane. Per input row it loads the centre and right taps of every
output as one contiguous 8-byte pair (a coalesced vector load of the whole row segment, split
into even and odd columns in registers) plus the left tap (the previous pair's odd column, an L1
hit); it reduces each input row horizontally once and reuses the reduced row ``2*oh+1`` as the
top row of output row ``oh+1``, so an output costs about 4 load instructions instead of 9, with
32-bit offsets hoisted out of the row loop. It writes both PyTorch outputs: the values and the
int64 argmax indices (``h * W + w`` within the plane), with PyTorch's rule (row-major window
order, strictly greater replaces, a NaN always replaces), so the first maximum wins."""

from __future__ import annotations

import triton
import triton.language as tl

CORPUS = "h200"
WORKLOAD = "max_pool2d@large"
KERNEL = "max_pool_forward_nchw"
ACTS_ON = ("issue_bound", "uncoalesced_global")
ACTION = ("8 x 64 output strips per program: contiguous 8-byte pair loads of each input row split into "
          "even/odd taps, each input row reduced once and reused by the next output row, 32-bit hoisted "
          "offsets; values and int64 indices written")
SIZES = {"large": (32, 64, 112), "small": (2, 3, 37)}
RTOL, ATOL = 0.0, 0.0


def inputs(torch, device, n, c, hw):
    return [torch.randn(n, c, hw, hw, device=device)]


def before(torch, x):
    return torch.nn.functional.max_pool2d(x, 3, 2, 1)


def before_with_indices(torch, x):
    return torch.nn.functional.max_pool2d(x, 3, 2, 1, return_indices=True)


@triton.jit
def _maxpool_hrow(plane_ptr, r, H, W, ow, omask, BW: tl.constexpr):
    """Horizontal max (and its column) over columns 2*ow-1, 2*ow, 2*ow+1 of input row r;
    -inf where the row or a column lies in the padding."""
    rvalid = (r >= 0) & (r < H)
    row_ptr = plane_ptr + r * W
    j = tl.arange(0, 2)
    col2 = 2 * ow[:, None] + j[None, :]
    pair = tl.load(row_ptr + col2, mask=rvalid & omask[:, None] & (col2 < W), other=float("-inf"))
    centre, right = tl.split(pair)
    left = tl.load(row_ptr + 2 * ow - 1, mask=rvalid & omask & (ow > 0), other=float("-inf"))
    v = left
    col = 2 * ow - 1
    take = (centre > v) | (centre != centre)
    v = tl.where(take, centre, v)
    col = tl.where(take, 2 * ow, col)
    take = (right > v) | (right != right)
    v = tl.where(take, right, v)
    col = tl.where(take, 2 * ow + 1, col)
    return v, r * W + col


@triton.jit
def _maxpool_combine(v, i, rv, ri):
    take = (rv > v) | (rv != rv)
    return tl.where(take, rv, v), tl.where(take, ri, i)


@triton.jit
def _kp_r_max_pool2d(x_ptr, out_ptr, idx_ptr, H, W, OH, OW, BH: tl.constexpr, BW: tl.constexpr):
    plane = tl.program_id(0)
    oh0 = tl.program_id(1) * BH
    ow = tl.program_id(2) * BW + tl.arange(0, BW)
    omask = ow < OW
    plane_ptr = x_ptr + plane.to(tl.int64) * H * W
    out_off = plane.to(tl.int64) * OH * OW
    out_row = out_ptr + out_off
    idx_row = idx_ptr + out_off
    # PyTorch's starting index: the first in-bounds tap of the window
    wstart = tl.maximum(2 * ow - 1, 0)
    # reduced input row 2*oh0-1, the top row of the strip's first output row
    tv, ti = _maxpool_hrow(plane_ptr, 2 * oh0 - 1, H, W, ow, omask, BW)
    for oh in range(oh0, tl.minimum(oh0 + BH, OH)):
        mv, mi = _maxpool_hrow(plane_ptr, 2 * oh, H, W, ow, omask, BW)
        bv, bi = _maxpool_hrow(plane_ptr, 2 * oh + 1, H, W, ow, omask, BW)
        v = tl.full((BW,), float("-inf"), tl.float32)
        i = tl.maximum(2 * oh - 1, 0) * W + wstart
        v, i = _maxpool_combine(v, i, tv, ti)
        v, i = _maxpool_combine(v, i, mv, mi)
        v, i = _maxpool_combine(v, i, bv, bi)
        tl.store(out_row + oh * OW + ow, v, mask=omask)
        tl.store(idx_row + oh * OW + ow, i.to(tl.int64), mask=omask)
        tv, ti = bv, bi


def after_with_indices(torch, x):
    n, c, h, w = x.shape
    oh, ow = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    out = torch.empty(n, c, oh, ow, device=x.device, dtype=x.dtype)
    idx = torch.empty(n, c, oh, ow, device=x.device, dtype=torch.int64)
    bh = 8
    bw = min(64, triton.next_power_of_2(ow))
    _kp_r_max_pool2d[(n * c, triton.cdiv(oh, bh), triton.cdiv(ow, bw))](x, out, idx, h, w, oh, ow, BH=bh, BW=bw,
                                                                       num_warps=2)
    return out, idx


def after(torch, x):
    return after_with_indices(torch, x)[0]
