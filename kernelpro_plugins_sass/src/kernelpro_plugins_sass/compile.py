"""Compiling sources to cubins for analysis: ``.cu`` with nvcc, ``.ptx`` with ptxas.

Both run ptxas verbosely (``-Xptxas -v`` / ``-v``) so the returned log carries the
resource usage and the performance advisories of every kernel.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import attrs

from kernelpro.api import CollectorError

from kernelpro_plugins_sass.toolchain import require_tool

DEFAULT_ARCH = "sm_90"
#: environment variable that overrides the architecture .cu files are compiled for
ARCH_ENV = "KERNELPRO_SASS_ARCH"
COMPILE_TIMEOUT_S = 60.0


@attrs.frozen
class CompiledSource:
    cubin: Path
    log: str  # ptxas -v output and warnings
    arch: str


def default_arch() -> str:
    return os.environ.get(ARCH_ENV, "").strip() or DEFAULT_ARCH


def _relevant_lines(text: str, n: int = 2) -> str:
    """The first error lines of a compiler log (lines saying 'error' first), joined."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\berror\b", ln, re.IGNORECASE)]
    picked = (errors or lines)[:n]
    return " | ".join(picked)[:400]


def _run(argv: list[str], what: str, timeout_s: float) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              errors="replace")
    except subprocess.TimeoutExpired:
        raise CollectorError(f"{what} timed out after {timeout_s:.0f} s") from None
    except OSError as exc:
        raise CollectorError(f"{what} could not run: {exc}") from None
    log = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0:
        raise CollectorError(f"{what} failed: {_relevant_lines(log) or f'exit {proc.returncode}'}")
    return log


def compile_cu(source: Path, out_dir: Path, arch: str | None = None,
               extra_flags: tuple[str, ...] = (), timeout_s: float = COMPILE_TIMEOUT_S) -> CompiledSource:
    """``nvcc -cubin -arch=ARCH -Xptxas -v`` into ``out_dir``; one nvcc call."""
    nvcc = require_tool("nvcc")
    arch = arch or default_arch()
    out_dir.mkdir(parents=True, exist_ok=True)
    cubin = out_dir / (source.stem + ".cubin")
    argv = [str(nvcc), "-cubin", f"-arch={arch}", "-Xptxas", "-v", "-lineinfo", *extra_flags,
            "-o", str(cubin), str(source)]
    log = _run(argv, f"nvcc on {source.name}", timeout_s)
    return CompiledSource(cubin, log, arch)


_PTX_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.MULTILINE)


def ptx_arch(ptx_text: str) -> str | None:
    m = _PTX_TARGET.search(ptx_text)
    return m.group(1) if m else None


def compile_ptx(source: Path, out_dir: Path, arch: str | None = None,
                timeout_s: float = COMPILE_TIMEOUT_S) -> CompiledSource:
    """``ptxas -v --gpu-name ARCH`` (ARCH from the PTX's ``.target`` unless given)."""
    ptxas = require_tool("ptxas")
    try:
        text = source.read_text(errors="replace")
    except OSError as exc:
        raise CollectorError(f"cannot read {source}: {exc.strerror}") from None
    arch = arch or ptx_arch(text) or default_arch()
    out_dir.mkdir(parents=True, exist_ok=True)
    cubin = out_dir / (source.stem + ".cubin")
    argv = [str(ptxas), "-v", f"--gpu-name={arch}", "-o", str(cubin), str(source)]
    log = _run(argv, f"ptxas on {source.name}", timeout_s)
    return CompiledSource(cubin, log, arch)
