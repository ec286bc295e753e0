"""The compile stage: build a candidate in its own process, into a content-addressed cache.

    python -m kernelpro.evaluate.compile ENTRY_DIR CANDIDATE.py     (run by compile_candidate)

Method. A candidate that builds native code (``load_inline``, ``cpp_extension.load``,
raw ``.cu`` through :mod:`kernelpro.evaluate.nvcc`, CuTe/CUTLASS C++) builds it when its
module is imported. The compile stage imports the module in a separate process with
the GPU hidden (``CUDA_VISIBLE_DEVICES=""``, so compiling never touches the GPU another
candidate is being timed on), a time limit (``evaluator.compile_timeout_s``) and the
build directories pointed into one cache entry::

    <cache>/<key>/torch_extensions   TORCH_EXTENSIONS_DIR
    <cache>/<key>/triton             TRITON_CACHE_DIR
    <cache>/<key>/nvcc               raw .cu builds (KERNELPRO_BUILD_DIR)
    <cache>/<key>/meta.json          outcome, seconds, trimmed compiler log

``key`` = SHA-256 of the candidate source, the configured include paths and nvcc flags,
the target architecture and the toolchain fingerprint (Python, torch+CUDA, triton,
nvcc, host C++ compiler versions). The candidate's harness then runs with the same
environment, so torch finds the built extension and only loads it (its ninja step is a
no-op). An identical candidate is never compiled twice, and a compile error is cached
too (the same source fails the same way).

Triton kernels compile at their first call, not at import: they are compiled inside the
candidate's harness, into the same entry's ``triton`` directory (so profilers reuse them).

``compile_many`` runs several compile processes at once (a thread per process), for the
loop to build the next candidates while the GPU evaluates another.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

import attrs

from kernelpro.evaluate import toolchain
from kernelpro.evaluate.reaper import end_reaped
from kernelpro.records import CompileResult

STATUSES = ("ok", "compile_error", "compile_timeout", "deferred", "skipped")

# Sources that build native code when imported.
NEEDS_BUILD = re.compile(r"load_inline|cpp_extension|load_cu\b|kernelpro\.evaluate\.nvcc|__global__|#include")


@attrs.frozen
class CompileOutcome:
    """What the compile stage did for one candidate.

    ``status``: ok (built, or nothing to build), compile_error, compile_timeout,
    deferred (importing failed for a reason other than the compiler, e.g. the module
    needs the GPU at import: the candidate's harness imports it again and reports), skipped (the
    source builds nothing at import: plain PyTorch or Triton)."""

    status: str
    build_dir: Path
    key: str
    seconds: float = 0.0  # of this call (a cache hit costs almost nothing)
    compile_seconds: float = 0.0  # of the build that produced the entry
    cached: bool = False
    arch: str | None = None
    log: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "skipped", "deferred")

    def result(self, language: str) -> CompileResult:
        return CompileResult(ok=self.ok, seconds=self.compile_seconds, cached=self.cached, language=language,
                             log=self.log)


def cache_root(build_cache_dir: str | None) -> Path:
    if build_cache_dir:
        return Path(build_cache_dir).expanduser()
    env = os.environ.get("KERNELPRO_BUILD_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelpro" / "builds"


def build_key(source: str, include_paths: list[str], cuda_flags: list[str], arch: str | None) -> str:
    h = hashlib.sha256()
    for part in (source, json.dumps(include_paths), json.dumps(cuda_flags), arch or "cpu", toolchain.fingerprint()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def build_env(entry: Path, *, arch: str | None, include_paths: list[str], cuda_flags: list[str],
              base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment of every process that builds or loads the candidate of ``entry``."""
    env = dict(os.environ if base is None else base)
    entry = Path(entry).resolve()
    env["TORCH_EXTENSIONS_DIR"] = str(entry / "torch_extensions")
    env["TRITON_CACHE_DIR"] = str(entry / "triton")
    env["KERNELPRO_BUILD_DIR"] = str(entry / "nvcc")
    env["KERNELPRO_INCLUDE_PATHS"] = json.dumps(include_paths)
    env["KERNELPRO_CUDA_FLAGS"] = json.dumps(cuda_flags)
    if arch:
        env["TORCH_CUDA_ARCH_LIST"] = arch
        env["KERNELPRO_CUDA_ARCH"] = arch
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def clear_stale_batons(entry: Path) -> list[Path]:
    """Remove torch's build lock files (``FileBaton``) under ``entry``'s extension builds.

    Call only while holding ``entry``'s lock (every builder of an entry holds it, so any
    baton found then belongs to a build that was killed): torch waits for such a file
    forever, and every later evaluation of the source would sit idle until its time limit."""
    removed = []
    for baton in sorted((Path(entry) / "torch_extensions").glob("*/lock")):
        try:
            baton.unlink()
            removed.append(baton)
        except OSError:
            continue
    return removed


#: set in the compile process's environment: its parent holds the entry's lock already
HELD_ENV = "KERNELPRO_BUILD_LOCK_HELD"


def install_build_hooks() -> None:
    """Add the configured include paths and nvcc flags to every ``load_inline`` / ``load``,
    and hold the build entry's lock while one runs (a build in the candidate's harness, for a
    source whose compile stage deferred to it, excludes the compile stage's and clears what a
    killed build left).

    Runs in the compile process and in the candidate's harness before the candidate is imported, with
    the same settings (from the environment), so both produce the same build commands."""
    try:
        inc = json.loads(os.environ.get("KERNELPRO_INCLUDE_PATHS", "[]"))
        flags = json.loads(os.environ.get("KERNELPRO_CUDA_FLAGS", "[]"))
    except json.JSONDecodeError:
        inc, flags = [], []
    ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
    entry = Path(ext_dir).parent if ext_dir and Path(ext_dir).name == "torch_extensions" else None
    lock_here = entry is not None and not os.environ.get(HELD_ENV)
    if not inc and not flags and not lock_here:
        return
    import torch.utils.cpp_extension as cpp

    def wrap(fn):
        def wrapper(*args, **kwargs):
            kwargs["extra_include_paths"] = list(kwargs.get("extra_include_paths") or []) + inc
            kwargs["extra_cuda_cflags"] = list(kwargs.get("extra_cuda_cflags") or []) + flags
            if not lock_here:
                return fn(*args, **kwargs)
            assert entry is not None
            try:
                lock = open(entry / "lock", "a")
            except OSError:  # an entry this process may not write: build as torch would
                return fn(*args, **kwargs)
            with lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                clear_stale_batons(entry)
                return fn(*args, **kwargs)

        wrapper.__wrapped__ = fn
        wrapper.__doc__ = fn.__doc__
        return wrapper

    if not getattr(cpp.load_inline, "__wrapped__", None):
        cpp.load_inline = wrap(cpp.load_inline)
        cpp.load = wrap(cpp.load)


# --- compiler output -----------------------------------------------------------------------

_ERROR_LINE = re.compile(r"(\berror\b|\bError\b|undefined reference|fatal|ptxas .*error|SyntaxError)")
_NOISE = re.compile(r"^(ninja: build stopped|FAILED: |\[\d+/\d+\] |Traceback|  File \")")


def trim_compiler_log(text: str, max_errors: int = 8, context: int = 2, max_chars: int = 4000) -> str:
    """The lines of a compiler failure that the next generation needs: each error line
    (gcc ``file:line:col: error:``, nvcc ``file(line): error:``, ptxas, linker) with the
    ``context`` lines after it (source line and caret), at most ``max_errors`` errors;
    build-system noise (ninja progress, command lines, Python traceback frames) dropped.
    Without any error line, the last 20 lines."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    kept: list[str] = []
    seen: set[str] = set()
    errors = 0
    i = 0
    while i < len(lines) and errors < max_errors:
        ln = lines[i]
        if _ERROR_LINE.search(ln) and not _NOISE.match(ln) and "Error building extension" not in ln:
            key = ln.strip()
            if key not in seen:
                seen.add(key)
                errors += 1
                kept.append(ln)
                for extra in lines[i + 1: i + 1 + context]:
                    if extra.strip() and not _ERROR_LINE.search(extra) and not _NOISE.match(extra):
                        kept.append(extra)
        i += 1
    if not kept:
        kept = [ln for ln in lines if ln.strip() and not _NOISE.match(ln)][-20:]
    return "\n".join(kept)[:max_chars]


# --- child side ----------------------------------------------------------------------------


def _child(entry: Path, candidate: Path) -> int:
    """Import the candidate (building its code); write the outcome to ``entry/compile_child.json``.
    The process first confines itself to writing beneath ``entry`` (when the kernel has
    Landlock, and unless ``evaluator.write_guard`` is ``detect``)."""
    out = entry / "compile_child.json"
    if os.environ.pop("KERNELPRO_CONFINE", "1") == "1":
        from kernelpro.evaluate.sandbox import confine

        confine([entry])
    t0 = time.monotonic()
    try:
        install_build_hooks()
        from kernelpro.evaluate.loader import load_module

        load_module(candidate, "kernelpro_candidate")
        res = {"status": "ok", "seconds": time.monotonic() - t0}
    except BaseException as exc:  # the candidate's import: every failure is an outcome
        text = f"{type(exc).__name__}: {exc}"
        if _is_compile_failure(exc, text):
            res = {"status": "compile_error", "seconds": time.monotonic() - t0, "log": trim_compiler_log(text),
                   "reason": "compilation failed: " + _first_error(text)}
        else:
            first = text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__
            res = {"status": "deferred", "seconds": time.monotonic() - t0,
                   "reason": f"import outside the evaluation failed ({first}); the candidate's harness builds it"}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(res))
    os.replace(tmp, out)
    sys.stdout.flush()
    os._exit(0)


def _is_compile_failure(exc: BaseException, text: str) -> bool:
    if type(exc).__name__ in ("CompilationError", "CalledProcessError", "NvccError"):
        return True
    markers = ("Error building extension", "ninja: build stopped", "nvcc fatal", "ptxas", "error:")
    return any(m in text for m in markers)


def _first_error(text: str) -> str:
    for ln in text.splitlines():
        if _ERROR_LINE.search(ln) and "Error building extension" not in ln and not _NOISE.match(ln):
            return ln.strip()[:300]
    return text.strip().splitlines()[0][:300] if text.strip() else "unknown error"


# --- parent side ---------------------------------------------------------------------------


def needs_build(source: str) -> bool:
    return bool(NEEDS_BUILD.search(source))


def entry_for(source: str, *, include_paths: list[str], cuda_flags: list[str], cuda_arch: str = "auto",
              build_cache_dir: str | None = None) -> tuple[Path, str, str | None]:
    """(cache entry directory, key, arch) of a candidate source."""
    arch = toolchain.arch_for(source, cuda_arch)
    inc = toolchain.include_paths(include_paths)
    key = build_key(source, inc, list(cuda_flags), arch)
    return cache_root(build_cache_dir) / key, key, arch


def compile_candidate(candidate_path: Path, *, config: Any, timeout_s: float | None = None,
                      max_jobs: int | None = None) -> CompileOutcome:
    """Build ``candidate_path`` into its cache entry (or find it there). ``config`` is the
    EvaluatorConfig. Never raises for the candidate's faults: they are outcomes."""
    t0 = time.monotonic()
    source = Path(candidate_path).read_text()
    inc = toolchain.include_paths(config.include_paths)
    flags = list(config.cuda_flags)
    entry, key, arch = entry_for(source, include_paths=list(config.include_paths), cuda_flags=flags,
                                 cuda_arch=config.cuda_arch, build_cache_dir=config.build_cache_dir)
    entry.mkdir(parents=True, exist_ok=True)
    if not needs_build(source):
        return CompileOutcome("skipped", entry, key, time.monotonic() - t0, arch=arch)
    timeout = float(timeout_s if timeout_s is not None else config.compile_timeout_s)
    with open(entry / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per entry; a second caller waits and hits
        clear_stale_batons(entry)  # a killed build's: with the lock held, no build of this entry runs
        meta = _read_meta(entry)
        if meta is not None:
            return CompileOutcome(meta["status"], entry, key, time.monotonic() - t0, meta.get("seconds", 0.0),
                                  cached=True, arch=arch, log=meta.get("log", ""), reason=meta.get("reason", ""))
        env = build_env(entry, arch=arch, include_paths=inc, cuda_flags=flags)
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["KERNELPRO_CONFINE"] = "0" if getattr(config, "write_guard", "auto") == "detect" else "1"
        env["TMPDIR"] = str(entry / "tmp")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env[HELD_ENV] = "1"  # this process holds the entry's lock for its child's build
        (entry / "tmp").mkdir(exist_ok=True)
        if max_jobs:
            env["MAX_JOBS"] = str(max_jobs)
        (entry / "compile_child.json").unlink(missing_ok=True)
        log_path = entry / "compile.log"
        rc_path = entry / "compile_rc"
        rc_path.unlink(missing_ok=True)
        with open(log_path, "wb") as log:
            # under a reaper, as the harnesses are: the candidate's module is imported here, and a
            # process it starts (even one that leaves the session with setsid) must not outlive
            # the build, where it would run beside the timed calls, outside every check
            proc = subprocess.Popen([sys.executable, "-m", "kernelpro.evaluate.reaper", str(rc_path), "--",
                                     sys.executable, "-m", "kernelpro.evaluate.compile", str(entry),
                                     str(Path(candidate_path).resolve())],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True, cwd=str(entry))
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                end_reaped(proc, grace_s=5.0)
                return CompileOutcome("compile_timeout", entry, key, time.monotonic() - t0, arch=arch,
                                      reason=f"compilation did not finish within {timeout:g} s")
            finally:
                end_reaped(proc, grace_s=5.0)
        child = entry / "compile_child.json"
        if not child.exists():
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            try:
                status: Any = int(rc_path.read_text())
            except (OSError, ValueError):
                status = proc.returncode
            return CompileOutcome("deferred", entry, key, time.monotonic() - t0, arch=arch,
                                  reason=f"compile process ended without an outcome (status {status})",
                                  log=trim_compiler_log(tail))
        res = json.loads(child.read_text())
        meta = {"status": res["status"], "seconds": res.get("seconds", 0.0), "log": res.get("log", ""),
                "reason": res.get("reason", ""), "key": key, "arch": arch,
                # what every later process needs to load this build without rebuilding it
                "include_paths": inc, "cuda_flags": flags,
                "toolchain": toolchain.fingerprint(), "source_sha256": hashlib.sha256(source.encode()).hexdigest()}
        tmp = entry / "meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, entry / "meta.json")
        return CompileOutcome(meta["status"], entry, key, time.monotonic() - t0, meta["seconds"], cached=False,
                              arch=arch, log=meta["log"], reason=meta["reason"])


def compile_many(candidate_paths: Iterable[Path], *, config: Any, workers: int | None = None,
                 timeout_s: float | None = None) -> list[CompileOutcome]:
    """Compile several candidates at once, ``workers`` processes in parallel (default
    ``config.compile_workers``, 0 = one per CPU core, at most 8); outcomes in input order.
    Each build gets ``MAX_JOBS = cores // workers`` so the pool does not oversubscribe."""
    paths = list(candidate_paths)
    cores = os.cpu_count() or 1
    n = workers or config.compile_workers or min(cores, 8)
    n = max(1, min(n, len(paths) or 1))
    jobs = max(1, cores // n)
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(compile_candidate, p, config=config, timeout_s=timeout_s, max_jobs=jobs)
                   for p in paths]
        return [f.result() for f in futures]


class CompilePool:
    """Compile candidates in the background while the caller evaluates others::

        pool = CompilePool(config.evaluator)           # workers: config.compile_workers
        futures = {cid: pool.submit(path) for cid, path in next_drafts}
        ...
        result = evaluate(problem, path, ..., compiled=futures[cid].result())
        pool.shutdown()
    """

    def __init__(self, config: Any, workers: int | None = None) -> None:
        cores = os.cpu_count() or 1
        self.workers = max(1, workers or config.compile_workers or min(cores, 8))
        self.config = config
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.workers,
                                                           thread_name_prefix="kernelpro-compile")

    def submit(self, candidate_path: Path) -> "concurrent.futures.Future[CompileOutcome]":
        jobs = max(1, (os.cpu_count() or 1) // self.workers)
        return self._pool.submit(compile_candidate, Path(candidate_path), config=self.config, max_jobs=jobs)

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


def _read_meta(entry: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((entry / "meta.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return meta if meta.get("status") in STATUSES else None


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1]), Path(sys.argv[2])))
