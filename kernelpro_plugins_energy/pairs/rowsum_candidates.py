"""Candidates for rowsum_problem: Triton row sums that read the same 1 GiB at the same
speed but execute different instructions.

* ``triton_b4096_fma<k>``: one program per row, blocks of 4096 columns, 16 fp32 per thread
  read as four 128-bit loads, with ``k`` redundant FMAs per element (a bounded chain
  ``c = 0.5 c + x``, folded into the result as ``+ sum(c) * 0.0``, which the compiler may
  not remove since 0 * inf is NaN, so the result is exactly the plain sum). On the H200
  the plain kernel drew 634 W at full DRAM bandwidth; one or two FMAs per element stay
  under DRAM time and below the 700 W limit (eight ran into it).
* ``triton_b4096_scalar``: the plain kernel compiled without the row stride's and column
  count's divisibility (``do_not_specialize``), so Triton cannot prove 16-byte alignment
  and issues sixteen 32-bit loads per thread instead of four 128-bit ones: same bytes and
  the same coalesced 128-byte warp requests, four times the load instructions.
* ``triton_b2048_w4``: blocks of 2048 columns on 4 warps, the same bandwidth from
  another launch shape.
* ``half_fma<k>``: a persistent grid of one program per two SMs, each looping over rows.
  Far fewer warps are resident, so each runs latency-bound at well under the power limit
  (220-340 W on the H200). The earlier version masked every load; for the mask's
  ``other`` values ptxas kept the four 128-bit loads of an iteration in one register
  quad and waited for each before issuing the next (one load in flight per thread),
  while with eight FMAs per element it issued all four first: that, not the FMAs, made
  ``half_fma0`` 2.3 times slower than ``half_fma8``. Here a row whose length is a
  multiple of the block is read without a mask (``EVEN``), and the four loads of both
  variants are issued before the first add (checked on the SASS that Triton 3.6 emits
  for sm_90a).

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
    chain = tl.zeros((BLOCK,), dtype=tl.float32)
    for col in range(0, n_cols, BLOCK):
        offs = col + tl.arange(0, BLOCK)
        if EVEN:
            x = tl.load(row_ptr + offs)
        else:
            x = tl.load(row_ptr + offs, mask=offs < n_cols, other=0.0)
        partial += x
        for _ in tl.static_range(EXTRA_FMA):
            chain = chain * 0.5 + x
    total = tl.sum(partial, axis=0)
    if EXTRA_FMA > 0:
        total = total + tl.sum(chain, axis=0) * 0.0
    tl.store(y_ptr + row, total)


# the same source compiled twice: specialised on the divisibility of the row stride and
# column count (16-byte loads), and without it (4-byte loads)
_rowsum_grid = triton.jit(_rowsum_rows)
_rowsum_grid_unaligned = triton.jit(do_not_specialize=["n_cols", "row_stride"])(_rowsum_rows)


@triton.jit
def _rowsum_persistent(x_ptr, y_ptr, n_rows, n_cols, row_stride, BLOCK: tl.constexpr,
                       EXTRA_FMA: tl.constexpr, EVEN: tl.constexpr):
    """Programs loop over rows (row = pid, pid + programs, ...); per row as _rowsum_rows."""
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row_ptr = x_ptr + tl.cast(row, tl.int64) * row_stride
        partial = tl.zeros((BLOCK,), dtype=tl.float32)
        chain = tl.zeros((BLOCK,), dtype=tl.float32)
        for col in range(0, n_cols, BLOCK):
            offs = col + tl.arange(0, BLOCK)
            if EVEN:
                x = tl.load(row_ptr + offs)
            else:
                x = tl.load(row_ptr + offs, mask=offs < n_cols, other=0.0)
            partial += x
            for _ in tl.static_range(EXTRA_FMA):
                chain = chain * 0.5 + x
        total = tl.sum(partial, axis=0)
        if EXTRA_FMA > 0:
            total = total + tl.sum(chain, axis=0) * 0.0
        tl.store(y_ptr + row, total)


def half_the_sms(device) -> int:
    """One program per two SMs on a GPU; 4 programs elsewhere (Triton's CPU interpreter)."""
    if device.type == "cuda":
        return max(1, torch.cuda.get_device_properties(device).multi_processor_count // 2)
    return 4


class ModelNew(nn.Module):
    """Row sums of a 2-D fp32 tensor: one program per row (``grid="rows"``), the same
    without alignment specialisation (``"rows_unaligned"``), or a persistent grid of one
    program per two SMs (``"half"``)."""

    def __init__(self, extra_fma=0, block=4096, warps=8, grid="rows"):
        super().__init__()
        if grid not in ("rows", "rows_unaligned", "half"):
            raise ValueError(f"unknown rowsum grid {grid!r}")
        self.extra_fma = extra_fma
        self.block = block
        self.warps = warps
        self.grid = grid

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        # the unaligned variant keeps the mask: an unmasked load would not be the point
        even = cols % self.block == 0 and self.grid != "rows_unaligned"
        meta = dict(BLOCK=self.block, EXTRA_FMA=self.extra_fma, EVEN=even, num_warps=self.warps)
        if self.grid == "half":
            _rowsum_persistent[(min(rows, half_the_sms(x.device)),)](x, y, rows, cols, x.stride(0), **meta)
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
    "half_fma2": functools.partial(ModelNew, extra_fma=2, grid="half"),
    "half_fma8": functools.partial(ModelNew, extra_fma=8, grid="half"),
}
