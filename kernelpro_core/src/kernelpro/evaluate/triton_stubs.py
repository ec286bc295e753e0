"""Triton's ``cuda_utils`` module built once per host, and copied into each candidate's cache.

Why. Every candidate gets its own Triton cache directory (its build entry's ``triton``,
:mod:`kernelpro.evaluate.compile`), so at its first Triton call each candidate's harness
built Triton's C helper module ``cuda_utils`` again with the host's C compiler, on the
device's time: with several problems sharing a GPU the first call was a quarter of what an
evaluation held the device alone, and of a warmed GEMM's 0.91-s first call most was this
build and the kernel's launcher stub (docs/validation/throughput.md, session 33).

Method. ``cuda_utils`` is built from Triton's own C source, the same for every candidate
(its cache key is a hash of that source and the platform). A trusted process of KernelPro's
own (never candidate code, with the GPU hidden) builds it once per host and Triton version
into a store beside the build cache; before a Triton candidate's harness starts, the store's
directory is *copied* (not linked: the candidate may write its own cache, never the store)
into the candidate's cache, where Triton finds it by its key and only loads it. Where the
build cannot be made (no Triton, no C compiler, no ``libcuda``, a cache that cannot be
written), nothing is copied and :func:`failed` says why: Triton builds the module at the
first call, as before (a process tries the build once).

The kernel's launcher stub is not shared: its source is generated from the kernel's
signature inside the candidate's process, which no trusted process may take as given.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from kernelpro.problem import LANGUAGE_MARKERS

NAME = "cuda_utils"
BUILD_TIMEOUT_S = 300.0
_FAILED: dict[str, str] = {}  # store -> why its build failed in this process (not tried again)
_BUILD = ("from triton.backends.nvidia.driver import CudaUtils\n"
          "CudaUtils()\n")


def uses_triton(source: str) -> bool:
    """Whether the source uses Triton, by the marker ``detect_language`` reads (here also
    where another marker comes first: a CUDA extension beside Triton kernels)."""
    return bool(dict(LANGUAGE_MARKERS)["triton"].search(source))


def triton_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("triton")
    except Exception:
        return None


def store_dir(cache_root: Path) -> Path | None:
    """The store of this host's Triton version under the build cache, or None without Triton."""
    v = triton_version()
    return Path(cache_root) / "triton_stubs" / re.sub(r"[^A-Za-z0-9._-]", "_", v) if v else None


def built(store: Path) -> list[Path]:
    """The store's key directories that hold the module."""
    if not store.is_dir():
        return []
    return sorted(d for d in store.iterdir() if d.is_dir() and any(f.name.startswith(NAME + ".")
                                                                   and f.suffix == ".so" for f in d.iterdir()))


def ensure(cache_root: Path, env: dict[str, str] | None = None) -> Path | None:
    """The store, built if it is not yet (once per host and Triton version); None where it
    holds no module (a build that failed is not tried again by this process: :func:`failed`)."""
    store = store_dir(cache_root)
    if store is None:
        return None
    if built(store):
        return store
    if str(store) in _FAILED:
        return None
    try:
        return _build_store(store, env)
    except OSError as exc:  # a cache that cannot be written: Triton builds the module at the first call
        _FAILED[str(store)] = f"{type(exc).__name__}: {exc}"[:300]
        return None


def _build_store(store: Path, env: dict[str, str] | None) -> Path | None:
    store.mkdir(parents=True, exist_ok=True)
    with open(store / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per host; a second caller finds it done
        if built(store):
            return store
        child_env = dict(os.environ if env is None else env)
        child_env.update(TRITON_CACHE_DIR=str(store / "tmp_cache"), CUDA_VISIBLE_DEVICES="")
        shutil.rmtree(store / "tmp_cache", ignore_errors=True)
        try:
            proc = subprocess.run([sys.executable, "-c", _BUILD], env=child_env, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
            why = None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1][:300]
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"{type(exc).__name__}: {exc}"[:300]
        made = built(store / "tmp_cache")
        if why is None and made:
            for d in made:
                os.replace(d, store / d.name)
        else:
            _FAILED[str(store)] = why or "no module was built"
        shutil.rmtree(store / "tmp_cache", ignore_errors=True)
    return store if built(store) else None


def failed(cache_root: Path) -> str | None:
    """Why this process could not build the store, if it could not."""
    store = store_dir(cache_root)
    return _FAILED.get(str(store)) if store is not None else None


def seed(store: Path | None, triton_cache: Path) -> int:
    """Copy the store's module directories into a candidate's Triton cache where missing;
    how many were copied. Never raises: a copy that fails leaves Triton to build it."""
    if store is None:
        return 0
    n = 0
    for d in built(store):
        target = Path(triton_cache) / d.name
        if target.exists():
            continue
        tmp = Path(triton_cache) / f".{d.name}.tmp{os.getpid()}"
        try:
            Path(triton_cache).mkdir(parents=True, exist_ok=True)
            shutil.copytree(d, tmp)
            os.replace(tmp, target)
            n += 1
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return n


def gpu_host() -> bool:
    """Whether this host can run a CUDA build of torch on a GPU, read without initializing
    CUDA (a process must not, before its job's variables are applied)."""
    try:
        import torch

        return bool(torch.version.cuda) and os.path.exists("/dev/nvidiactl")
    except Exception:
        return False


def warm_cache_key() -> float | None:
    """Compute Triton's own cache key (a hash of its sources and its 500-MB library, which a
    process computes once, at its first kernel: 0.37 s of a Triton candidate's first call on
    the H100 machine, docs/validation/throughput.md, session 34) in a process started ahead
    of its job, before any candidate code and off the device. Seconds it took; None where
    there is no GPU or no Triton (nothing done)."""
    if not gpu_host():
        return None
    import time

    t0 = time.monotonic()
    try:
        from triton.runtime import cache

        key = getattr(cache, "triton_key", None)
        if key is None:
            return None
        key()
    except Exception:  # not installed, or broken: the candidate's own import says so
        return None
    return time.monotonic() - t0
