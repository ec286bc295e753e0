"""Candidates for matmul_problem.

* ``cublas_transposed``: computes (B^T A^T)^T through cuBLAS, so another kernel and tile
  order is picked for the same product.
* ``triton_*_g1`` / ``triton_*_g8``: one Triton tile kernel; ``GROUP_M`` sets the order in
  which tiles are visited. With ``GROUP_M = 1`` consecutive programs sweep a whole row of
  tiles, so the resident tiles need many columns of B and B is re-read from DRAM far more
  often than with ``GROUP_M = 8`` (8 rows of tiles share the columns they read). The kernel
  stays compute-bound, so the time can match while DRAM traffic, and so energy, differs.

* ``half_*_g1`` / ``half_*_g8``: the same tiles from a persistent grid of one program per
  two SMs. Every full-grid matmul drew ~690 W on the H200, at its power limit, where
  energy is the limit times the time; on half the SMs the GPU stays below it, so the
  extra DRAM traffic of ``GROUP_M = 1`` can show as energy at the same speed.

``VARIANTS`` maps a name to a ModelNew factory.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K,
            stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    row0 = group * GROUP_M
    rows_here = tl.minimum(tiles_m - row0, GROUP_M)
    within = pid % per_group
    tile_m = row0 + within % rows_here
    tile_n = within // rows_here

    rm = (tile_m * BM + tl.arange(0, BM)) % M
    rn = (tile_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a_tile = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_tile = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_tile, mask=rk[None, :] < K - k0, other=0.0)
        b = tl.load(b_tile, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BK * stride_ak
        b_tile += BK * stride_bk

    cm = tile_m * BM + tl.arange(0, BM)
    cn = tile_n * BN + tl.arange(0, BN)
    c_tile = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def _matmul_persistent(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    for tile in range(tl.program_id(0), tiles_m * tiles_n, tl.num_programs(0)):
        group = tile // per_group
        row0 = group * GROUP_M
        rows_here = tl.minimum(tiles_m - row0, GROUP_M)
        within = tile % per_group
        tile_m = row0 + within % rows_here
        tile_n = within // rows_here

        rm = (tile_m * BM + tl.arange(0, BM)) % M
        rn = (tile_n * BN + tl.arange(0, BN)) % N
        rk = tl.arange(0, BK)
        a_tile = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
        b_tile = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            a = tl.load(a_tile, mask=rk[None, :] < K - k0, other=0.0)
            b = tl.load(b_tile, mask=rk[:, None] < K - k0, other=0.0)
            acc = tl.dot(a, b, acc)
            a_tile += BK * stride_ak
            b_tile += BK * stride_bk

        cm = tile_m * BM + tl.arange(0, BM)
        cn = tile_n * BN + tl.arange(0, BN)
        c_tile = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
        tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def half_the_sms(device) -> int:
    if device.type == "cuda":
        return max(1, torch.cuda.get_device_properties(device).multi_processor_count // 2)
    return 4


class HalfGrid(nn.Module):
    def __init__(self, bm=128, bn=128, bk=64, group_m=8, warps=4, stages=3):
        super().__init__()
        self.cfg = dict(BM=bm, BN=bn, BK=bk, GROUP_M=group_m)
        self.warps = warps
        self.stages = stages

    def forward(self, a, b):
        M, K = a.shape
        _, N = b.shape
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        tiles = triton.cdiv(M, self.cfg["BM"]) * triton.cdiv(N, self.cfg["BN"])
        grid = (min(tiles, half_the_sms(a.device)),)
        _matmul_persistent[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                 c.stride(0), c.stride(1), **self.cfg, num_warps=self.warps,
                                 num_stages=self.stages)
        return c


class ModelNew(nn.Module):
    def __init__(self, bm=128, bn=128, bk=64, group_m=8, warps=4, stages=3):
        super().__init__()
        self.cfg = dict(BM=bm, BN=bn, BK=bk, GROUP_M=group_m)
        self.warps = warps
        self.stages = stages

    def forward(self, a, b):
        M, K = a.shape
        _, N = b.shape
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(M, self.cfg["BM"]) * triton.cdiv(N, self.cfg["BN"]),)
        _matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                      c.stride(0), c.stride(1), **self.cfg, num_warps=self.warps,
                      num_stages=self.stages)
        return c


class CublasTransposed(nn.Module):
    def forward(self, a, b):
        return torch.matmul(b.t(), a.t()).t()


VARIANTS = {
    "cublas_transposed": CublasTransposed,
    "triton_128x128_g1": functools.partial(ModelNew, group_m=1),
    "triton_128x128_g8": functools.partial(ModelNew, group_m=8),
    "triton_128x256_g1": functools.partial(ModelNew, bn=256, group_m=1, warps=8),
    "triton_128x256_g8": functools.partial(ModelNew, bn=256, group_m=8, warps=8),
    "half_128x128_g1": functools.partial(HalfGrid, group_m=1),
    "half_128x128_g8": functools.partial(HalfGrid, group_m=8),
}
