"""Candidates for rowsum_problem: Triton row sums that read the same 1 GiB at the same
speed but execute different instructions.

Redundant FMAs (``fma<k>``): ``k`` FMAs per element, all on the element just loaded: a
chain ``c = x; c = 0.5 c + x`` (k - 1 times), folded in as ``x + c * 0.0`` (the k-th),
which the compiler may not drop (0 * inf is NaN) and which adds exactly 0, so every
variant returns the plain sum bit for bit. The chain lives for one element only, so it
costs no registers across the loop (occupancy does not change with ``k``).

* ``triton_b4096_fma<k>``: one program per row, blocks of 4096 columns on 8 warps, each
  thread reading four 16-byte vectors per block. Bandwidth-bound with many warps per SM;
  the plain kernel drew 634 W on the H200, one or two FMAs per element add arithmetic
  that hides under DRAM time (eight per element reached the 700 W limit).
* ``triton_b4096_scalar``: the plain kernel compiled without the divisibility of the row
  stride and column count (``do_not_specialize``): Triton cannot prove 16-byte alignment
  and issues sixteen 4-byte loads per thread instead of four 16-byte ones: the same bytes
  in the same coalesced warp requests, four times the load instructions.
* ``triton_b2048_w4``: blocks of 2048 columns on 4 warps, the same bytes from another
  launch shape.
* ``half_fma<k>``: a persistent grid of one program per two SMs, so few warps are
  resident and the kernel is latency-bound, far below the power limit (220-340 W on the
  H200). Its first version looped over rows and blocks with masked loads; for the mask's
  ``other`` values ptxas loaded a block's four 16-byte vectors into one register quad,
  each after the previous one had been added (one load in flight per thread), while with
  eight FMAs per element it issued all four first: that, not the FMAs, made ``half_fma0``
  2.3 times slower than ``half_fma8`` (read from the SASS that Triton 3.6 emits for
  sm_90a). Now each program walks the blocks of all its rows as one loop pipelined by
  Triton (``num_stages``: asynchronous copies of the next block in flight while the
  current one is added), the same load schedule whatever ``k``.

``VARIANTS`` maps a name to a ModelNew factory.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _rowsum_rows(x_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr, EXTRA_FMA: tl.constexpr,
                 EVEN: tl.constexpr):
    """One program per row: the row's sum in fp32, with EXTRA_FMA redundant FMAs per
    element folded in as 0."""
    row = tl.program_id(0)
    row_ptr = x_ptr + row.to(tl.int64) * row_stride
    partial = tl.zeros((BLOCK,), dtype=tl.float32)
    for col in range(0, n_cols, BLOCK):
        offs = col + tl.arange(0, BLOCK)
        if EVEN:
            x = tl.load(row_ptr + offs)
        else:
            x = tl.load(row_ptr + offs, mask=offs < n_cols, other=0.0)
        if EXTRA_FMA > 0:
            chain = x
            for _ in tl.static_range(EXTRA_FMA - 1):
                chain = chain * 0.5 + x
            x = x + chain * 0.0  # one FMA; adds exactly 0 (chain stays finite)
        partial += x
    total = tl.sum(partial, axis=0)
    tl.store(y_ptr + row, total)


# the same source compiled twice: specialised on the divisibility of the row stride and
# column count (16-byte loads), and without it (4-byte loads)
_rowsum_grid = triton.jit(_rowsum_rows)
_rowsum_grid_unaligned = triton.jit(do_not_specialize=["n_cols", "row_stride"])(_rowsum_rows)


@triton.jit
def _rowsum_persistent(x_ptr, y_ptr, n_rows, n_cols, row_stride, BLOCK: tl.constexpr,
                       EXTRA_FMA: tl.constexpr, EVEN: tl.constexpr, STAGES: tl.constexpr):
    """Program p sums rows p, p + P, p + 2P, ... (P programs, P <= n_rows), walking the
    blocks of all its rows as one loop so that Triton's pipeliner (STAGES) keeps the
    copies of the next blocks in flight, across row ends, while it adds the current one."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    per_row = tl.cdiv(n_cols, BLOCK)
    steps = tl.cdiv(n_rows - pid, programs) * per_row
    lane = tl.arange(0, BLOCK)
    partial = tl.zeros((BLOCK,), dtype=tl.float32)
    for step in tl.range(0, steps, num_stages=STAGES):
        row = pid + (step // per_row) * programs
        cols = (step % per_row) * BLOCK + lane
        ptrs = x_ptr + row.to(tl.int64) * row_stride + cols
        if EVEN:
            x = tl.load(ptrs)
        else:
            x = tl.load(ptrs, mask=cols < n_cols, other=0.0)
        if EXTRA_FMA > 0:
            chain = x
            for _ in tl.static_range(EXTRA_FMA - 1):
                chain = chain * 0.5 + x
            x = x + chain * 0.0  # one FMA; adds exactly 0 (chain stays finite)
        partial += x
        if step % per_row == per_row - 1:
            tl.store(y_ptr + row, tl.sum(partial, axis=0))
            partial = tl.zeros((BLOCK,), dtype=tl.float32)


def half_the_sms(device) -> int:
    """One program per two SMs on a GPU; 4 programs elsewhere (Triton's CPU interpreter)."""
    if device.type == "cuda":
        return max(1, torch.cuda.get_device_properties(device).multi_processor_count // 2)
    return 4


class ModelNew(nn.Module):
    """Row sums of a 2-D fp32 tensor: one program per row (``grid="rows"``), the same
    without alignment specialisation (``"rows_unaligned"``), or a persistent grid of one
    program per two SMs (``"half"``)."""

    def __init__(self, extra_fma=0, block=4096, warps=8, grid="rows", stages=3):
        super().__init__()
        if grid not in ("rows", "rows_unaligned", "half"):
            raise ValueError(f"unknown rowsum grid {grid!r}")
        self.extra_fma = extra_fma
        self.block = block
        self.warps = warps
        self.grid = grid
        self.stages = stages

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        # the unaligned variant keeps the mask: an unmasked load would not be the point
        even = cols % self.block == 0 and self.grid != "rows_unaligned"
        meta = dict(BLOCK=self.block, EXTRA_FMA=self.extra_fma, EVEN=even, num_warps=self.warps)
        if self.grid == "half":
            _rowsum_persistent[(min(rows, half_the_sms(x.device)),)](x, y, rows, cols, x.stride(0),
                                                                     STAGES=self.stages, **meta)
        elif self.grid == "rows_unaligned":
            _rowsum_grid_unaligned[(rows,)](x, y, cols, x.stride(0), **meta)
        else:
            _rowsum_grid[(rows,)](x, y, cols, x.stride(0), **meta)
        return y


VARIANTS = {
    "triton_b4096_fma0": functools.partial(ModelNew, extra_fma=0),
    "triton_b4096_fma1": functools.partial(ModelNew, extra_fma=1),
    "triton_b4096_fma2": functools.partial(ModelNew, extra_fma=2),
    "triton_b4096_fma3": functools.partial(ModelNew, extra_fma=3),
    "triton_b4096_scalar": functools.partial(ModelNew, grid="rows_unaligned"),
    "triton_b2048_w4": functools.partial(ModelNew, block=2048, warps=4),
    "half_fma0": functools.partial(ModelNew, grid="half"),
    "half_fma1": functools.partial(ModelNew, extra_fma=1, grid="half"),
    "half_fma2": functools.partial(ModelNew, extra_fma=2, grid="half"),
    "half_fma8": functools.partial(ModelNew, extra_fma=8, grid="half"),
}
