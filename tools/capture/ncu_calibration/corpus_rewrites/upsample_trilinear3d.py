"""``F.interpolate(x, scale_factor=2, mode="trilinear", align_corners=False)`` of a
4 x 32 x 32 x 64 x 64 fp32 tensor (corpus v7): PyTorch's ``upsample_trilinear3d_out_frame``
gives each thread one output position (depth, row, column) and walks all batch x channel planes
in a loop inside the thread, keeping the position's three source indices, six weights and the
accessor's 64-bit strides live across it: 102 registers a thread, so one 512-thread block fits
on an SM (a theoretical occupancy of 25 %, the occupancy-limiter finding); within a plane a
thread does its eight loads and the weighted sum, stores, and only then moves to the next plane,
so each thread has few loads in flight and the few warps there are wait on them (the
long-scoreboard stalls; the issue slots busy 32 % of cycles).

The rewrite turns the loop inside out: each program takes one plane, one output depth and 8
output rows x all 128 output columns (a grid of 16 x 64 x 128 programs of 8 warps), works out
the depth's source indices and weights once (scalars), each row's once and each column's once
(vectors), then gathers the eight neighbours of its 1024 outputs as eight [8, 128] tiles, 4
consecutive outputs of a row a lane, so each lane has its 32 loads in flight before the sums;
the outputs go out as one 16-byte store a lane, rows contiguous. Nothing lives across planes
(ptxas for sm_90: 48 registers, no spills, 512 bytes of shared memory and one barrier from
Triton's layout conversion of the index vectors): five 256-thread programs fit on an SM, 62.5 %
theoretical occupancy against PyTorch's 25 %.

ACTS_ON: ``occupancy_limiter`` (fewer registers a thread, 48 against 102: no state kept across a loop over
the planes), ``warp_stalls`` (long scoreboard: 32 independent loads in flight a lane),
``issue_slots`` (more resident warps, each with independent work: the action's "more resident
warps, more independent work per thread"). Not listed: ``uncoalesced_global`` (the loads of
neighbouring columns read the same or adjacent input values in both kernels; the rewrite's
gathers touch the same sectors in the same pattern, so it does not change the sectors' use).

Source indices as PyTorch's ``area_pixel_compute_source_index``: ``src = 0.5 * (dst + 0.5) -
0.5`` clamped at 0, ``i0 = (int) src``, ``i1 = i0 + (i0 < in - 1)``, ``l1 = src - i0``, ``l0 = 1 -
l1`` (all exact in fp32 for a factor of 2), and the same nesting of the weighted sum (depth of
rows of columns). Tolerance: the compilers contract the products into fused multiply-adds
differently; outputs (below ~5 in magnitude) agree to a few fp32 ulps: RTOL = 1e-5, ATOL = 1e-5."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 4
CORPUS = "h100_v7"
WORKLOAD = "upsample_trilinear3d@large"
KERNEL = "upsample_trilinear3d_out_frame"
ACTS_ON = ("occupancy_limiter", "warp_stalls", "issue_slots")
ACTION = ("one plane, one output depth and an 8 x 128 tile of outputs a program, indices and weights worked "
          "out once per depth, row and column, 4 outputs a lane with their 32 loads in flight: no per-thread "
          "loop over the planes, few registers, many resident warps")
SIZES = {"large": (4, 32, 32, 64), "small": (1, 2, 4, 8)}
RTOL, ATOL = 1e-5, 1e-5


def inputs(torch, device, n, c, d, hw):
    return [torch.randn(n, c, d, hw, hw, device=device)]


def before(torch, x):
    return torch.nn.functional.interpolate(x, scale_factor=2, mode="trilinear", align_corners=False)


@triton.jit
def _source_index(dst, n_in):
    # PyTorch's area_pixel_compute_source_index (align_corners=False, not cubic), scale 1/2
    src = tl.maximum(0.5 * (dst.to(tl.float32) + 0.5) - 0.5, 0.0)
    i0 = src.to(tl.int32)  # truncation, as the C++ cast (src >= 0)
    i1 = i0 + (i0 < n_in - 1).to(tl.int32)
    l1 = src - i0.to(tl.float32)
    return i0, i1, 1.0 - l1, l1


@triton.jit
def _kp_r_upsample_trilinear3d(x_ptr, y_ptr, D: tl.constexpr, H: tl.constexpr, W: tl.constexpr,
                               BH: tl.constexpr, BW: tl.constexpr):
    OD: tl.constexpr = 2 * D
    OH: tl.constexpr = 2 * H
    OW: tl.constexpr = 2 * W
    pid_h = tl.program_id(0)
    od = tl.program_id(1)
    plane = tl.program_id(2).to(tl.int64)
    oh = pid_h * BH + tl.arange(0, BH)[:, None]
    ow = tl.arange(0, BW)[None, :]
    hm = oh < OH
    m = hm & (ow < OW)
    d0, d1, dl0, dl1 = _source_index(od, D)
    h0, h1, hl0, hl1 = _source_index(oh, H)
    w0, w1, wl0, wl1 = _source_index(ow, W)
    base = x_ptr + plane * (D * H * W)
    p0 = base + d0 * (H * W)
    p1 = base + d1 * (H * W)
    r00 = p0 + h0 * W
    r01 = p0 + h1 * W
    r10 = p1 + h0 * W
    r11 = p1 + h1 * W
    x000 = tl.load(r00 + w0, mask=m, other=0.0)
    x001 = tl.load(r00 + w1, mask=m, other=0.0)
    x010 = tl.load(r01 + w0, mask=m, other=0.0)
    x011 = tl.load(r01 + w1, mask=m, other=0.0)
    x100 = tl.load(r10 + w0, mask=m, other=0.0)
    x101 = tl.load(r10 + w1, mask=m, other=0.0)
    x110 = tl.load(r11 + w0, mask=m, other=0.0)
    x111 = tl.load(r11 + w1, mask=m, other=0.0)
    v = dl0 * (hl0 * (wl0 * x000 + wl1 * x001) + hl1 * (wl0 * x010 + wl1 * x011)) + \
        dl1 * (hl0 * (wl0 * x100 + wl1 * x101) + hl1 * (wl0 * x110 + wl1 * x111))
    out = y_ptr + plane * (OD * OH * OW) + od * (OH * OW) + oh * OW + ow
    tl.store(out, v, mask=m)


def after(torch, x):
    assert x.dim() == 5 and x.is_contiguous() and x.dtype == torch.float32
    n, c, d, h, w = x.shape
    y = torch.empty(n, c, 2 * d, 2 * h, 2 * w, device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y
    assert 8 * d * h * w < 2**31
    bh = 8
    bw = triton.next_power_of_2(2 * w)
    grid = (triton.cdiv(2 * h, bh), 2 * d, n * c)
    _kp_r_upsample_trilinear3d[grid](x, y, D=d, H=h, W=w, BH=bh, BW=bw, num_warps=8)
    return y
