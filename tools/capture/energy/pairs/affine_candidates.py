"""Candidates for affine_problem: one Triton pass, with 0..32 redundant FMAs per element,
or with 4-byte instead of 16-byte memory accesses.

The redundant chain ``acc = 0.5 * acc + x`` stays bounded and is folded into the output as
``+ acc * 0.0``, which the compiler may not remove (IEEE: 0 * inf is NaN), so the result
is exactly the one-pass result. The extra arithmetic hides under DRAM time while the
kernel stays memory-bound, but it switches the FP32 pipes: same time, more energy.
``triton_scalar`` is the plain pass compiled without the divisibility of the element count
(``do_not_specialize``): Triton cannot prove that the mask is constant over 4 elements and
reads and writes each element with a 4-byte access: the same bytes in the same coalesced
warp requests, four times the memory instructions.
``VARIANTS`` maps a variant name to a ModelNew factory; ``ModelNew`` is the plain pass.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _affine_pass(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EXTRA_FMA: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside, other=0.0)
    y = x * 1.5 + 0.25
    if EXTRA_FMA > 0:
        acc = x
        for _ in tl.static_range(EXTRA_FMA):
            acc = acc * 0.5 + x
        y = y + acc * 0.0
    tl.store(y_ptr + offs, y, mask=inside)


_affine = triton.jit(_affine_pass)
_affine_unaligned = triton.jit(do_not_specialize=["n"])(_affine_pass)


class ModelNew(nn.Module):
    def __init__(self, extra_fma=0, block=4096, warps=8, aligned=True):
        super().__init__()
        self.aligned = aligned
        self.extra_fma = extra_fma
        self.block = block
        self.warps = warps

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, self.block),)
        kernel = _affine if self.aligned else _affine_unaligned
        kernel[grid](x, y, n, BLOCK=self.block, EXTRA_FMA=self.extra_fma, num_warps=self.warps)
        return y


VARIANTS = {
    "triton_fma0": functools.partial(ModelNew, extra_fma=0),
    "triton_fma8": functools.partial(ModelNew, extra_fma=8),
    "triton_fma16": functools.partial(ModelNew, extra_fma=16),
    "triton_fma32": functools.partial(ModelNew, extra_fma=32),
    "triton_scalar": functools.partial(ModelNew, aligned=False),
}
