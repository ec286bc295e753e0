"""``F.pdist(x)`` of 12288 points in 64 dimensions, fp32 (corpus v7): PyTorch's
``pdist_kernel_cuda_impl<float, dists<float>::two>`` launches one 256-thread block per pair of
points (75.5 million blocks): the block's threads stride over the pair's 64 coordinates (three
quarters of them have no coordinate at all), each accumulates its squared differences, and the
block reduces the 256 partial sums through warp shuffles and a shared-memory exchange between
``__syncthreads()`` barriers, then one thread stores the pair's 4-byte distance. Per pair that is
about 770 issued warp instructions (5.8e10 for the 75.5 million pairs: index arithmetic, the
block reduction, the barriers) for 64 subtract-multiply-adds, so the issue slots bound it
(the finding: issue-bound at 81 % of cycles with the ALU 43 % busy), most warps of a block
finish long before the one that stores, and the stores are single 4-byte writes one sector
each (12.5 % of the sector used).

The rewrite gives each program a 16 x 128 tile of pairs (16 points ``i`` against 128 points
``j``; tiles wholly at or below the diagonal exit at once): the 64 coordinates are walked in a
loop, each step loading one coordinate of the 16 + 128 points (the 16 the same for all lanes, a
broadcast from L1) and doing one subtract and one fused multiply-add for each of the tile's
2048 pairs, 16 pairs a lane (one ``j``, 16 ``i``) held in registers: no reduction across lanes,
no shared memory, no barrier (ptxas for sm_90: 74 registers, no spills). The distances go out
by rows of the condensed upper triangle (``j > i``), consecutive lanes on consecutive ``j``:
contiguous, coalesced stores.

ACTS_ON: ``issue_bound`` (the warp instructions per pair fall from about 770 to about 6: some 50 per
coordinate for a warp's 512 pairs, 17 loads, 16 subtracts, 16 FMAs; no block reduction, no
barrier),
``uncoalesced_global`` (the single 4-byte stores, one sector each, become contiguous row
segments). Not listed: ``occupancy_gap`` (its action is to give every warp of a block the same
work and launch fuller blocks; the rewrite's lanes do hold equal work, but it keeps 16
accumulators a lane, 74 registers, which lowers the theoretical occupancy to 6 blocks of 4 warps
an SM: it trades warps for work per lane rather than filling the empty warp slots).

Tolerance: both sum the 64 squared differences in fp32 and take ``sqrt``; PyTorch in a
per-thread then tree order, the rewrite in coordinate order (with fused multiply-adds): the
sums (around 128 for randn points) differ by a few ulps, the distances (around 11) by about
1e-6: RTOL = 1e-5, ATOL = 1e-5."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 4
CORPUS = "h100_v7"
WORKLOAD = "pdist@large"
KERNEL = "pdist_kernel_cuda_impl"
ACTS_ON = ("issue_bound", "uncoalesced_global")
ACTION = ("a 16 x 128 tile of pairs a program, 16 pairs a lane in registers, the coordinates walked in a "
          "loop (one subtract and one FMA per pair and coordinate): no block reduction, no barriers, "
          "the condensed distances stored by contiguous rows")
SIZES = {"large": (12288, 64), "small": (128, 16)}
RTOL, ATOL = 1e-5, 1e-5


def inputs(torch, device, n, d):
    return [torch.randn(n, d, device=device)]


def before(torch, x):
    return torch.nn.functional.pdist(x)


@triton.jit
def _kp_r_pdist(x_ptr, y_ptr, N, D: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    bi = tl.program_id(0)
    bj = tl.program_id(1)
    if (bj + 1) * BJ - 1 <= bi * BI:  # tiles below the diagonal: no pair with j > i
        return
    i = bi * BI + tl.arange(0, BI)
    j = bj * BJ + tl.arange(0, BJ)
    im = i < N
    jm = j < N
    acc = tl.zeros((BI, BJ), dtype=tl.float32)
    for k in range(D):
        a = tl.load(x_ptr + i * D + k, mask=im, other=0.0)
        b = tl.load(x_ptr + j * D + k, mask=jm, other=0.0)
        diff = a[:, None] - b[None, :]
        acc += diff * diff
    dist = tl.sqrt(acc)
    # row i of the condensed matrix starts at i * N - i * (i + 1) / 2 (its pairs j = i + 1 .. N - 1)
    i64 = i.to(tl.int64)[:, None]
    j64 = j.to(tl.int64)[None, :]
    out = i64 * N - (i64 * (i64 + 1)) // 2 + (j64 - i64 - 1)
    tl.store(y_ptr + out, dist, mask=(j64 > i64) & jm[None, :] & im[:, None])


def after(torch, x):
    assert x.dim() == 2 and x.is_contiguous() and x.dtype == torch.float32
    n, d = x.shape
    y = torch.empty(n * (n - 1) // 2, device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y
    assert n * d < 2**31
    bi, bj = 16, 128
    _kp_r_pdist[(triton.cdiv(n, bi), triton.cdiv(n, bj))](x, y, n, D=d, BI=bi, BJ=bj, num_warps=4)
    return y
