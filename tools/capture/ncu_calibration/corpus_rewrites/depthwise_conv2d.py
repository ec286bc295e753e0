"""``F.conv2d(x, w, padding=1, groups=512)`` (a 3 x 3 depthwise convolution, no bias) of a
32 x 512 x 56 x 56 fp32 tensor (corpus v2): PyTorch's ``conv_depthwise2d_forward_kernel`` gives
each thread one output of a flat grid-stride index, recovers (n, c, h, w) by divisions, and reads
its 9 taps with bounds checks; a warp's 32 consecutive outputs straddle the 56-wide rows of a
plane, so its tap loads span two input rows at an offset that is not sector-aligned (the
finding's excess sectors), and the weight loads are repeated per output. The rewrite gives each
program an 8 x 64 output tile of one plane (the 56-wide rows laid along the warps' lanes, each
row starting a tile row): the 9 weights of the channel are loaded once as scalars, and each tap is
a shifted [8, 64] tile load of contiguous row segments (the input tile's rows stay in L1 for
the neighbouring taps), with 32-bit offsets and masks for the padding; outputs are stored as
whole contiguous row segments.

Tolerance: each output sums 9 products in kernel order (rows, then columns) with fused
multiply-adds on the GPU, as PyTorch's kernel does; other backends (the CPU reference of the
tests) may round differently. The sums are below ~15 in magnitude, so RTOL = 1e-5,
ATOL = 1e-5."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 2
CORPUS = "h200_v2"
WORKLOAD = "depthwise_conv2d@large"
KERNEL = "conv_depthwise2d_forward_kernel"
ACTS_ON = ("uncoalesced_global",)
ACTION = ("8 x 64 output tiles of one plane per program, rows aligned with the lanes: 9 shifted tile loads "
          "of contiguous row segments (L1 reuse between taps), the channel's weights loaded once, 32-bit "
          "offsets")
SIZES = {"large": (32, 512, 56), "small": (2, 3, 19)}
RTOL, ATOL = 1e-5, 1e-5


def inputs(torch, device, n, c, hw):
    return [torch.randn(n, c, hw, hw, device=device), torch.randn(c, 1, 3, 3, device=device)]


def before(torch, x, w):
    return torch.nn.functional.conv2d(x, w, padding=1, groups=x.shape[1])


@triton.jit
def _kp_r_depthwise_conv2d(x_ptr, w_ptr, y_ptr, C, H, W: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    plane = tl.program_id(0)
    h0 = tl.program_id(1) * BH
    c = plane % C
    x_plane = x_ptr + plane.to(tl.int64) * H * W
    y_plane = y_ptr + plane.to(tl.int64) * H * W
    h = h0 + tl.arange(0, BH)
    col = tl.arange(0, BW)
    acc = tl.zeros((BH, BW), dtype=tl.float32)
    for kh in tl.static_range(3):
        ih = h + (kh - 1)
        hm = (ih >= 0) & (ih < H)
        for kw in tl.static_range(3):
            iw = col + (kw - 1)
            m = hm[:, None] & ((iw >= 0) & (iw < W))[None, :]
            wv = tl.load(w_ptr + c * 9 + kh * 3 + kw)
            xv = tl.load(x_plane + ih[:, None] * W + iw[None, :], mask=m, other=0.0)
            acc += wv * xv
    om = (h[:, None] < H) & (col[None, :] < W)
    tl.store(y_plane + h[:, None] * W + col[None, :], acc, mask=om)


def after(torch, x, w):
    assert x.dim() == 4 and x.is_contiguous() and tuple(w.shape) == (x.shape[1], 1, 3, 3)
    n, c, h, wd = x.shape
    y = torch.empty_like(x)
    if y.numel() == 0:
        return y
    bh, bw = 8, max(16, triton.next_power_of_2(wd))
    _kp_r_depthwise_conv2d[(n * c, triton.cdiv(h, bh))](x, w.contiguous(), y, c, h, W=wd, BH=bh, BW=bw,
                                                         num_warps=4)
    return y
