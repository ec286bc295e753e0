"""``torch.kthvalue(x, 4096, dim=-1)`` of an 8192 x 8192 fp32 matrix (corpus v4): PyTorch's
``gatherKthValue`` gives each row one 1024-thread block and finds the row's k-th smallest value
by radix selection with 2-bit digits: 16 passes over the row, each reading all 8192 values
again (from L1/L2), turning each into its order-preserving integer key, extracting the digit
and counting the four digit values with warp ballots, population counts and a shared-memory
sum, then narrowing the wanted prefix by two bits; a last pass finds the value's index. Nearly
all of it is integer and logic work (the finding: the ALU pipe 82 % busy, the next busiest at
15 %, issue 73 % of cycles), for a row that is read from DRAM once.

The rewrite gives each row one program of 16 warps that loads the row once into registers (16
values a lane, 16-byte loads) and turns each value into its key once; it then selects with
8-bit digits: 4 passes, each a 256-bin histogram (``tl.histogram``) of the digit of the keys
that still match the prefix found so far, a prefix sum over the 256 bins, and the bin holding
the k-th key. The value is the one whose key is the prefix found, its index the first column
holding it (``tl.min`` over the row). Triton builds each histogram from warp ballots and
population counts into shared memory (ptxas for sm_90: 113 registers, no spills, one barrier;
one 512-thread program an SM at a time, fewer resident warps than PyTorch's 1024-thread blocks:
the rewrite cuts the integer work, not the occupancy).

ACTS_ON: ``pipe_bound`` (its action for selection kernels: fewer passes over the data, wider
radix digits, and the index and key arithmetic hoisted: 4 passes of 8 bits over register-held
keys computed once, instead of 16 passes of 2 bits over values read and converted again each
pass). Every finding on the kernel is listed.

Exact: the same k-th smallest value; its index is the only column holding that value unless
the row holds it twice (PyTorch's block then stores whichever thread found a copy; the rewrite
the first), which randn rows of 8192 values do with a probability of the order of 1e-6 a row.
The key of -0.0 sorts below that of +0.0 here; PyTorch's keys do the same."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 4
CORPUS = "h200_v4"
WORKLOAD = "kthvalue_rows@large"
KERNEL = "gatherKthValue"
ACTS_ON = ("pipe_bound",)
ACTION = ("one 16-warp program per row holding the row in registers: keys computed once, radix selection "
          "with 8-bit digits (4 histogram passes over registers) instead of 16 passes of 2-bit digits over "
          "the row re-read each pass")
SIZES = {"large": (8192, 8192), "small": (64, 256)}
RTOL, ATOL = 0.0, 0.0


def inputs(torch, device, rows, cols):
    return [torch.randn(rows, cols, device=device)]


def before(torch, x):
    return torch.kthvalue(x, x.shape[-1] // 2, dim=-1)


@triton.jit
def _kp_r_kthvalue_rows(x_ptr, v_ptr, i_ptr, k, cols: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    m = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=m, other=float("nan"))
    bits = x.to(tl.int32, bitcast=True)
    # order-preserving unsigned key: negative values flip every bit, the others the sign bit
    key = (bits ^ ((bits >> 31) | -2147483648)).to(tl.uint32, bitcast=True)
    prefix = tl.zeros((), dtype=tl.uint32)
    rem = k
    bins = tl.arange(0, 256)
    for p in tl.static_range(4):
        shift = 24 - 8 * p
        if p == 0:
            match = m
        else:
            match = m & ((key >> (shift + 8)) == (prefix >> (shift + 8)))
        digit = ((key >> shift) & 255).to(tl.int32)
        hist = tl.histogram(digit, 256, mask=match)
        cum = tl.cumsum(hist, 0)
        d = tl.sum((cum < rem).to(tl.int32), 0)  # the first bin whose running count reaches rem
        rem = rem - tl.sum(tl.where(bins < d, hist, 0), 0)
        prefix = prefix | (d.to(tl.uint32) << shift)
    hit = m & (key == prefix)
    value = tl.max(tl.where(hit, x, float("-inf")), 0)
    index = tl.min(tl.where(hit, c, BLOCK), 0)
    tl.store(v_ptr + row, value)
    tl.store(i_ptr + row, index.to(tl.int64))


def after(torch, x):
    assert x.dim() == 2 and x.is_contiguous() and x.dtype == torch.float32
    rows, cols = x.shape
    k = cols // 2
    values = torch.empty(rows, device=x.device, dtype=x.dtype)
    indices = torch.empty(rows, device=x.device, dtype=torch.int64)
    if rows == 0:
        return values, indices
    assert 1 <= k <= cols <= 8192
    block = max(256, triton.next_power_of_2(cols))
    _kp_r_kthvalue_rows[(rows,)](x, values, indices, k, cols=cols, BLOCK=block, num_warps=16)
    return values, indices


def before_with_indices(torch, x):
    # the operation returns (values, indices) itself: the CPU check compares the indices exactly
    return before(torch, x)


def after_with_indices(torch, x):
    return after(torch, x)
