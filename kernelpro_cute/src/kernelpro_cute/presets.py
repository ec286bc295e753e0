"""Retrieval presets: which corpus files to read first, by bottleneck kind and GPU
architecture.

``presets_for("compute", "sm_90")`` points a generator at the Hopper WGMMA + TMA
material; ``presets_for("memory", ...)`` at tiled-copy material. Paths are relative to
the corpus root (see :mod:`kernelpro_cute.corpus`); a test checks that every one exists
in the shipped nvidia-cutlass tree.
"""

from __future__ import annotations

from kernelpro_cute.corpus import Corpus

Preset = tuple[str, str]  # (path relative to the corpus root, why to read it)

_HOPPER_MMA: tuple[Preset, ...] = (
    ("examples/cute/tutorial/hopper/wgmma_tma_sm90.cu",
     "complete CuTe GEMM: TMA loads into 128B-swizzled smem, SS WGMMA, mbarrier pipeline"),
    ("examples/cute/tutorial/hopper/wgmma_sm90.cu",
     "the same WGMMA GEMM fed by cp.async instead of TMA"),
    ("include/cute/atom/mma_traits_sm90_gmma.hpp",
     "SM90_64xNx16_* GMMA atoms, GMMA smem layout atoms (Layout_K_SW128_Atom...), make_gmma_desc"),
    ("include/cute/arch/mma_sm90_gmma.hpp",
     "the wgmma PTX wrappers and warpgroup_arrive / commit_batch / wait"),
    ("include/cute/atom/copy_traits_sm90_tma.hpp",
     "make_tma_atom / make_tma_copy / tma_partition: building and using TMA descriptors"),
    ("include/cutlass/arch/barrier.h",
     "ClusterTransactionBarrier: mbarrier with transaction bytes for TMA stages"),
    ("include/cutlass/pipeline/sm90_pipeline.hpp",
     "PipelineTmaAsync: producer/consumer stage pipeline for warp-specialized kernels"),
    ("examples/48_hopper_warp_specialized_gemm/48_hopper_warp_specialized_gemm.cu",
     "warp-specialized Hopper GEMM through the collective API (reference for schedules)"),
)

_HOPPER_COPY: tuple[Preset, ...] = (
    ("include/cute/arch/copy_sm90_tma.hpp",
     "SM90_TMA_LOAD / STORE: bulk tensor copies for large tiles without register staging"),
    ("include/cute/atom/copy_traits_sm90_tma.hpp",
     "make_tma_atom / tma_partition to move whole tiles with one thread"),
)

_TILED_COPY: tuple[Preset, ...] = (
    ("examples/cute/tutorial/tiled_copy.cu",
     "vectorized tiled copy: thread/value layouts with 128-bit accesses"),
    ("examples/cute/tutorial/tiled_copy_if.cu",
     "the same copy predicated for tiles that do not divide the tensor"),
    ("include/cute/atom/copy_atom.hpp",
     "Copy_Atom, make_tiled_copy, TiledCopy::get_slice / partition_S / partition_D"),
    ("include/cute/arch/copy_sm80.hpp",
     "SM80_CP_ASYNC_* atoms: asynchronous global->shared copies"),
    ("include/cute/swizzle.hpp",
     "Swizzle<B,M,S>: shared-memory layouts free of bank conflicts"),
)

_AMPERE_MMA: tuple[Preset, ...] = (
    ("examples/cute/tutorial/sgemm_sm80.cu",
     "multi-stage cp.async GEMM with a TiledMMA (tensor-core atoms swap in)"),
    ("include/cute/atom/mma_traits_sm80.hpp", "SM80 mma.sync atoms (16x8x16 and others)"),
    ("include/cute/arch/copy_sm75.hpp", "ldmatrix atoms (SM75_U32x4_LDSM_N) for smem->register"),
)

_BLACKWELL_MMA: tuple[Preset, ...] = (
    ("examples/cute/tutorial/blackwell/02_mma_tma_sm100.cu",
     "CuTe GEMM with UMMA (tcgen05) and TMA on sm_100"),
    ("include/cute/atom/mma_traits_sm100.hpp", "SM100 UMMA atoms and descriptors"),
    ("include/cute/arch/tmem_allocator_sm100.hpp", "tensor memory allocation for accumulators"),
)

_BASICS: tuple[Preset, ...] = (
    ("examples/cute/tutorial/sgemm_1.cu", "the smallest CuTe GEMM: local_tile, local_partition"),
    ("include/cute/tensor_impl.hpp", "Tensor, local_tile, local_partition"),
    ("include/cute/layout.hpp", "Layout algebra: make_layout, composition, logical_divide"),
)


def _family(arch: str | None) -> str:
    digits = "".join(ch for ch in (arch or "") if ch.isdigit())
    if not digits:
        return "any"
    major = int(digits[:-1] or 0) if len(digits) > 1 else int(digits)
    if major >= 10:
        return "blackwell"
    if major == 9:
        return "hopper"
    if major == 8:
        return "ampere"
    return "older"


def presets_for(
    bottleneck_kind: str | None, arch: str | None, corpus: Corpus | None = None
) -> list[Preset]:
    """Files to read first for a bottleneck kind (memory | compute | latency |
    too_little_work | unknown | None) on an architecture (``sm_90``, ``sm_90a``...).

    With ``corpus``, entries absent from that tree are dropped."""
    family = _family(arch)
    kind = (bottleneck_kind or "unknown").lower()
    out: list[Preset] = []
    if kind == "compute":
        out += {"hopper": _HOPPER_MMA, "blackwell": _BLACKWELL_MMA}.get(family, _AMPERE_MMA)
    elif kind == "memory":
        out += _TILED_COPY
        if family in ("hopper", "blackwell"):
            out += _HOPPER_COPY
    elif kind == "latency":
        # latency-bound kernels need deeper asynchronous pipelines
        out += _HOPPER_MMA[:1] + _HOPPER_MMA[5:7] if family == "hopper" else _AMPERE_MMA[:1]
        out += _TILED_COPY[3:4]
    else:
        out += _BASICS
    seen: set[str] = set()
    unique = []
    for path, why in out:
        if path in seen:
            continue
        seen.add(path)
        if corpus is None or (corpus.root / path).exists():
            unique.append((path, why))
    return unique
