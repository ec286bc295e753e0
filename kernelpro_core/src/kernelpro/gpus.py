"""Built-in GPU specifications: datasheet ceilings of common data-centre GPUs.

Dense rates (no structured sparsity), in TFLOP/s; bandwidth in GB/s. These are the
vendors' published figures and only leads: ``kernelpro calibrate`` (kernelpro_plugins_ncu)
measures the GPU in hand and its numbers take precedence through
``kernelpro_resolve_gpu_spec``.

Matching a device to a spec (:func:`choose`) follows one documented rule (hookspecs.md,
``kernelpro_register_gpu_specs``): names are compared as lower-cased alphanumeric tokens,
a spec's architecture must agree with the device's when both are known, the highest
``priority`` wins, then the most specific match (exact name, then the longest run of
tokens, then architecture alone); a tie is reported, never settled silently.
"""

from __future__ import annotations

import re
from typing import Iterable

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
    # the PCIe and 40 GB forms: other bandwidth (and, for the H100, fewer SMs and lower
    # clocks) under a name whose longer run of tokens wins over the SXM form's
    GpuSpec(name="H100 PCIe", match=("h100 pcie",), arch="sm_90", sm_count=114,
            dram_bandwidth_gbs=2000, l2_bytes=50 * MiB, smem_per_sm_bytes=228 * KiB,
            fp32_tflops=51, fp64_tflops=26, tf32_tflops=378, bf16_tflops=756,
            fp16_tflops=756, fp8_tflops=1513, int8_tops=1513),
    GpuSpec(name="A100 40GB", match=("a100 40gb", "a100 pcie 40gb", "a100 sxm4 40gb"), arch="sm_80", sm_count=108,
            dram_bandwidth_gbs=1555, l2_bytes=40 * MiB, smem_per_sm_bytes=164 * KiB,
            fp32_tflops=19.5, fp64_tflops=9.7, tf32_tflops=156, bf16_tflops=312,
            fp16_tflops=312, int8_tops=624),
    GpuSpec(name="A100 80GB PCIe", match=("a100 80gb pcie", "a100 pcie 80gb"), arch="sm_80", sm_count=108,
            dram_bandwidth_gbs=1935, l2_bytes=40 * MiB, smem_per_sm_bytes=164 * KiB,
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


def name_tokens(text: str) -> tuple[str, ...]:
    """The lower-cased alphanumeric runs of a name: "NVIDIA H200-NVL" -> (nvidia, h200, nvl)."""
    return tuple(re.findall(r"[a-z0-9]+", text.lower()))


def arch_key(arch: str | None) -> str:
    """The compute capability's digits, so "sm_90", "sm_90a" and "9.0" compare equal."""
    return "".join(re.findall(r"[0-9]+", arch or ""))


def _contains(tokens: tuple[str, ...], run: tuple[str, ...]) -> bool:
    n = len(run)
    return any(tokens[i:i + n] == run for i in range(len(tokens) - n + 1))


def match_strength(spec: GpuSpec, device_name: str, arch: str = "") -> tuple[int, int] | None:
    """How specifically ``spec`` matches the device, or None when it does not.

    (1, n): an ``exact`` spec whose match string is the whole device name (n tokens);
    (0, n): a match string found as a run of n whole tokens in the device name;
    (0, 0): a spec with no match strings, matched by architecture alone (only when the
    device's architecture is known). A spec whose architecture differs from the device's
    known one never matches.
    """
    device_arch, spec_arch = arch_key(arch), arch_key(spec.arch)
    if device_arch and spec_arch and device_arch != spec_arch:
        return None
    if not spec.match:
        return (0, 0) if device_arch and spec_arch else None
    tokens = name_tokens(device_name)
    best: tuple[int, int] | None = None
    for text in spec.match:
        run = name_tokens(text)
        if not run:
            continue
        hit = run == tokens if spec.exact else _contains(tokens, run)
        if hit and (best is None or len(run) > best[1]):
            best = (1 if spec.exact else 0, len(run))
    return best


def choose(specs: Iterable[tuple[GpuSpec, str]], device_name: str,
           arch: str = "") -> tuple[GpuSpec | None, str | None]:
    """The spec for a device among ``(spec, provider)`` pairs, and a one-line warning
    when two specs tie for it (same priority, equally specific): the tie is settled by
    provider and spec name so the outcome does not depend on the order plugins load."""
    ranked = []
    for spec, provider in specs:
        strength = match_strength(spec, device_name, arch)
        if strength is not None:
            ranked.append(((spec.priority, *strength), provider, spec))
    if not ranked:
        return None, None
    top = max(rank for rank, _, _ in ranked)
    tied = sorted(((provider, spec.name, spec) for rank, provider, spec in ranked if rank == top),
                  key=lambda t: (t[0], t[1]))
    chosen = tied[0][2]
    if len(tied) == 1:
        return chosen, None
    others = ", ".join(f"{name!r} from {provider!r}" for provider, name, _ in tied[1:])
    warning = (f"GPU specs {chosen.name!r} from {tied[0][0]!r} and {others} match {device_name!r} "
               f"equally at priority {chosen.priority}; using {chosen.name!r} "
               "(give one of them a higher priority)")
    return chosen, warning


def named(specs: Iterable[tuple[GpuSpec, str]], name: str) -> GpuSpec | None:
    """The spec whose own name is ``name`` (compared as tokens, so case does not matter)."""
    wanted = name_tokens(name)
    return next((spec for spec, _ in specs if name_tokens(spec.name) == wanted), None)


@hookimpl
def kernelpro_register_gpu_specs(register):
    for spec in SPECS:
        register(spec)
