"""Raw ``.cu`` candidates: compile CUDA source with nvcc into a shared library, load it.

A candidate that wants plain CUDA without torch's extension machinery writes::

    from kernelpro.evaluate.nvcc import load_cu
    lib = load_cu("my_kernels", CUDA_SRC)          # ctypes.CDLL
    lib.launch_add.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.launch_add(x.data_ptr(), out.data_ptr(), n, torch.cuda.current_stream().cuda_stream)

(``extern "C"`` host functions that launch the kernels on the stream they are given).

Build: ``nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC <gencode> <include paths> <flags>``.
The architecture, include paths and extra flags come from the evaluator's environment
(``KERNELPRO_CUDA_ARCH``, ``KERNELPRO_INCLUDE_PATHS``, ``KERNELPRO_CUDA_FLAGS``) so the
compile stage and the worker build identically; the output goes to
``$KERNELPRO_BUILD_DIR/<name>-<hash>/`` and is reused when the source, flags and
architecture are the same. A compiler failure raises :class:`NvccError` holding the
compiler's output.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from kernelpro.evaluate import toolchain


class NvccError(RuntimeError):
    """nvcc failed; the message holds its output."""


def _build_root() -> Path:
    env = os.environ.get("KERNELPRO_BUILD_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernelpro" / "nvcc"


def nvcc_command(src: Path, out: Path, arch: str | None, extra_flags: list[str]) -> list[str]:
    nvcc = shutil.which("nvcc") or (os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc")
                                    if os.environ.get("CUDA_HOME") else None)
    if nvcc is None:
        raise NvccError("nvcc not found on PATH (set CUDA_HOME or add the CUDA toolkit's bin directory)")
    inc = json.loads(os.environ.get("KERNELPRO_INCLUDE_PATHS", "[]"))
    flags = json.loads(os.environ.get("KERNELPRO_CUDA_FLAGS", "[]"))
    argv = [nvcc, "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo"]
    if arch:
        argv.append(toolchain.gencode(arch))
    argv += [f"-I{p}" for p in inc] + list(flags) + list(extra_flags) + [str(src), "-o", str(out)]
    return argv


def build_cu(name: str, source: str, extra_flags: list[str] | tuple[str, ...] = (),
             timeout_s: float = 600.0) -> Path:
    """Compile ``source`` (CUDA C++) to a shared library; return its path (cached)."""
    if not name.isidentifier():
        raise ValueError(f"load_cu: name must be an identifier, got {name!r}")
    arch = os.environ.get("KERNELPRO_CUDA_ARCH") or toolchain.arch_for(source)
    probe = nvcc_command(Path("src.cu"), Path("lib.so"), arch, list(extra_flags))
    digest = hashlib.sha256((source + "\0" + json.dumps(probe[1:]) + toolchain.fingerprint()).encode()).hexdigest()
    where = _build_root() / f"{name}-{digest[:16]}"
    lib = where / f"lib{name}.so"
    if lib.exists():
        return lib
    where.mkdir(parents=True, exist_ok=True)
    src = where / f"{name}.cu"
    src.write_text(source)
    tmp = where / f"lib{name}.so.tmp{os.getpid()}"
    argv = nvcc_command(src, tmp, arch, list(extra_flags))
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=where)
    except subprocess.TimeoutExpired:
        raise NvccError(f"nvcc did not finish within {timeout_s:g} s") from None
    if proc.returncode != 0:
        raise NvccError(f"nvcc failed (status {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    os.replace(tmp, lib)
    return lib


def load_cu(name: str, source: str, extra_flags: list[str] | tuple[str, ...] = ()) -> ctypes.CDLL:
    """Build (or reuse) and load a raw CUDA source as a ctypes library."""
    return ctypes.CDLL(str(build_cu(name, source, extra_flags)))
