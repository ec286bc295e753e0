"""Built-in GPU specifications: datasheet ceilings of common data-centre GPUs.

Dense rates (no structured sparsity), in TFLOP/s; bandwidth in GB/s. These are the
vendors' published figures and only leads: ``kernelpro calibrate`` (kernelpro_plugins_ncu)
measures the GPU in hand and its numbers take precedence through
``kernelpro_resolve_gpu_spec``.
"""

from __future__ import annotations

from kernelpro.hookspecs import hookimpl
from kernelpro.records import GpuSpec

MiB = 1024 * 1024
KiB = 1024

SPECS = (
    GpuSpec(name="H100 SXM", match=("h100",), arch="sm_90", sm_count=132,
            dram_bandwidth_gbs=3350, l2_bytes=50 * MiB, smem_per_sm_bytes=228 * KiB,
            fp32_tflops=67, fp64_tflops=34, tf32_tflops=495, bf16_tflops=989,
            fp16_tflops=989, fp8_tflops=1979, int8_tops=1979),
    GpuSpec(name="H200 SXM", match=("h200",), arch="sm_90", sm_count=132,
            dram_bandwidth_gbs=4800, l2_bytes=60 * MiB, smem_per_sm_bytes=228 * KiB,
            fp32_tflops=67, fp64_tflops=34, tf32_tflops=495, bf16_tflops=989,
            fp16_tflops=989, fp8_tflops=1979, int8_tops=1979),
    GpuSpec(name="A100 SXM 80GB", match=("a100",), arch="sm_80", sm_count=108,
            dram_bandwidth_gbs=2039, l2_bytes=40 * MiB, smem_per_sm_bytes=164 * KiB,
            fp32_tflops=19.5, fp64_tflops=9.7, tf32_tflops=156, bf16_tflops=312,
            fp16_tflops=312, int8_tops=624),
    GpuSpec(name="L40S", match=("l40s",), arch="sm_89", sm_count=142,
            dram_bandwidth_gbs=864, l2_bytes=96 * MiB, smem_per_sm_bytes=100 * KiB,
            fp32_tflops=91.6, fp64_tflops=1.4, tf32_tflops=183, bf16_tflops=362,
            fp16_tflops=362, fp8_tflops=733, int8_tops=733, max_threads_per_sm=1536),
    GpuSpec(name="B200", match=("b200",), arch="sm_100", sm_count=148,
            dram_bandwidth_gbs=8000, l2_bytes=126 * MiB, smem_per_sm_bytes=228 * KiB,
            fp32_tflops=80, fp64_tflops=40, tf32_tflops=1100, bf16_tflops=2250,
            fp16_tflops=2250, fp8_tflops=4500, int8_tops=4500),
)


@hookimpl
def kernelpro_register_gpu_specs(register):
    for spec in SPECS:
        register(spec)
