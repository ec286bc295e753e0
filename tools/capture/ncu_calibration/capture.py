#!/usr/bin/env python3
"""Capture the calibration pairs on a GPU: their times outside any profiler, and both sides of
every pair under Nsight Compute (the full set plus every metric a KernelPro micro-profiler
asks for), so that on the CPU ``benchmarks/ncu_calibration/run.py`` can set each "before"
kernel's estimated gains beside the gain its rewrite realized.

Run from the repository root on the GPU machine, with the distributions installed:

    python3 tools/capture/ncu_calibration/capture.py

``KPC_SET=corpus`` captures the rewrites of corpus kernels (``corpus_rewrites/``) instead, into
``$OUT/ncu_calibration_corpus.tar.gz`` (``ncu_calibration_corpus/``; no library is built).

Writes ``$OUT/ncu_calibration.tar.gz`` holding ``ncu_calibration/``:

* ``timings.json``: per pair, the median time of before and after (CUDA events around
  single calls, the L2 flushed before each, 30 alternating calls each), their
  interquartile ranges, and whether their outputs agree;
* ``pairs.raw.csv``, ``pairs.ranges.csv``, ``pairs.rules.csv``, ``pairs.log``: the ncu
  exports as the corpus capture writes them (kernels named by their NVTX range
  ``<pair>:<before|after>`` in ``pairs.ranges.csv``);
* ``build.log`` (nvcc's register and spill report), ``env.json``.

The shared library is built here with nvcc (``-O3 -lineinfo -arch=sm_90a``). Clocks, power
limits and modes are never changed: ncu runs with ``--clock-control none``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="kpc_out_"))
PAIR_SET = os.environ.get("KPC_SET", "calibration")
NAME = "ncu_calibration" if PAIR_SET == "calibration" else f"ncu_calibration_{PAIR_SET}"
STAGE = Path(tempfile.mkdtemp(prefix="kpc_")) / NAME
TIME_LIMIT_S = float(os.environ.get("KPC_TIME_LIMIT_S", "150"))
PROFILE_LIMIT_S = float(os.environ.get("KPC_PROFILE_LIMIT_S", "240"))
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def corpus_capture():
    """The corpus capture's ncu helpers (metrics, exports, rule rows), loaded by path."""
    spec = importlib.util.spec_from_file_location("kp_corpus_capture", HERE.parent / "ncu_corpus" / "capture.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(work: Path) -> Path:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    lib = work / "libkpc_pairs.so"
    cmd = [nvcc, "-O3", "-lineinfo", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v",
           str(HERE / "pairs.cu"), "-o", str(lib)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    (STAGE / "build.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"error: nvcc failed: {proc.stderr.strip()[-500:]}")
    return lib


def main() -> int:
    STAGE.mkdir(parents=True)
    cc = corpus_capture()
    ncu = cc.ncu_path()
    work = Path(tempfile.mkdtemp(prefix="kpc_work_"))
    lib_args: list[str] = []
    if PAIR_SET == "calibration":
        lib = build(work)
        lib_args = ["--lib", str(lib)]
        log(f"built {lib.name}")
    import torch

    env = {"gpu": subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit",
                                  "--format=csv,noheader"], capture_output=True, text=True).stdout.strip(),
           "torch": torch.__version__, "cuda": torch.version.cuda, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
           "ncu": subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]}
    pairs_py = str(HERE / "pairs.py")
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor")}
    try:
        proc = subprocess.run([sys.executable, pairs_py, "time", "--set", PAIR_SET, *lib_args, "--out",
                               str(STAGE / "timings.json")], capture_output=True, text=True,
                              timeout=TIME_LIMIT_S, env=child_env)
        (STAGE / "time.log").write_text(proc.stdout + proc.stderr)
        log(f"timed: exit {proc.returncode}")
    except subprocess.TimeoutExpired:
        log(f"timing stopped at its limit of {TIME_LIMIT_S:.0f} s")
    metrics = cc.accepted(ncu, cc.kernelpro_metrics())
    env["kernelpro_metrics"] = len(metrics)
    (STAGE / "env.json").write_text(json.dumps(env, indent=1))
    rep = work / "pairs.ncu-rep"
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
           "--cache-control", "all", "--set", "full", "--metrics", ",".join(metrics), "--nvtx",
           "--import-source", "no", "-f", "-o", str(rep.with_suffix("")),
           sys.executable, pairs_py, "run", "--set", PAIR_SET, *lib_args]
    log("profiling")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PROFILE_LIMIT_S, env=child_env)
        output = proc.stdout + proc.stderr
        log(f"ncu exit {proc.returncode}")
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        output += f"\n<stopped at the limit of {PROFILE_LIMIT_S:.0f} s>"
        log("profiling stopped at its limit")
    (STAGE / "pairs.log").write_text(output[-200_000:])
    if rep.exists():
        (STAGE / "pairs.raw.csv").write_text(cc.export(ncu, rep, "--page", "raw"))
        (STAGE / "pairs.ranges.csv").write_text(
            cc.export(ncu, rep, "--page", "raw", "--print-nvtx-rename", "kernel", "--metrics", "gpu__time_duration.sum"))
        details = cc.export(ncu, rep, "--page", "details", "--print-details", "all") or cc.export(
            ncu, rep, "--page", "details")
        (STAGE / "pairs.rules.csv").write_text(cc.rules_only(details))
    else:
        log("no report written")
    tar = OUT / f"{NAME}.tar.gz"
    with tarfile.open(tar, "w:gz") as t:
        t.add(STAGE, arcname=NAME)
    log(f"wrote {tar} ({tar.stat().st_size // 1024} KiB)")
    return 0 if (STAGE / "timings.json").exists() and rep.exists() else 1


if __name__ == "__main__":
    sys.exit(main())
