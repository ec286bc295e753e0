"""Tensor-core checks: matrix work on FMA units, and Hopper kernels on warp-level MMA."""

from __future__ import annotations

from kernelpro.api import Finding, GpuSpec

from kernelpro_plugins_sass.features import is_accumulating_fma
from kernelpro_plugins_sass.payload import KernelEntry
from kernelpro_plugins_sass.profilers.base import COMPUTE_SIDE, SassMicroProfiler

#: H100/H200 SXM datasheet dense rates (TFLOP/s) used when no GPU spec is given
DEFAULT_FP32_TFLOPS = 67.0
DEFAULT_TF32_TFLOPS = 495.0
#: share of loop instructions that are matrix FMAs above which the FMA pipe dominates
HIGH_FMA_SHARE = 0.2
#: prior for HMMA -> HGMMA: mma.sync cannot keep Hopper's tensor cores fed the way
#: asynchronous warpgroup MMA does; a rough prior, not a measurement
HMMA_TO_HGMMA_GAIN = 0.3


class NoTensorCores(SassMicroProfiler):
    """Matrix-shaped loops (see :mod:`kernelpro_plugins_sass.features`) in a kernel with no
    tensor-core instruction at all (no HMMA/HGMMA/IMMA/...)."""

    name = "sass_no_tensor_cores"
    description = "matrix-shaped inner loops computed with FFMA/HFMA2 instead of tensor cores"
    applies_to = COMPUTE_SIDE

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        f = entry.features
        if f.tensor_ops or not f.matrix_loops:
            return []
        share = f.matrix_fmas_in_loops / max(1, f.instructions_in_loops)
        fp32 = gpu.fp32_tflops if gpu else DEFAULT_FP32_TFLOPS
        tf32 = gpu.tf32_tflops if gpu else DEFAULT_TF32_TFLOPS
        # the FMA share of loop time, sped up by the tensor/FP32 rate ratio
        gain = share * (1.0 - fp32 / tf32) if tf32 > 0 else None
        loop = max((lf for lf in f.loop_facts if lf.matrix_shaped), key=lambda lf: lf.accumulating_fmas)
        examples = [i for i in entry.kernel.executed
                    if loop.start_address <= i.address <= loop.end_address and is_accumulating_fma(i)]
        staged = "shared-memory tiles and a block barrier" if loop.has_barrier and loop.shared_loads >= 2 \
            else "register-blocked operands"
        return [self.finding(
            entry, "high" if share >= HIGH_FMA_SHARE else "medium",
            "Matrix multiply on FMA units, no tensor cores",
            f"{f.matrix_loops} matrix-shaped loop(s): the hottest has {loop.accumulating_fmas} "
            f"accumulating FMAs among {loop.instructions} instructions, fed by {staged} "
            f"({loop.shared_loads} shared loads); {f.matrix_fmas_in_loops} of "
            f"{f.instructions_in_loops} loop instructions ({share:.0%}) are FMAs, and the kernel "
            f"has no HMMA/HGMMA. FP32 FMA peaks at {fp32:g} TFLOP/s vs {tf32:g} for TF32 tensor cores.",
            "Move the multiply-accumulate onto tensor cores: call torch.matmul/cuBLAS for the GEMM "
            "part, use Triton tl.dot, or WMMA/mma.sync (wgmma on sm_90a) with BF16/FP16 or TF32 "
            "inputs and FP32 accumulation, if the tolerance allows.",
            gain, {"matrix_loops": f.matrix_loops, "matrix_fmas_in_loops": f.matrix_fmas_in_loops,
                   "instructions_in_loops": f.instructions_in_loops, "fma_share": share},
            examples)]


class HmmaOnHopper(SassMicroProfiler):
    """A kernel built for Hopper (sm_90/sm_90a) that uses warp-level MMA (HMMA/IMMA)
    and no warpgroup MMA (HGMMA/IGMMA/QGMMA)."""

    name = "sass_hmma_on_hopper"
    description = "Hopper kernel on warp-level mma.sync (HMMA) where warpgroup MMA (HGMMA) applies"
    applies_to = COMPUTE_SIDE

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        f = entry.features
        arch = entry.kernel.arch or ""
        if not arch.startswith("sm_90") or not f.warp_mma or f.warpgroup_mma:
            return []
        family = arch.endswith("a")
        examples = [i for i in entry.kernel.executed if i.opcode in ("HMMA", "IMMA")]
        rebuild = "" if family else (
            f" The binary targets {arch}: wgmma exists only in sm_90a, so build with "
            "-arch=sm_90a (TORCH_CUDA_ARCH_LIST=9.0a, or -gencode arch=compute_90a,code=sm_90a).")
        return [self.finding(
            entry, "high" if not family else "medium",
            "Hopper kernel uses HMMA, not HGMMA",
            f"{f.warp_mma} warp-level MMA instructions ({examples[0].mnemonic if examples else 'HMMA'}) "
            f"and no warpgroup MMA in a kernel built for {arch}.{rebuild}",
            "Use Hopper's asynchronous warpgroup MMA: CUTLASS 3 / CuTe sm90 GEMM collectives, "
            "Triton tl.dot (emits wgmma on sm_90a), or wgmma.mma_async PTX with TMA-loaded "
            "shared-memory tiles.",
            HMMA_TO_HGMMA_GAIN, {"warp_mma": f.warp_mma, "warpgroup_mma": f.warpgroup_mma},
            examples)]
