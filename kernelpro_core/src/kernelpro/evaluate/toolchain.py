"""What a build depends on besides the source: the GPU architecture and the toolchain.

Nothing here creates a CUDA context: the architecture comes from NVML (nvidia-ml-py) or
``nvidia-smi``, the toolchain from version strings. Results are cached per process.

Architecture method: ``evaluator.cuda_arch: auto`` takes the compute capability of GPU 0
(e.g. ``9.0`` on H100/H200) and builds SASS for exactly that architecture (no ``+PTX``:
the binary must not depend on a JIT of PTX at load time). When the source uses
features that exist only on the architecture-specific target (``wgmma``, ``setmaxnreg``,
TMA bulk copies, CuTe/CUTLASS SM90 GMMA atoms) and the capability is 9.0 / 10.0, the
``a`` variant is used (``9.0a`` = ``-gencode=arch=compute_90a,code=sm_90a``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# Sources that need the architecture-specific ("a") target: PTX instructions and CuTe /
# CUTLASS names that only compile for sm_90a / sm_100a.
ARCH_SPECIFIC_MARKERS = re.compile(
    r"wgmma|setmaxnreg|cp\.async\.bulk|cp\.reduce\.async\.bulk|tensormap|multimem|"
    r"SM90_.*(?:TMA|GMMA)|GMMA::|warpgroup_(?:arrive|commit|wait)|SM100_|tcgen05|UMMA"
)
ARCH_A_CAPABLE = ("9.0", "10.0", "10.3", "12.0", "12.1")


@functools.lru_cache(maxsize=1)
def gpu_capability() -> str | None:
    """Compute capability of GPU 0 as "major.minor", or None when no GPU is visible."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            return f"{major}.{minor}"
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            line = out.stdout.strip().splitlines()[0].strip() if out.stdout.strip() else ""
            if re.fullmatch(r"\d+\.\d+", line):
                return line
        except (OSError, subprocess.TimeoutExpired, IndexError):
            pass
    return None


def arch_for(source: str, configured: str = "auto") -> str | None:
    """TORCH_CUDA_ARCH_LIST value for a candidate: "9.0", "9.0a", ... or None (no GPU)."""
    if configured != "auto":
        return configured
    cap = gpu_capability()
    if cap is None:
        return None
    if cap in ARCH_A_CAPABLE and ARCH_SPECIFIC_MARKERS.search(source):
        return cap + "a"
    return cap


def gencode(arch: str) -> str:
    """nvcc flag building SASS for exactly ``arch`` ("9.0a" -> compute_90a / sm_90a)."""
    num = arch.replace(".", "")
    return f"-gencode=arch=compute_{num},code=sm_{num}"


def include_paths(configured: list[str] | tuple[str, ...], contributed: list[str] | None = None) -> list[str]:
    """Configured include directories, then those the installed plugins contribute
    (``kernelpro_build_include_dirs``; ``contributed`` given: those instead), existing ones
    only, without repeats."""
    paths = [str(Path(p).expanduser()) for p in configured]
    if contributed is None:
        from kernelpro.plugins import installed

        contributed = installed().build_include_dirs()
    for p in contributed:
        if Path(p).is_dir() and str(p) not in paths:
            paths.append(str(p))
    return paths


def _version_of(argv: list[str]) -> str:
    exe = shutil.which(argv[0])
    if exe is None:
        return f"{argv[0]}:absent"
    try:
        out = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=30)
        return (out.stdout + out.stderr).strip()[-400:]
    except (OSError, subprocess.TimeoutExpired):
        return f"{argv[0]}:unknown"


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """Versions of everything that changes a binary: Python, torch (and its CUDA), triton,
    nvcc, the host C++ compiler. Part of every build-cache key."""
    parts = [sys.version.split()[0]]
    try:
        import torch

        parts.append(f"torch {torch.__version__} cuda {torch.version.cuda}")
    except Exception:  # pragma: no cover - torch is a dependency
        parts.append("torch:absent")
    try:
        from importlib.metadata import version

        parts.append("triton " + version("triton"))
    except Exception:
        parts.append("triton:absent")
    parts.append(_version_of(["nvcc", "--version"]))
    parts.append(_version_of([os.environ.get("CXX", "c++"), "--version"]))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
