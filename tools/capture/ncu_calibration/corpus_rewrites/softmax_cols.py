"""``torch.softmax(x, dim=0)`` of a (4096, 16384) fp32 matrix (corpus v2): PyTorch's
``cunn_SpatialSoftMaxForward`` runs 16 blocks of 1024 threads for 132 SMs, so 88 % of the SMs
get no work. The rewrite splits both the columns and the rows of the reduction across the
grid: a first kernel gives each (row-chunk, 128-column tile) program the online max and sum of
exp of its chunk; a second, on the same grid, folds each column's chunk statistics together
and writes exp(x - max) / sum for its chunk. 128 x 8 = 1024 programs of equal work."""

from __future__ import annotations

import triton
import triton.language as tl

CORPUS = "h200_v2"
WORKLOAD = "softmax_cols@large"
KERNEL = "cunn_SpatialSoftMaxForward"
ACTS_ON = ("small_grid", "unit_imbalance")
ACTION = ("split the column softmax over (128-column tile x row-chunk) programs: partial online "
          "max/sum per chunk, then a combine-and-normalize pass, ~1000 equal blocks instead of 16")
SIZES = {"large": (4096, 16384), "small": (150, 300)}
# exp through exp2 and an online (rescaled) sum instead of PyTorch's max-then-sum: the outputs
# agree to a few units in the last place of fp32
RTOL, ATOL = 1e-5, 1e-8



def inputs(torch, device, rows, cols):
    return [torch.randn(rows, cols, device=device)]


def before(torch, x):
    return torch.softmax(x, dim=0)


@triton.jit
def _kp_r_colsoftmax_stats(x_ptr, m_ptr, s_ptr, rows, cols, rows_per_split,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = c < cols
    r_begin = split * rows_per_split
    r_end = tl.minimum(r_begin + rows_per_split, rows)
    # per (sub-row, column) running max and sum of exp2((x - max) * log2e)
    m = tl.full((BLOCK_M, BLOCK_N), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for r0 in range(r_begin, r_end, BLOCK_M):
        r = r0 + tl.arange(0, BLOCK_M)
        mask = (r[:, None] < r_end) & cmask[None, :]
        v = tl.load(x_ptr + r[:, None] * cols + c[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, v)
        # m_new is -inf only where every element seen so far is padding: keep s at 0 there
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp2((m - m_safe) * 1.4426950408889634) + tl.exp2((v - m_safe) * 1.4426950408889634)
        m = m_new
    mc = tl.max(m, axis=0)
    mc_safe = tl.where(mc == float("-inf"), 0.0, mc)
    sc = tl.sum(s * tl.exp2((m - mc_safe[None, :]) * 1.4426950408889634), axis=0)
    tl.store(m_ptr + split * cols + c, mc, mask=cmask)
    tl.store(s_ptr + split * cols + c, sc, mask=cmask)


@triton.jit
def _kp_r_colsoftmax_norm(x_ptr, y_ptr, m_ptr, s_ptr, rows, cols, rows_per_split, n_splits,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr):
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = c < cols
    # fold the chunks' statistics of these columns together
    sp = tl.arange(0, BLOCK_S)
    smask = (sp[:, None] < n_splits) & cmask[None, :]
    pm = tl.load(m_ptr + sp[:, None] * cols + c[None, :], mask=smask, other=float("-inf"))
    ps = tl.load(s_ptr + sp[:, None] * cols + c[None, :], mask=smask, other=0.0)
    mc = tl.max(pm, axis=0)
    pm_scaled = tl.where(pm == float("-inf"), float("-inf"), pm - mc[None, :])
    sc = tl.sum(ps * tl.exp2(pm_scaled * 1.4426950408889634), axis=0)
    inv = 1.0 / sc
    r_begin = split * rows_per_split
    r_end = tl.minimum(r_begin + rows_per_split, rows)
    for r0 in range(r_begin, r_end, BLOCK_M):
        r = r0 + tl.arange(0, BLOCK_M)
        mask = (r[:, None] < r_end) & cmask[None, :]
        offs = r[:, None] * cols + c[None, :]
        v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        e = tl.exp2((v - mc[None, :]) * 1.4426950408889634)
        tl.store(y_ptr + offs, (e * inv[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


def after(torch, x):
    assert x.dim() == 2 and x.is_contiguous()
    rows, cols = x.shape
    block_n = min(128, triton.next_power_of_2(cols))
    block_m = 16
    col_tiles = triton.cdiv(cols, block_n)
    # enough programs for ~8 per SM of 132 at the large size, chunks a multiple of block_m
    n_splits = max(1, min(triton.cdiv(1024, col_tiles), triton.cdiv(rows, block_m)))
    rows_per_split = triton.cdiv(triton.cdiv(rows, n_splits), block_m) * block_m
    n_splits = triton.cdiv(rows, rows_per_split)
    part_m = torch.empty((n_splits, cols), device=x.device, dtype=torch.float32)
    part_s = torch.empty((n_splits, cols), device=x.device, dtype=torch.float32)
    y = torch.empty_like(x)
    grid = (col_tiles, n_splits)
    _kp_r_colsoftmax_stats[grid](x, part_m, part_s, rows, cols, rows_per_split,
                                 BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    _kp_r_colsoftmax_norm[grid](x, y, part_m, part_s, rows, cols, rows_per_split, n_splits,
                                BLOCK_M=block_m, BLOCK_N=block_n,
                                BLOCK_S=max(2, triton.next_power_of_2(n_splits)), num_warps=4)
    return y
