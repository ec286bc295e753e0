"""Search quality set: queries with the corpus file that should rank first.

The expected file is where the thing asked about is defined (or, for tutorial questions,
the tutorial). The measure is the share of queries whose expected file appears among the
paths of the top 5 results. Run ``python -m kernelpro_cute.quality`` to print it.
"""

from __future__ import annotations

import sys

from kernelpro_cute.index import CuteIndex, open_index

TOP_K = 5

#: (query, expected first file, relative to the corpus root)
QUERIES: tuple[tuple[str, str], ...] = (
    ("wgmma fp16 64x128 atom", "include/cute/arch/mma_sm90_gmma.hpp"),
    ("tma load copy atom", "include/cute/arch/copy_sm90_tma.hpp"),
    ("make_tiled_copy", "include/cute/atom/copy_atom.hpp"),
    ("local_partition", "include/cute/tensor_impl.hpp"),
    ("Swizzle", "include/cute/swizzle.hpp"),
    ("make_tma_atom create TMA descriptor for a gmem tensor",
     "include/cute/atom/copy_traits_sm90_tma.hpp"),
    ("GMMA shared memory layout atom K-major 128B swizzle",
     "include/cute/atom/mma_traits_sm90_gmma.hpp"),
    ("warpgroup_arrive", "include/cute/arch/mma_sm90_gmma.hpp"),
    ("cluster transaction barrier arrive_and_expect_tx", "include/cutlass/arch/barrier.h"),
    ("hopper wgmma tma tutorial gemm", "examples/cute/tutorial/hopper/wgmma_tma_sm90.cu"),
    ("cp.async 128-bit global to shared copy sm80", "include/cute/arch/copy_sm80.hpp"),
    ("TiledMMA get_slice partition_C", "include/cute/atom/mma_atom.hpp"),
    ("ldmatrix x4 copy", "include/cute/arch/copy_sm75.hpp"),
    ("layout composition", "include/cute/layout.hpp"),
    ("local_tile", "include/cute/tensor_impl.hpp"),
    ("elect_one_sync", "include/cute/arch/cluster_sm90.hpp"),
    ("PipelineTmaAsync producer_acquire", "include/cutlass/pipeline/sm90_pipeline.hpp"),
    ("make_gmma_desc shared memory matrix descriptor", "include/cute/atom/mma_traits_sm90_gmma.hpp"),
    ("sgemm sm80 cp.async tutorial", "examples/cute/tutorial/sgemm_sm80.cu"),
    ("tiled copy tutorial", "examples/cute/tutorial/tiled_copy.cu"),
    ("float_e4m3_t fp8 type", "include/cutlass/float8.h"),
    ("tensor memory allocator blackwell", "include/cute/arch/tmem_allocator_sm100.hpp"),
)


def evaluate(index: CuteIndex, k: int = TOP_K) -> tuple[float, list[dict]]:
    """Share of queries whose expected file is in the top ``k``, and per-query rows."""
    rows = []
    for query, expected in QUERIES:
        paths = [r.path for r in index.search(query, k=k)]
        rank = paths.index(expected) + 1 if expected in paths else None
        rows.append({"query": query, "expected": expected, "rank": rank, "top": paths[:3]})
    share = sum(1 for r in rows if r["rank"] is not None) / len(rows)
    return share, rows


def main() -> int:
    index = open_index()
    share, rows = evaluate(index)
    for r in rows:
        rank = r["rank"] if r["rank"] is not None else "-"
        print(f"{rank!s:>2}  {r['query']:<58} {r['expected']}")
        if r["rank"] != 1:
            print(f"      top: {', '.join(r['top'])}")
    top1 = sum(1 for r in rows if r["rank"] == 1) / len(rows)
    print(f"corpus {index.corpus.root} ({index.meta().get('chunks')} chunks)")
    print(f"top-{TOP_K} share {share:.1%} ({sum(1 for r in rows if r['rank'])}/{len(rows)}), top-1 share {top1:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
