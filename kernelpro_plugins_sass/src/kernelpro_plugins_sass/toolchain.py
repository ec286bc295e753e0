"""Locating and running the CUDA binary utilities (cuobjdump, nvdisasm, nvcc, ptxas, c++filt).

Search order for a tool: ``PATH``, ``$CUDA_HOME/bin`` (and ``$CUDA_PATH/bin``),
``/usr/local/cuda*/bin`` (newest first), then the binaries shipped inside the PyPI wheels
``nvidia-cuda-cuobjdump`` / ``nvidia-cuda-nvdisasm``: CUDA 13 wheels install them as
``site-packages/nvidia/cu13/bin/<tool>``, CUDA 12 wheels as
``site-packages/nvidia/cuda_<tool>/bin/<tool>``.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

from kernelpro.api import CollectorError

#: the pip package that ships each tool when no CUDA toolkit is installed
PIP_PACKAGES = {
    "cuobjdump": "nvidia-cuda-cuobjdump",
    "nvdisasm": "nvidia-cuda-nvdisasm",
    "nvcc": "nvidia-cuda-nvcc",
    "ptxas": "nvidia-cuda-nvcc",
}


def _site_dirs() -> list[Path]:
    dirs = [Path(p) for p in sys.path if p.endswith("site-packages")]
    try:
        dirs += [Path(p) for p in site.getsitepackages()]
    except AttributeError:  # pragma: no cover - virtualenv without getsitepackages
        pass
    seen: list[Path] = []
    for d in dirs:
        if d not in seen:
            seen.append(d)
    return seen


def candidate_paths(tool: str) -> list[Path]:
    """Every place the tool may live, in search order (existence not checked)."""
    paths: list[Path] = []
    on_path = shutil.which(tool)
    if on_path:
        paths.append(Path(on_path))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            paths.append(Path(root) / "bin" / tool)
    local = sorted(Path("/usr/local").glob("cuda*/bin"), reverse=True)
    paths += [d / tool for d in local]
    for sp in _site_dirs():
        nvidia = sp / "nvidia"
        paths += sorted(nvidia.glob(f"cu[0-9]*/bin/{tool}"), reverse=True)
        paths.append(nvidia / f"cuda_{tool}" / "bin" / tool)
        if tool in ("nvcc", "ptxas"):
            paths.append(nvidia / "cuda_nvcc" / "bin" / tool)
    return paths


def find_tool(tool: str) -> Path | None:
    """The first executable ``tool`` in :func:`candidate_paths`, or None."""
    for path in candidate_paths(tool):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def missing_message(tool: str) -> str:
    pkg = PIP_PACKAGES.get(tool)
    hint = f"pip install {pkg}" if pkg else "install it"
    return (f"{tool} not found (searched PATH, CUDA_HOME/bin, /usr/local/cuda*/bin and "
            f"site-packages/nvidia): {hint}, or install the CUDA toolkit")


def require_tool(tool: str) -> Path:
    """The tool's path; :class:`CollectorError` with one line naming the pip package if absent."""
    path = find_tool(tool)
    if path is None:
        raise CollectorError(missing_message(tool))
    return path


def first_lines(text: str, n: int = 2, width: int = 300) -> str:
    """The first ``n`` non-empty lines of ``text`` joined with ' | ', for one-line errors."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[:n])[:width]


def run_tool(argv: list[str], timeout_s: float = 60.0, what: str | None = None) -> str:
    """Run a tool and return its stdout; CollectorError (one line) on failure or timeout."""
    label = what or Path(argv[0]).name
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              errors="replace")
    except subprocess.TimeoutExpired:
        raise CollectorError(f"{label} timed out after {timeout_s:.0f} s") from None
    except OSError as exc:
        raise CollectorError(f"{label} could not run: {exc}") from None
    if proc.returncode != 0:
        detail = first_lines(proc.stderr or proc.stdout) or f"exit status {proc.returncode}"
        raise CollectorError(f"{label} failed: {detail}")
    return proc.stdout


def demangle(names: list[str]) -> dict[str, str]:
    """Map mangled C++ names to readable ones with c++filt (or cu++filt); identity if absent."""
    todo = [n for n in names if n.startswith("_Z")]
    result = {n: n for n in names}
    if not todo:
        return result
    tool = shutil.which("cu++filt") or find_tool("cu++filt") or shutil.which("c++filt")
    if tool is None:
        return result
    try:
        proc = subprocess.run([str(tool)], input="\n".join(todo) + "\n", capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return result
    out = proc.stdout.splitlines()
    if proc.returncode == 0 and len(out) == len(todo):
        result.update(zip(todo, (o.strip() for o in out)))
    return result
