#!/usr/bin/env python3
"""Capture the calibration pairs on a GPU: their times outside any profiler, and both sides of
every pair under Nsight Compute (the full set plus every metric a KernelPro micro-profiler
asks for), so that on the CPU ``benchmarks/ncu_calibration/run.py`` can set each "before"
kernel's estimated gains beside the gain its rewrite realized.

Run from the repository root on the GPU machine, with the distributions installed:

    python3 tools/capture/ncu_calibration/capture.py

``KPC_SET=corpus`` captures the rewrites of corpus kernels (``corpus_rewrites/``) instead, into
``$OUT/ncu_calibration_corpus.tar.gz`` (``ncu_calibration_corpus/``; no library is built);
``KPC_SET=corpus2`` their second round, into ``$OUT/ncu_calibration_corpus2.tar.gz``,
``KPC_SET=corpus3`` their third, into ``$OUT/ncu_calibration_corpus3.tar.gz``, and
``KPC_SET=corpus4`` their fourth, into ``$OUT/ncu_calibration_corpus4.tar.gz``.

Writes ``$OUT/ncu_calibration.tar.gz`` holding ``ncu_calibration/`` (written after the timing
and again after each ncu run, so that a call ended early returns what was done):

* ``timings.json``: per pair, the median time of before and after (CUDA events around
  single calls, the L2 flushed before each, 30 alternating calls each), their
  interquartile ranges, and whether their outputs agree; written after each pair, so that
  timing stopped at ``KPC_TIME_LIMIT_S`` keeps the pairs it finished (``complete`` says which);
* ``pairs_<n>.raw.csv``, ``pairs_<n>.ranges.csv``, ``pairs_<n>.rules.csv``, ``pairs_<n>.log``:
  the ncu exports as the corpus capture writes them, one group per ``KPC_CHUNK`` pairs (5;
  0: one group ``pairs`` for all), each profiled by its own ncu run, so that a run stopped at
  ``KPC_PROFILE_LIMIT_S`` loses only the pairs it had not finished (kernels named by their NVTX
  range ``<pair>:<before|after>`` in the ranges export);
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
CHUNK = int(os.environ.get("KPC_CHUNK", "5"))
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


def write_tar() -> None:
    """``$OUT/<name>.tar.gz`` from the stage as it is now (written again as groups end)."""
    tar = OUT / f"{NAME}.tar.gz"
    tmp = tar.with_name(tar.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as t:
        t.add(STAGE, arcname=NAME)
    tmp.replace(tar)
    log(f"wrote {tar} ({tar.stat().st_size // 1024} KiB)")


def profile_groups(names: list[str], chunk: int) -> list[tuple[str, list[str]]]:
    """The ncu runs: ``pairs`` for all when ``chunk`` is 0 or covers them, else ``pairs_<n>``
    for each ``chunk`` pairs in order."""
    if chunk <= 0 or chunk >= len(names):
        return [("pairs", list(names))]
    return [(f"pairs_{i // chunk + 1}", names[i:i + chunk]) for i in range(0, len(names), chunk)]


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
    listed = subprocess.run([sys.executable, pairs_py, "list", "--set", PAIR_SET], capture_output=True, text=True,
                            env=child_env, timeout=120)
    names = [line.split(":", 1)[0] for line in listed.stdout.splitlines() if ":" in line]
    if not names:
        raise SystemExit(f"error: pairs.py list gave no pairs: {listed.stderr.strip()[-500:]}")
    # the log is written as it comes: a timing stopped at its limit keeps what it printed
    with open(STAGE / "time.log", "w") as tlog:
        try:
            proc = subprocess.run([sys.executable, pairs_py, "time", "--set", PAIR_SET, *lib_args, "--out",
                                   str(STAGE / "timings.json")], stdout=tlog, stderr=subprocess.STDOUT,
                                  timeout=TIME_LIMIT_S, env=child_env)
            log(f"timed: exit {proc.returncode}")
        except subprocess.TimeoutExpired:
            log(f"timing stopped at its limit of {TIME_LIMIT_S:.0f} s")
    write_tar()
    metrics = cc.accepted(ncu, cc.kernelpro_metrics())
    env["kernelpro_metrics"] = len(metrics)
    env["profile_groups"] = {}
    (STAGE / "env.json").write_text(json.dumps(env, indent=1))
    deadline = time.monotonic() + PROFILE_LIMIT_S
    reports = 0
    for group, chunk in profile_groups(names, CHUNK):
        left = deadline - time.monotonic()
        if left < 10:
            log(f"{group}: not profiled, the profiling limit of {PROFILE_LIMIT_S:.0f} s is spent")
            env["profile_groups"][group] = {"pairs": chunk, "profiled": False}
            continue
        rep = work / f"{group}.ncu-rep"
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
               "--cache-control", "all", "--set", "full", "--metrics", ",".join(metrics), "--nvtx",
               "--import-source", "no", "-f", "-o", str(rep.with_suffix("")),
               sys.executable, pairs_py, "run", "--set", PAIR_SET, *lib_args, "--only", ",".join(chunk)]
        log(f"profiling {group}: {', '.join(chunk)}")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=left, env=child_env)
            output = proc.stdout + proc.stderr
            log(f"{group}: ncu exit {proc.returncode}")
        except subprocess.TimeoutExpired as exc:
            output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            output += f"\n<stopped at the limit of {PROFILE_LIMIT_S:.0f} s>"
            log(f"{group}: profiling stopped at its limit")
        (STAGE / f"{group}.log").write_text(output[-200_000:])
        env["profile_groups"][group] = {"pairs": chunk, "profiled": rep.exists()}
        if rep.exists():
            reports += 1
            (STAGE / f"{group}.raw.csv").write_text(cc.export(ncu, rep, "--page", "raw"))
            (STAGE / f"{group}.ranges.csv").write_text(
                cc.export(ncu, rep, "--page", "raw", "--print-nvtx-rename", "kernel", "--metrics",
                          "gpu__time_duration.sum"))
            details = cc.export(ncu, rep, "--page", "details", "--print-details", "all") or cc.export(
                ncu, rep, "--page", "details")
            (STAGE / f"{group}.rules.csv").write_text(cc.rules_only(details))
        else:
            log(f"{group}: no report written")
        (STAGE / "env.json").write_text(json.dumps(env, indent=1))
        write_tar()  # what is done so far, should the machine's call end before the next group
    (STAGE / "env.json").write_text(json.dumps(env, indent=1))  # with the groups not started
    write_tar()
    return 0 if (STAGE / "timings.json").exists() and reports else 1


if __name__ == "__main__":
    sys.exit(main())
