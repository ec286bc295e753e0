"""``F.adaptive_avg_pool2d(x, 7)`` of a 64 x 256 x 56 x 56 fp32 tensor (corpus v2): PyTorch's
``adaptive_average_pool`` gives each thread one output and walks its 8 x 8 window with scalar
loads; the threads of a warp that lie along the output row are only 7 wide (7 outputs a row),
so most lanes of a warp have no output (thread divergence: few threads per instruction), and
the lanes that do read 4 bytes every 32 bytes (8-column windows side by side: the finding's
excess sectors). The rewrite gives each program one (n, c) plane and walks its output rows:
for output row ``oh`` it loads the window's input rows as a [rows, 64] tile whose rows are the
contiguous 56-float input rows (every lane busy, 16-byte vectors), sums the tile over its rows,
then sums each output column's window out of the row sums with a [64, 8] membership mask (no
gather, no per-lane loop bound), and stores the 7 averages. Window bounds are PyTorch's
(``floor(o * H / OH)`` to ``ceil((o + 1) * H / OH)``), so any input size works.

Tolerance: both sides sum 64 fp32 values of randn in different orders (PyTorch: row by row,
left to right; here: columns first, then a tree), then divide by the window's rows and columns;
the sums are below ~40 in magnitude and each order's rounding error is at most about 64 half-ulps
of the partial sums, so the averages agree to about 1e-6: RTOL = 1e-5, ATOL = 1e-6."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 2
CORPUS = "h200_v2"
WORKLOAD = "adaptive_avg_pool2d@large"
KERNEL = "adaptive_average_pool"
ACTS_ON = ("uncoalesced_global", "thread_divergence")
ACTION = ("one program per plane: each output row's window rows loaded as full contiguous input rows "
          "(all lanes busy, 16-byte vectors), summed over rows, then into the 7 column windows by a "
          "membership mask")
SIZES = {"large": (64, 256, 56), "small": (2, 3, 23)}
RTOL, ATOL = 1e-5, 1e-6
OUT = 7


def inputs(torch, device, n, c, hw):
    return [torch.randn(n, c, hw, hw, device=device)]


def before(torch, x):
    return torch.nn.functional.adaptive_avg_pool2d(x, 7)


@triton.jit
def _kp_r_adaptive_avg_pool2d(x_ptr, y_ptr, H, OH, OW, W: tl.constexpr,
                              KH: tl.constexpr, BW: tl.constexpr, BO: tl.constexpr):
    # W a constant: the row offsets' divisibility (56 = 8 x 7) is known, so the loads are 16-byte vectors
    plane = tl.program_id(0).to(tl.int64)
    x_plane = x_ptr + plane * H * W
    y_plane = y_ptr + plane * OH * OW
    r = tl.arange(0, KH)
    w = tl.arange(0, BW)
    o = tl.arange(0, BO)
    # the column windows of the OW outputs: [ws, we) per output column
    ws = (o * W) // OW
    we = ((o + 1) * W + OW - 1) // OW
    member = (w[:, None] >= ws[None, :]) & (w[:, None] < we[None, :])
    kw = (we - ws).to(tl.float32)
    for oh in range(0, OH):
        hs = (oh * H) // OH
        he = ((oh + 1) * H + OH - 1) // OH
        h = hs + r
        m = (h[:, None] < he) & (w[None, :] < W)
        tile = tl.load(x_plane + h[:, None] * W + w[None, :], mask=m, other=0.0)
        colsum = tl.sum(tile, axis=0)
        win = tl.sum(tl.where(member, colsum[:, None], 0.0), axis=0)
        kh = (he - hs).to(tl.float32)
        tl.store(y_plane + oh * OW + o, win / kh / kw, mask=o < OW)


def after(torch, x):
    assert x.dim() == 4 and x.is_contiguous()
    n, c, h, w = x.shape
    oh = ow = OUT
    y = torch.empty(n, c, oh, ow, device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y
    kh_max = max(-(-(o + 1) * h // oh) - (o * h) // oh for o in range(oh))  # the tallest window
    _kp_r_adaptive_avg_pool2d[(n * c,)](x, y, h, oh, ow, W=w, KH=triton.next_power_of_2(kh_max),
                                        BW=max(16, triton.next_power_of_2(w)),
                                        BO=triton.next_power_of_2(ow), num_warps=2)
    return y
