"""``F.embedding_bag(idx, w, mode="mean")`` of 8192 bags of 32 indices into a 262144 x 256
fp32 table (corpus v3): PyTorch's ``EmbeddingBag_updateOutputKernel_sum_mean`` runs a fixed
grid of 1024 blocks of 32 x 8 threads, each thread one feature of one bag in a grid-stride
loop; for each of the bag's 32 indices it loads the index, then the one 4-byte weight it
addresses, then adds it, so a thread has few loads in flight (the finding's long-scoreboard
stalls); 6 of its blocks fit on an SM (40 registers), so the 1024 blocks make 1.29 waves and
the last partial wave leaves most SMs idle (tail effect, and the achieved occupancy below the
theoretical). The rewrite gives each half of a bag (128 features) one program of a single
warp: 16384 small programs (72 registers a lane, 28 resident a SM: 4.4 waves on 132 SMs, so
the last partial wave is a small part of the time; every warp the same work). Each lane owns 4
adjacent features; the bag's 32 indices are loaded first, all together, then the 32 rows'
16-byte pieces in one gather whose loads depend on nothing but the indices, so many of them are
in flight a lane at once (ptxas for sm_90 issues the first 12 before any add; no spills), and
they are summed over the bag. Like PyTorch's kernel it also writes ``offset2bag`` and
``bag_size`` (int64), which ``_embedding_bag`` returns and ``F.embedding_bag`` drops.
``before`` also launches a small ``arange`` (the offsets of the 2-D index tensor), which the
rewrite does not need.

Tolerance: both sum a bag's 32 rows in fp32 and divide by 32; PyTorch adds them in index order,
the rewrite's reduction may group them differently (within a lane it is in index order, which
gives PyTorch's bits, as the CPU check finds); a different grouping of 32 randn values (sums
below ~30) changes a sum by a few ulps (~1e-5), the mean by ~1e-6: RTOL = 1e-5, ATOL = 1e-6."""

from __future__ import annotations

import triton
import triton.language as tl

ROUND = 3
CORPUS = "h200_v3"
WORKLOAD = "embedding_bag_mean@large"
KERNEL = "EmbeddingBag_updateOutputKernel_sum_mean"
ACTS_ON = ("warp_stalls", "uncoalesced_global", "tail_effect", "occupancy_gap")
ACTION = ("one single-warp program per half bag (16384 small blocks, 4.4 waves: a short tail), each lane "
          "4 adjacent features: the bag's indices loaded first, then its 32 rows gathered as independent "
          "16-byte loads (many in flight a lane), summed over the bag")
SIZES = {"large": (262144, 256, 8192, 32), "small": (1024, 64, 16, 8)}
RTOL, ATOL = 1e-5, 1e-6


def inputs(torch, device, vocab, dim, bags, per_bag):
    w = torch.randn(vocab, dim, device=device)
    idx = torch.randint(0, vocab, (bags, per_bag), device=device)
    return [idx, w]


def before(torch, idx, w):
    return torch.nn.functional.embedding_bag(idx, w, mode="mean")


@triton.jit
def _kp_r_embedding_bag_mean(idx_ptr, w_ptr, out_ptr, offset2bag_ptr, bag_size_ptr, dim: tl.constexpr,
                             PER_BAG: tl.constexpr, BLOCK_F: tl.constexpr):
    bag = tl.program_id(0)
    pid_f = tl.program_id(1)
    f = pid_f * BLOCK_F + tl.arange(0, BLOCK_F)
    fm = f < dim
    first = bag.to(tl.int64) * PER_BAG
    k = tl.arange(0, PER_BAG)
    # the bag's indices, then all its rows' pieces in one gather: loads that depend on nothing
    # but the indices (several in flight a lane), then summed over the bag
    rows = tl.load(idx_ptr + first + k)
    tile = tl.load(w_ptr + rows[:, None] * dim + f[None, :], mask=fm[None, :], other=0.0)
    acc = tl.sum(tile, 0)
    tl.store(out_ptr + bag.to(tl.int64) * dim + f, acc / PER_BAG, mask=fm)
    if pid_f == 0:
        tl.store(offset2bag_ptr + first + k, tl.full((PER_BAG,), 0, tl.int64) + bag)
        tl.store(bag_size_ptr + bag, tl.full((), PER_BAG, tl.int64))


def after_with_bags(torch, idx, w):
    assert idx.dim() == 2 and idx.is_contiguous() and w.is_contiguous() and w.dtype == torch.float32
    bags, per_bag = idx.shape
    dim = w.shape[1]
    out = torch.empty(bags, dim, device=w.device, dtype=w.dtype)
    offset2bag = torch.empty(bags * per_bag, device=w.device, dtype=torch.int64)
    bag_size = torch.empty(bags, device=w.device, dtype=torch.int64)
    if bags == 0:
        return out, offset2bag, bag_size
    assert per_bag == triton.next_power_of_2(per_bag), "the bag's size a power of two"
    # one warp per bag and 128 features (4 a lane): 256 features make two programs a bag
    block_f = min(128, max(32, triton.next_power_of_2(dim)))
    _kp_r_embedding_bag_mean[(bags, triton.cdiv(dim, block_f))](idx, w, out, offset2bag, bag_size, dim,
                                                                PER_BAG=per_bag, BLOCK_F=block_f, num_warps=1)
    return out, offset2bag, bag_size


def after(torch, idx, w):
    return after_with_bags(torch, idx, w)[0]
