"""Candidates for gemv_problem: Triton matrix-vector products that stream A once at the
same speed but execute different instructions.

One program computes BLOCK_M outputs: it walks their rows in blocks of BLOCK_K columns,
multiplies each fp16 block, converted to fp32, by the matching slice of x and accumulates
element-wise in fp32; the row sums are taken once at the end and stored as fp16.

* ``triton_fma<k>``: 4 rows x 1024 columns per step on 4 warps (each thread reads 16-byte
  vectors), with ``k`` redundant FMAs per element of A, on the element just converted:
  a chain ``c = a; c = 0.5 c + a`` (k - 1 times) folded in as ``a + c * 0.0`` (the k-th),
  which the compiler may not drop (0 * inf is NaN) and which adds exactly 0, so the
  result is the plain product bit for bit. fp16 holds two elements in every four bytes,
  so one FMA per element here is as much arithmetic per byte as two in the fp32 rowsum.
* ``triton_scalar``: the plain kernel compiled without the divisibility of the row stride
  and column count (``do_not_specialize``), so Triton cannot prove alignment and reads A
  with 2-byte loads (eight times the load instructions, the same coalesced bytes).
* ``triton_m8_k512``: 8 rows x 512 columns per step: another launch shape, the same
  bytes.

``VARIANTS`` maps a name to a ModelNew factory.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _gemv_rows(a_ptr, x_ptr, y_ptr, n_rows, n_cols, row_stride, BLOCK_M: tl.constexpr,
               BLOCK_K: tl.constexpr, EXTRA_FMA: tl.constexpr, EVEN: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    row_ptrs = a_ptr + rows.to(tl.int64)[:, None] * row_stride
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, n_cols, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        if EVEN:
            a = tl.load(row_ptrs + ks[None, :])
            xk = tl.load(x_ptr + ks)
        else:
            col_ok = ks < n_cols
            a = tl.load(row_ptrs + ks[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
            xk = tl.load(x_ptr + ks, mask=col_ok, other=0.0)
        af = a.to(tl.float32)
        if EXTRA_FMA > 0:
            chain = af
            for _ in tl.static_range(EXTRA_FMA - 1):
                chain = chain * 0.5 + af
            af = af + chain * 0.0  # one FMA; adds exactly 0 (chain stays finite)
        acc += af * xk.to(tl.float32)[None, :]
    y = tl.sum(acc, axis=1)
    tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=row_ok)


# the same source compiled twice: specialised on the divisibility of the sizes and row
# stride (16-byte loads of A), and without it (2-byte loads)
_gemv = triton.jit(_gemv_rows)
_gemv_unaligned = triton.jit(do_not_specialize=["n_rows", "n_cols", "row_stride"])(_gemv_rows)


class ModelNew(nn.Module):
    """y = a @ x for a 2-D fp16 ``a`` and 1-D ``x``; ``unaligned`` compiles the kernel
    without divisibility specialisation (scalar loads)."""

    def __init__(self, extra_fma=0, block_m=4, block_k=1024, warps=4, unaligned=False):
        super().__init__()
        self.extra_fma = extra_fma
        self.block_m = block_m
        self.block_k = block_k
        self.warps = warps
        self.unaligned = unaligned

    def forward(self, a, x):
        a = a.contiguous()
        x = x.contiguous()
        rows, cols = a.shape
        y = torch.empty(rows, device=a.device, dtype=a.dtype)
        # the unaligned variant keeps the masks: unmasked loads would not be the point
        even = rows % self.block_m == 0 and cols % self.block_k == 0 and not self.unaligned
        kernel = _gemv_unaligned if self.unaligned else _gemv
        kernel[(triton.cdiv(rows, self.block_m),)](
            a, x, y, rows, cols, a.stride(0), BLOCK_M=self.block_m, BLOCK_K=self.block_k,
            EXTRA_FMA=self.extra_fma, EVEN=even, num_warps=self.warps)
        return y


VARIANTS = {
    "triton_fma0": functools.partial(ModelNew, extra_fma=0),
    "triton_fma1": functools.partial(ModelNew, extra_fma=1),
    "triton_fma2": functools.partial(ModelNew, extra_fma=2),
    "triton_scalar": functools.partial(ModelNew, unaligned=True),
    "triton_m8_k512": functools.partial(ModelNew, block_m=8, block_k=512),
}
