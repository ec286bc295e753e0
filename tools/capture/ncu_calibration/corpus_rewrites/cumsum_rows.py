"""``torch.cumsum(x, 1)`` of a 4096 x 8192 fp32 matrix (corpus v1): PyTorch's
``tensor_kernel_scan_innermost_dim`` launches 256 blocks of 512 threads (16 rows a block), which
fill only half of one wave of an H100/H200, and scans each chunk through shared memory with
bank-conflicted accesses. The rewrite gives every row its own program (4096 programs of 4 warps,
about two full waves of warp slots) and scans 2048-element chunks in registers (each thread a
contiguous run of 16 elements, then warp shuffles; shared memory only for the per-warp totals),
with the next chunk's load issued before the current chunk is scanned.

Tolerance: both sides sum in fp32 in different orders (PyTorch: a chunked up-sweep/down-sweep
tree; here: per-thread sequential runs, shuffle tree, a running fp32 carry between chunks).
Prefix sums of randn grow like sqrt(k) (|S| up to ~430 over 8192 columns and 4096 rows), and
each order's rounding error is a random walk of 0.5 ulp(|S|) steps: measured on CPU against an
fp64 reference over the large input, a purely sequential fp32 scan errs by up to 1.0e-3 and this
kernel's order (16-element sequential runs, then a tree, a carry per 2048) by up to 2.8e-4.
PyTorch's blocked tree lies between, so the two fp32 results differ by a few 1e-4: ATOL = 1e-3
(absolute, since prefix sums cross zero) and RTOL = 1e-5 (relative to ~1e2 magnitudes)."""

from __future__ import annotations

import triton
import triton.language as tl

CORPUS = "h200"
WORKLOAD = "cumsum_rows@large"
KERNEL = "tensor_kernel_scan_innermost_dim"
ACTS_ON = ("occupancy_gap", "shared_bank_conflicts")
ACTION = ("one program (4 warps) per row, so 4096 programs fill every SM's warp slots; each 2048-element "
          "chunk scanned in registers and warp shuffles (no bank-conflicted shared tile), the next chunk "
          "prefetched, an fp32 carry between chunks")
SIZES = {"large": (4096, 8192), "small": (6, 4500)}
RTOL, ATOL = 1e-5, 1e-3


def inputs(torch, device, rows, cols):
    return [torch.randn(rows, cols, device=device)]


def before(torch, x):
    return torch.cumsum(x, 1)


@triton.jit
def _kp_r_cumsum_rows(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * cols
    y_row = y_ptr + row.to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    carry = tl.zeros((), dtype=tl.float32)
    cur = tl.load(x_row + offs, mask=offs < cols, other=0.0)
    for start in range(BLOCK, cols, BLOCK):
        # issue the next chunk's load before the current chunk's scan
        nxt = tl.load(x_row + start + offs, mask=start + offs < cols, other=0.0)
        scanned = tl.cumsum(cur, 0) + carry
        tl.store(y_row + (start - BLOCK) + offs, scanned)
        carry += tl.sum(cur, 0)
        cur = nxt
    last = ((cols - 1) // BLOCK) * BLOCK
    scanned = tl.cumsum(cur, 0) + carry
    tl.store(y_row + last + offs, scanned, mask=last + offs < cols)


def after(torch, x):
    rows, cols = x.shape
    y = torch.empty_like(x)
    _kp_r_cumsum_rows[(rows,)](x, y, cols, BLOCK=2048, num_warps=4)
    return y
