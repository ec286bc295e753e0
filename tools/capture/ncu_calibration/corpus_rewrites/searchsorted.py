"""``torch.searchsorted(b, v)`` of 64 Mi fp32 values into 1 Mi sorted fp32 boundaries (corpus
v3b): PyTorch's ``searchsorted_cuda_kernel`` gives each thread one value at a time (a
grid-stride loop of 1024 blocks of 1024 threads) and runs its binary search to the end before
the next value: about 21 loads into the 4 MB of boundaries, each address depending on the
previous load's result, so a thread has a single load in flight, every warp waits on the L2
for each step (the finding's long-scoreboard stalls), and the issue slots stay idle although
nearly every warp slot is full. The rewrite gives each lane 8 values (programs of 1024 values,
4 warps) and runs their 8 searches in lockstep: a branchless lower bound whose step count
depends only on the number of boundaries (``lo`` moves up by ``half`` where
``not b[lo + half] >= v``, the range halves), so every step issues 8 independent loads a lane
(ptxas for sm_90: 32 registers, every warp slot still usable); the values are read and the
int64 positions written as contiguous 16-byte vectors.

Exact: both return, for each value, the first position whose boundary is not below it
(``not (b[i] >= v)`` moves past ``i``, PyTorch's comparison, so a NaN value goes past the end
in both); the boundaries are sorted, so the position is unique."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 3
CORPUS = "h200_v3b"
WORKLOAD = "searchsorted@large"
KERNEL = "searchsorted_cuda_kernel"
ACTS_ON = ("warp_stalls", "issue_slots")
ACTION = ("8 values a lane searched in lockstep: a branchless lower bound with a fixed step count, each step "
          "8 independent loads into the boundaries a lane instead of one dependent chain; 16-byte value "
          "loads and position stores")
SIZES = {"large": (1 << 20, 64 << 20), "small": (1000, 1 << 16)}
RTOL, ATOL = 0.0, 0.0


def inputs(torch, device, edges, n):
    b = torch.sort(torch.randn(edges, device=device)).values
    v = torch.randn(n, device=device)
    return [b, v]


def before(torch, b, v):
    return torch.searchsorted(b, v)


@triton.jit
def _kp_r_searchsorted(b_ptr, v_ptr, out_ptr, n_values, n_edges, steps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n_values
    v = tl.load(v_ptr + offs, mask=m, other=0.0)
    lo = tl.zeros((BLOCK,), tl.int32)
    # the answer lies in [lo, lo + n]; each step keeps the half that holds it
    n = n_edges
    for _ in range(steps):
        half = n // 2
        mid = tl.load(b_ptr + lo + half)
        lo = tl.where(mid >= v, lo, lo + half)
        n = n - half
    last = tl.load(b_ptr + lo)
    lo = tl.where(last >= v, lo, lo + 1)
    tl.store(out_ptr + offs, lo.to(tl.int64), mask=m)


def after(torch, b, v):
    assert b.dim() == 1 and v.dim() == 1 and b.is_contiguous() and v.is_contiguous()
    out = torch.empty(v.shape, device=v.device, dtype=torch.int64)
    if v.numel() == 0:
        return out
    if b.numel() == 0:
        return out.zero_()
    assert b.numel() < 2**31
    steps, n = 0, b.numel()
    while n > 1:
        n -= n // 2
        steps += 1
    block = 1024
    _kp_r_searchsorted[(triton.cdiv(v.numel(), block),)](b, v, out, v.numel(), b.numel(), steps, BLOCK=block,
                                                         num_warps=4)
    return out
