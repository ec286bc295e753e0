"""``F.pad(x, (3, 3, 3, 3), mode="reflect")`` of a 32 x 64 x 128 x 128 fp32 tensor (corpus v4):
PyTorch's ``reflection_pad2d_out_kernel`` gives each thread one output element and recomputes,
per element, the plane, row and column by 64-bit division and modulo and both reflections
(``abs`` arithmetic) before one scalar load and store: it is issue-bound. The rewrite gives each
program 8 output rows of one plane; the reflected input column of every output column is
computed once per program (a vector reused by all 8 rows), the reflected input row once per row,
so an element costs an add, a load and a store. The 134-wide output row is covered by a
128-wide and an 8-wide tile (not one 256-wide tile) so that almost no lanes are masked off."""

from __future__ import annotations

import triton
import triton.language as tl

CORPUS = "h200_v4"
WORKLOAD = "reflection_pad2d@large"
KERNEL = "reflection_pad2d_out_kernel"
ACTS_ON = ("issue_bound",)
ACTION = ("8 output rows of a plane per program: reflected column indices computed once per program and "
          "reflected rows once per row (32-bit), so each element is one add, one load and one store; the "
          "output row covered by 128 + 8 wide tiles to keep lanes busy")
SIZES = {"large": (32, 64, 128), "small": (2, 3, 21)}
RTOL, ATOL = 0.0, 0.0
PAD = 3


def inputs(torch, device, n, c, hw):
    return [torch.randn(n, c, hw, hw, device=device)]


def before(torch, x):
    return torch.nn.functional.pad(x, (3, 3, 3, 3), mode="reflect")


@triton.jit
def _reflect(i, n):
    # index i in [-(n-1), 2n-2] reflected into [0, n): -j -> j, n-1+j -> n-1-j
    i = tl.abs(i)
    return (n - 1) - tl.abs((n - 1) - i)


@triton.jit
def _reflect_tile(x_plane, out_plane, in_rows, orow, rmask, ocol0, W, OW, PAD: tl.constexpr, TW: tl.constexpr):
    ocol = ocol0 + tl.arange(0, TW)
    cmask = ocol < OW
    icol = _reflect(ocol - PAD, W)
    mask = rmask[:, None] & cmask[None, :]
    v = tl.load(x_plane + in_rows[:, None] + icol[None, :], mask=mask)
    tl.store(out_plane + orow[:, None] * OW + ocol[None, :], v, mask=mask)


@triton.jit
def _kp_r_reflection_pad2d(x_ptr, out_ptr, H, W, OH, OW, PAD: tl.constexpr, BH: tl.constexpr,
                           TW1: tl.constexpr, TW2: tl.constexpr):
    plane = tl.program_id(0)
    orow = tl.program_id(1) * BH + tl.arange(0, BH)
    rmask = orow < OH
    in_rows = _reflect(orow - PAD, H) * W
    x_plane = x_ptr + plane.to(tl.int64) * H * W
    out_plane = out_ptr + plane.to(tl.int64) * OH * OW
    _reflect_tile(x_plane, out_plane, in_rows, orow, rmask, 0, W, OW, PAD, TW1)
    if TW2 > 0:
        _reflect_tile(x_plane, out_plane, in_rows, orow, rmask, TW1, W, OW, PAD, TW2)


def after(torch, x):
    n, c, h, w = x.shape
    assert PAD < h and PAD < w
    oh, ow = h + 2 * PAD, w + 2 * PAD
    out = torch.empty(n, c, oh, ow, device=x.device, dtype=x.dtype)
    tw1 = 1 << (ow.bit_length() - 1)  # the largest power of two <= ow
    tw2 = triton.next_power_of_2(ow - tw1) if ow > tw1 else 0
    bh = 8
    _kp_r_reflection_pad2d[(n * c, triton.cdiv(oh, bh))](x, out, h, w, oh, ow, PAD=PAD, BH=bh, TW1=tw1, TW2=tw2,
                                                          num_warps=4)
    return out
