"""Builders of synthetic Nsight Compute data for the ncu plugin's tests."""

from __future__ import annotations

import csv
import io

from kernelpro.records import KernelProfile, ProfileData

from kernelpro_plugins_ncu import metrics as M


def raw_csv(kernels: list[tuple[str, dict[str, float]]], units: dict[str, str] | None = None) -> str:
    """ncu ``--page raw --csv`` text with a units row, one row per (name, metrics)."""
    units = units or {}
    names = sorted({n for _, m in kernels for n in m})
    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
              "Block Size", "Grid Size", "Device", "CC", *names]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(header)
    w.writerow(["", "", "", "", "", "", "", "", "", "", "", *[units.get(n, "") for n in names]])
    for i, (kname, m) in enumerate(kernels):
        w.writerow([str(i), "123", "python3", "host", kname, "1", "7", "(256, 1, 1)", "(1024, 1, 1)",
                    "0", "9.0", *[f"{m[n]:,}" if n in m else "" for n in names]])
    return buf.getvalue()


def kernel(name: str = "k", duration_ns: float = 1e6, **metrics: float) -> KernelProfile:
    return KernelProfile(name=name, duration_ns=duration_ns, metrics={M.DURATION_NS: duration_ns, **metrics})


def profile(*kernels: KernelProfile, io: dict | None = None, device: str = "NVIDIA H200") -> ProfileData:
    return ProfileData(level="kernel", collector="ncu", kernels=tuple(kernels),
                       payload={"device_name": device, "io": io or {}})


def memory_bound_metrics() -> dict[str, float]:
    """A streaming copy near the DRAM roof on an H200 (1 ms, 4.3 GB)."""
    return {M.DRAM_READ_BYTES: 2.15e9, M.DRAM_WRITE_BYTES: 2.15e9, M.DRAM_THROUGHPUT_PCT: 90.0,
            M.MEM_THROUGHPUT_PCT: 90.0, M.SM_THROUGHPUT_PCT: 20.0, M.GRID_SIZE: 1056, M.BLOCK_SIZE: 256,
            M.SM_COUNT: 132, M.WAVES_PER_SM: 1.0, M.FADD: 0.0, M.FFMA: 0.0}
