"""``kernelpro calibrate``: measured ceilings of the GPU in hand, cached per device name.

Method (torch, CUDA events, warm-up first, median of repetitions, random data, never
zeros, since some GPUs move or multiply zeros faster):

* DRAM bandwidth, three ways over 1 GiB random buffers (far past any L2): a copy
  (``dst.copy_(src)``, counting the bytes read plus the bytes written, 2 x size / time), a
  read (a sum over the buffer: size / time) and a write (a fill with a non-zero value:
  size / time), in GB/s (1e9 bytes). The spec's ``dram_bandwidth_gbs`` is the fastest of
  the three: kernels of each shape reach their own, and a roofline fraction against the
  copy alone came out above 100 % for honest kernels.
* matrix throughput: ``a @ b`` of random n x n matrices (n = 8192) in bf16, fp16, tf32,
  fp32 (TF32 off) and fp64; 2 n^3 FLOPs per product, in TFLOP/s.

The result is written to ``$XDG_CACHE_HOME/kernelpro/calibration/<device-name>.json``
(``~/.cache`` when XDG_CACHE_HOME is unset). :func:`resolve_gpu_spec` then returns the
registered datasheet spec with the measured bandwidth and tensor-core rates in place and
``source="calibrated"`` (see :func:`calibrated_spec` for why FP32/FP64 stay datasheet).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import attrs

from kernelpro.api import GpuSpec


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelpro" / "calibration"


def cache_path(device_name: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", device_name.strip()).strip("_") or "gpu"
    return cache_dir() / f"{safe}.json"


def load_calibration(device_name: str) -> dict[str, Any] | None:
    path = cache_path(device_name)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _time_ms(torch, fn, reps: int, warmup: int) -> float:
    """Median milliseconds of ``fn`` over ``reps`` calls, timed with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def bandwidth_kernels(torch, dev, nbytes: int) -> dict:
    """The three calls whose times give the bandwidth, each moving ``nbytes`` of float32 per
    direction: ``copy`` (reads and writes them), ``read`` (a sum into one element) and
    ``write`` (a fill). Random data, no zeros. Built on any device, so that a CPU test runs
    them (the GPU is only where they are timed)."""
    src = torch.rand(nbytes // 4, device=dev, dtype=torch.float32) + 0.5
    dst = torch.empty_like(src)
    out = torch.empty((), device=dev, dtype=torch.float32)
    return {"copy": lambda: dst.copy_(src),
            # sum over the one dimension: torch.sum takes out= only with dim given
            "read": lambda: torch.sum(src, dim=0, out=out),
            "write": lambda: dst.fill_(1.2345)}


_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32", "fp32": "float32", "fp64": "float64"}


def _matmul_ms(torch, dev, name: str, size: int, reps: int, warmup: int) -> float:
    dtype = getattr(torch, _DTYPES[name])
    a = torch.randn(size, size, device=dev, dtype=dtype)
    b = torch.randn(size, size, device=dev, dtype=dtype)
    return _time_ms(torch, lambda: torch.matmul(a, b), reps, warmup)


def measure(device: str = "cuda", copy_bytes: int = 1 << 30, matmul_n: int = 8192,
            reps: int = 10, warmup: int = 3, dtypes: tuple[str, ...] = (
                "bf16", "fp16", "tf32", "fp32", "fp64")) -> dict[str, Any]:
    """Measure the ceilings of ``device``; returns the cache record (see module doc)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: calibration measures a GPU")
    dev = torch.device(device)
    props = torch.cuda.get_device_properties(dev)
    result: dict[str, Any] = {
        "device_name": props.name,
        "arch": f"sm_{props.major}{props.minor}",
        "sm_count": props.multi_processor_count,
        "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
        "memory_bytes": int(props.total_memory),
        "measured_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "method": f"CUDA events, {warmup} warm-up, median of {reps}, random data; copy "
                  f"{copy_bytes} B counting read+write, read (sum) and write (fill) of as many bytes, "
                  f"bandwidth the fastest of the three; matmul n={matmul_n}, 2n^3 FLOPs",
    }
    with torch.cuda.device(dev):
        for kind, fn in bandwidth_kernels(torch, dev, copy_bytes).items():
            ms = _time_ms(torch, fn, reps, warmup)
            result[f"{kind}_ms"] = ms
            moved = 2 * copy_bytes if kind == "copy" else copy_bytes  # a copy reads and writes
            result[f"{kind}_bandwidth_gbs"] = moved / (ms * 1e-3) / 1e9
        result["dram_bandwidth_gbs"] = max(result[f"{k}_bandwidth_gbs"] for k in ("copy", "read", "write"))
        old_tf32 = torch.backends.cuda.matmul.allow_tf32
        try:
            for name in dtypes:
                torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
                size = matmul_n if name not in ("fp32", "fp64") else matmul_n // 2
                ms = _matmul_ms(torch, dev, name, size, reps, warmup)
                result[f"{name}_matmul_ms"] = ms
                result[f"{name}_matmul_n"] = size
                result[f"{name}_tflops"] = 2 * size**3 / (ms * 1e-3) / 1e12
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old_tf32
    return result


def save_calibration(record: dict[str, Any]) -> Path:
    path = cache_path(record["device_name"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True))
    return path


def table_spec(device_name: str, specs: tuple[GpuSpec, ...] | None = None) -> GpuSpec | None:
    """The first of ``specs`` (the built-in table by default) that claims the device, by
    core's matching rule (so a GH200 is not an H200)."""
    from kernelpro.api import BUILTIN_GPU_SPECS, gpu_spec_matches

    for spec in BUILTIN_GPU_SPECS if specs is None else specs:
        if gpu_spec_matches(spec, device_name):
            return spec
    return None


def calibrated_spec(device_name: str, arch: str, record: dict[str, Any],
                    base: GpuSpec | None) -> GpuSpec:
    """``base`` with measured ceilings in place (or a spec built from the record alone).

    Only the DRAM bandwidth and the tensor-core rates (bf16, fp16, tf32 GEMMs) replace
    datasheet numbers: an FP32 or FP64 GEMM measures the library's GEMM, not the FMA pipe's
    peak (on the H200 cuBLAS SGEMM reached 47 TFLOP/s while a plain FFMA kernel ran at 58,
    and DGEMM runs on the FP64 tensor cores), so for those a datasheet value is kept and
    the measured GEMM rate serves only a GPU with no datasheet entry.
    """
    keys: tuple[str, ...] = ("dram_bandwidth_gbs", "bf16_tflops", "fp16_tflops", "tf32_tflops")
    if base is None:
        keys += ("fp32_tflops", "fp64_tflops")
    # GpuSpec's float fields by name (Any: passed on as keyword arguments)
    measured: dict[str, Any] = {k: float(record[k]) for k in keys if isinstance(record.get(k), (int, float)) and record[k] > 0}
    if base is not None:
        return attrs.evolve(base, source="calibrated", **measured)
    needed = ("dram_bandwidth_gbs", "bf16_tflops", "fp16_tflops", "tf32_tflops", "fp32_tflops",
              "fp64_tflops")
    if not all(k in measured for k in needed):
        raise ValueError(f"calibration of {device_name} lacks {', '.join(k for k in needed if k not in measured)}")
    return GpuSpec(name=device_name, match=(device_name.lower(),), arch=record.get("arch") or arch,
                   sm_count=int(record.get("sm_count") or 0), l2_bytes=int(record.get("l2_bytes") or 0),
                   smem_per_sm_bytes=0, source="calibrated", **measured)


def resolve_gpu_spec(device_name: str, arch: str) -> GpuSpec | None:
    """Calibrated ceilings for ``device_name`` when a calibration is cached, else None."""
    record = load_calibration(device_name)
    if record is None:
        return None
    try:
        return calibrated_spec(device_name, arch, record, table_spec(device_name))
    except ValueError:
        return None


def register_command(cli) -> None:
    """Add ``kernelpro calibrate`` to the click group ``cli``."""
    import click

    @cli.command("calibrate")
    @click.option("--device", default="cuda", show_default=True, help="CUDA device to measure")
    @click.option("--reps", default=10, show_default=True, help="timed repetitions per measurement")
    @click.option("--json", "as_json", is_flag=True, help="print the record as JSON")
    def calibrate(device: str, reps: int, as_json: bool) -> None:
        """Measure copy bandwidth and matrix throughput of the GPU and cache them."""
        # exit status as in README.md's table: 3 this machine lacks what the command needs,
        # 1 the measurement failed
        try:
            import torch
        except ImportError:
            click.echo("error: calibrate needs PyTorch with CUDA: pip install torch", err=True)
            sys.exit(3)
        if not torch.cuda.is_available():
            click.echo("error: calibrate needs a CUDA GPU and none is visible (torch.cuda.is_available() "
                       "is False); run it on the machine that will be profiled", err=True)
            sys.exit(3)
        if reps < 1:
            click.echo("error: --reps takes a positive integer", err=True)
            sys.exit(2)
        try:
            record = measure(device=device, reps=reps)
        except RuntimeError as exc:  # CUDA errors: one line
            click.echo(f"error: calibration failed: {str(exc).strip().splitlines()[0]}", err=True)
            sys.exit(1)
        path = save_calibration(record)
        if as_json:
            click.echo(json.dumps(record, indent=1, sort_keys=True))
            return
        click.echo(f"{record['device_name']} ({record['arch']}): DRAM {record['dram_bandwidth_gbs']:.0f} GB/s "
                   f"(copy {record.get('copy_bandwidth_gbs', 0):.0f}, read {record.get('read_bandwidth_gbs', 0):.0f}, "
                   f"write {record.get('write_bandwidth_gbs', 0):.0f}), bf16 {record.get('bf16_tflops', 0):.0f}, "
                   f"fp16 {record.get('fp16_tflops', 0):.0f}, tf32 {record.get('tf32_tflops', 0):.0f}, "
                   f"fp32 {record.get('fp32_tflops', 0):.1f}, fp64 {record.get('fp64_tflops', 0):.1f} TFLOP/s")
        click.echo(f"cached in {path}")
