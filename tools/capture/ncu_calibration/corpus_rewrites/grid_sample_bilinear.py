"""``F.grid_sample(x, grid, mode="bilinear", align_corners=False)`` of a 32 x 64 x 128 x 128 fp32
tensor at a 32 x 128 x 128 grid of random points (corpus v3): PyTorch's
``grid_sampler_2d_kernel`` gives each thread one output point, works out its four neighbours
and weights, then walks the 64 channels one after another: per channel up to four loads at the
point's scattered position, their weighted sum, one store, and only then the next channel, so a
thread has few loads in flight at a time and every warp waits on them (the finding's
long-scoreboard stalls; the issue slots idle although the warps are there). The rewrite gives
each program 128 points of one image, one point a lane: the point's coordinates, neighbours,
weights and bounds are worked out once, then 8 channels at a time are gathered as a 128 x 8
tile per neighbour, each lane holding its point's 8 channels, so each lane issues 32
independent loads (8 channels x 4 neighbours) before it adds any of them (ptxas for sm_90:
the 32 loads back to back, 48 registers, no shared memory), and stores the 8 channels'
outputs, consecutive lanes on consecutive points (coalesced, as PyTorch's stores are). The
gathers themselves stay scattered: the grid is random.

Tolerance: both unnormalize a coordinate as ``((g + 1) * size - 1) / 2`` in fp32 and take the
same floor, neighbours and weights; the four weighted taps are summed in the same order, but
the compilers may contract the products into fused multiply-adds differently, and PyTorch's
CPU kernel (the CPU check) vectorizes its own sequence: outputs below ~5 in magnitude agree to
a few fp32 ulps: RTOL = 1e-5, ATOL = 1e-5."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 3
CORPUS = "h200_v3"
WORKLOAD = "grid_sample_bilinear@large"
KERNEL = "grid_sampler_2d_kernel"
ACTS_ON = ("warp_stalls", "issue_slots")
ACTION = ("one point a lane, its neighbours and weights worked out once, then 8 channels at a time gathered "
          "together: 32 independent loads in flight a lane before the adds, coalesced stores")
SIZES = {"large": (32, 64, 128), "small": (2, 5, 16)}
RTOL, ATOL = 1e-5, 1e-5


def inputs(torch, device, n, c, hw):
    x = torch.randn(n, c, hw, hw, device=device)
    grid = torch.rand(n, hw, hw, 2, device=device) * 2 - 1
    return [x, grid]


def before(torch, x, grid):
    return torch.nn.functional.grid_sample(x, grid, mode="bilinear", align_corners=False)


@triton.jit
def _kp_r_grid_sample_bilinear(x_ptr, g_ptr, y_ptr, C, OHW, IH: tl.constexpr, IW: tl.constexpr,
                               BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_p = tl.program_id(0)
    n = tl.program_id(1).to(tl.int64)
    # the points as a [BLOCK_P, 1] column, one a lane (no vector hint), each lane all of a chunk's
    # channels: the tile's layout is the points' own, no layout changes
    p = tl.max_contiguous(pid_p * BLOCK_P + tl.arange(0, BLOCK_P), 1)[:, None]
    pm = p < OHW
    g = g_ptr + (n * OHW + p) * 2
    gx = tl.load(g, mask=pm, other=0.0)
    gy = tl.load(g + 1, mask=pm, other=0.0)
    ix = ((gx + 1.0) * IW - 1.0) / 2.0
    iy = ((gy + 1.0) * IH - 1.0) / 2.0
    fx = tl.floor(ix)
    fy = tl.floor(iy)
    x0 = fx.to(tl.int32)
    y0 = fy.to(tl.int32)
    x1 = x0 + 1
    y1 = y0 + 1
    # PyTorch's weights: each the area of the opposite sub-rectangle
    w_nw = (x1.to(tl.float32) - ix) * (y1.to(tl.float32) - iy)
    w_ne = (ix - x0.to(tl.float32)) * (y1.to(tl.float32) - iy)
    w_sw = (x1.to(tl.float32) - ix) * (iy - y0.to(tl.float32))
    w_se = (ix - x0.to(tl.float32)) * (iy - y0.to(tl.float32))
    in_x0 = (x0 >= 0) & (x0 < IW)
    in_x1 = (x1 >= 0) & (x1 < IW)
    in_y0 = (y0 >= 0) & (y0 < IH)
    in_y1 = (y1 >= 0) & (y1 < IH)
    m_nw = pm & in_x0 & in_y0
    m_ne = pm & in_x1 & in_y0
    m_sw = pm & in_x0 & in_y1
    m_se = pm & in_x1 & in_y1
    o_nw = y0 * IW + x0
    o_ne = y0 * IW + x1
    o_sw = y1 * IW + x0
    o_se = y1 * IW + x1
    IHW: tl.constexpr = IH * IW
    for c0 in range(0, C, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        cm = (c < C)[None, :]
        plane = x_ptr + (n * C + c)[None, :] * IHW
        v_nw = tl.load(plane + o_nw, mask=cm & m_nw, other=0.0)
        v_ne = tl.load(plane + o_ne, mask=cm & m_ne, other=0.0)
        v_sw = tl.load(plane + o_sw, mask=cm & m_sw, other=0.0)
        v_se = tl.load(plane + o_se, mask=cm & m_se, other=0.0)
        out = v_nw * w_nw
        out += v_ne * w_ne
        out += v_sw * w_sw
        out += v_se * w_se
        tl.store(y_ptr + (n * C + c)[None, :] * OHW + p, out, mask=cm & pm)


def after(torch, x, grid):
    assert x.dim() == 4 and x.is_contiguous() and grid.is_contiguous() and grid.shape[-1] == 2
    n, c, ih, iw = x.shape
    oh, ow = grid.shape[1], grid.shape[2]
    y = torch.empty(n, c, oh, ow, device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y
    block_p = 128
    block_c = min(8, triton.next_power_of_2(c))
    # one point a lane: 128 points over 4 warps
    grid_p = (triton.cdiv(oh * ow, block_p), n)
    _kp_r_grid_sample_bilinear[grid_p](x, grid, y, c, oh * ow, IH=ih, IW=iw, BLOCK_P=block_p, BLOCK_C=block_c,
                                       num_warps=4)
    return y
