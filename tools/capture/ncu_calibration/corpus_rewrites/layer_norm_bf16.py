"""``F.layer_norm(x, (4096,), w, b)`` of a 16384 x 4096 bf16 matrix with bf16 weight and bias
(corpus v2): PyTorch's ``vectorized_layer_norm_kernel`` gives each row one block of 4 warps and
walks it in 4-element vectors of bf16 (8-byte accesses, half the 16-byte width), accumulates a
Welford mean and variance element by element (a division per element), reduces them across
the block, then reads the row a second time, with the weight and the bias, for the output
``gamma * (rstd * (x - mean)) + beta`` (the finding: multiplies and adds left unfused); the
instructions per element, not the memory, bound it. The rewrite gives each row one program
of 4 warps that loads the whole row once as 16-byte vectors (8 bf16 a lane, 32-bit offsets
within the row, the row kept in registers), takes the mean and the variance as two sums of the
fp32 values (no per-element division), and writes ``xhat * w + b`` as one fused multiply-add
per element from the registers (weight and bias read once as 16-byte vectors; ptxas for sm_90:
56 registers, no spills). Like PyTorch's kernel it also writes each row's mean and reciprocal
standard deviation (fp32), which ``native_layer_norm`` returns and ``F.layer_norm`` drops.

Tolerance: both compute the statistics in fp32 and round the fp32 result to bf16 once; the
statistics differ by the order of the sums (a few fp32 ulps), so an output may round to the
neighbouring bf16 value where the fp32 result falls near a rounding boundary: one bf16 ulp,
at most 2**-7 of the value, so RTOL = 1e-2; near zero (``xhat * w`` cancelling ``b``) the
fp32 results differ by about 1e-6, far below ATOL = 1e-2."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 3
CORPUS = "h200_v2"
WORKLOAD = "layer_norm_bf16@large"
KERNEL = "vectorized_layer_norm_kernel"
ACTS_ON = ("issue_bound", "uncoalesced_global", "unfused_fp32")
ACTION = ("one program per row: the row loaded once as 16-byte bf16 vectors with 32-bit offsets and kept in "
          "registers, mean and variance as two fp32 sums (no per-element Welford division), the output one "
          "FMA per element (xhat * w + b), stored as 16-byte vectors")
SIZES = {"large": (16384, 4096), "small": (5, 1000)}
RTOL, ATOL = 1e-2, 1e-2
EPS = 1e-5


def inputs(torch, device, rows, cols):
    x = torch.randn(rows, cols, device=device, dtype=torch.bfloat16)
    w = torch.randn(cols, device=device, dtype=torch.bfloat16)
    b = torch.randn(cols, device=device, dtype=torch.bfloat16)
    return [x, w, b]


def before(torch, x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)


@triton.jit
def _kp_r_layer_norm_bf16(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    # the row's start in 64 bits once; the offsets within the row 32-bit
    x_row = x_ptr + row.to(tl.int64) * cols
    y_row = y_ptr + row.to(tl.int64) * cols
    c = tl.arange(0, BLOCK)
    m = c < cols
    x = tl.load(x_row + c, mask=m, other=0.0).to(tl.float32)
    n = cols.to(tl.float32)
    mean = tl.sum(x, 0) / n
    d = tl.where(m, x - mean, 0.0)
    var = tl.sum(d * d, 0) / n
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + c, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=m, other=0.0).to(tl.float32)
    y = tl.fma(d * rstd, w, b)
    tl.store(y_row + c, y.to(tl.bfloat16), mask=m)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


def after_with_stats(torch, x, w, b):
    assert x.dim() == 2 and x.is_contiguous() and x.dtype == torch.bfloat16
    rows, cols = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(rows, device=x.device, dtype=torch.float32)
    rstd = torch.empty(rows, device=x.device, dtype=torch.float32)
    if x.numel() == 0:
        return y, mean, rstd
    block = max(256, triton.next_power_of_2(cols))
    # 4096 columns over 4 warps: 32 bf16 a lane, four 16-byte vectors
    _kp_r_layer_norm_bf16[(rows,)](x, w, b, y, mean, rstd, cols, EPS, BLOCK=block,
                                   num_warps=4 if block <= 4096 else 8)
    return y, mean, rstd


def after(torch, x, w, b):
    return after_with_stats(torch, x, w, b)[0]
