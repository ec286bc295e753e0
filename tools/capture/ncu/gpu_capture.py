#!/usr/bin/env python3
"""GPU capture for the ncu plugin's validation: fixtures, stage timings, calibration.

Run from the repository root on the GPU machine:

    python3 tools/capture/ncu/gpu_capture.py

Writes ``$OUT/ncu.tar.gz`` (at most 12 MB) holding:

* ``env.json``, ``capture.log`` (everything, including every ncu invocation's output),
  ``metrics_query.txt`` (``ncu --query-metrics`` of this GPU), ``sections.txt``;
* ``suite/``: every validation case in one forward, profiled by the real NcuCollector,
  stage 1 and stage 2 (stage 2 asks every micro-profiler's metrics, Source Counters with
  source import), as ``.ncu-rep`` plus raw- and details-page CSV exports; ``cases_io.json``
  (per-case input/output bytes);
* ``full/``: a ``--set full`` report of two kernels, to check metric names offline;
* ``cases/<case>/``: per-candidate stage 1 + gated stage 2 for as many cases as the time
  budget allows, with ``bench.json`` (wall seconds per stage);
* ``calibration.json``: ``kernelpro calibrate``'s measurement.

Clocks, power and modes are never changed (ncu always runs with --clock-control none).
``KP_NCU_PARTS=cases KP_NCU_FIRST=a,b`` runs only the per-candidate part, those cases first.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

import attrs

T0 = time.perf_counter()
BUDGET_S = float(os.environ.get("KP_NCU_BUDGET_S", "220"))
# which parts run (comma-separated): suite, full, cases; KP_NCU_FIRST orders the cases
PARTS = set(os.environ.get("KP_NCU_PARTS", "suite,full,cases").split(","))
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
PLUGIN = REPO / "kernelpro_plugins_ncu"
for p in (PLUGIN / "src", REPO / "kernelpro_core" / "src", HERE / "gpu_kernels"):
    sys.path.insert(0, str(p))
OUT = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="kp_ncu_out_"))
STAGE = Path(tempfile.mkdtemp(prefix="kp_ncu_")) / "ncu"
WORK = Path(tempfile.mkdtemp(prefix="kp_ncu_work_"))
STAGE.mkdir(parents=True)
LOG = open(STAGE / "capture.log", "w")
SUMMARY: list[str] = []
MAX_TAR = 12 * 1000 * 1000


def elapsed() -> float:
    return time.perf_counter() - T0


def remaining(share: float) -> float:
    """A timeout: ``share`` of the budget left (at least 20 s)."""
    return max(20.0, (BUDGET_S - elapsed()) * share)


def log(msg: str) -> None:
    line = f"[{elapsed():6.1f}s] {msg}"
    print(line, flush=True)
    LOG.write(line + "\n")
    LOG.flush()


def sh(argv: list[str], timeout: float = 120, **kw) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
        return proc.stdout + proc.stderr
    except Exception as exc:  # logged, never fatal
        return f"<{type(exc).__name__}: {exc}>"


def step(name: str):
    """Decorator: run a step, log its time and any exception, never stop the capture."""
    def wrap(fn):
        def run(*a, **k):
            t = time.perf_counter()
            log(f"== {name}")
            try:
                return fn(*a, **k)
            except Exception:
                log(f"!! {name} failed:\n{traceback.format_exc()}")
                SUMMARY.append(f"{name}: FAILED")
                return None
            finally:
                log(f"== {name} done in {time.perf_counter() - t:.1f}s")
        return run
    return wrap


def copy_outputs(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.suffix in (".ncu-rep", ".csv", ".json", ".log"):
            shutil.copy2(f, dst / f.name)


@step("environment")
def environment() -> dict:
    import torch

    env = {
        "python": sys.version.split()[0], "platform": platform.platform(),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "capability": list(torch.cuda.get_device_capability(0)) if torch.cuda.is_available() else None,
        "nvidia_smi": sh(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
                          "clocks.mem,power.draw,temperature.gpu", "--format=csv"]),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    from kernelpro_plugins_ncu.collector import find_ncu

    ncu = find_ncu()
    env["ncu"] = ncu
    env["ncu_version"] = sh([ncu, "--version"]) if ncu else None
    (STAGE / "env.json").write_text(json.dumps(env, indent=1))
    log(json.dumps(env, indent=1))
    return env


@step("build extension")
def build_extension() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    os.environ["TORCH_EXTENSIONS_DIR"] = str(WORK / "torch_extensions")
    import kp_ncu_ext

    module = kp_ncu_ext.load(verbose=False)
    so = module.__file__
    os.environ["KP_NCU_EXT_SO"] = so
    log(f"extension: {so}")
    return so


@step("sanity check of the cases")
def sanity_and_io() -> None:
    import torch
    import kp_ncu_cases as C
    from kernelpro.evaluate.forward import tensor_bytes

    io = {}
    for case in C.CASES.values():
        try:
            xs = case.inputs()
            out = C.run(case.name, *xs)
            torch.cuda.synchronize()
            io[case.name] = {"input_bytes": tensor_bytes(xs), "output_bytes": tensor_bytes(out)}
            if case.reference is not None:
                ref = case.reference(*xs)
                err = (out.float() - ref.float()).abs().max().item()
                io[case.name]["max_abs_err"] = err
            log(f"{case.name}: {io[case.name]}")
            del xs, out
        except Exception as exc:
            log(f"{case.name}: sanity FAILED {type(exc).__name__}: {exc}")
    torch.cuda.empty_cache()
    (STAGE / "cases_io.json").write_text(json.dumps(io, indent=1))


@step("ncu metric catalogue")
def metric_catalogue(ncu: str) -> None:
    from kernelpro_plugins_ncu import metrics as M

    (STAGE / "metrics_query.txt").write_text(sh([ncu, "--query-metrics"], timeout=60))
    (STAGE / "sections.txt").write_text(sh([ncu, "--list-sections"], timeout=60))
    bases = sorted({M.base_name(m) for m in (*M.STAGE1_METRICS, *M.STAGE2_ALL)})
    (STAGE / "metrics_suffixes.txt").write_text(
        sh([ncu, "--query-metrics", "--query-metrics-mode", "suffix", "--metrics", ",".join(bases)],
           timeout=60))


def micro_profiler_classes() -> list:
    try:
        from kernelpro_plugins_ncu.micro import ALL_MICRO_PROFILERS

        return list(ALL_MICRO_PROFILERS)
    except Exception as exc:
        log(f"micro-profilers not importable ({type(exc).__name__}: {exc}); stage 2 uses STAGE2_ALL")
        return []


def all_stage2_metrics() -> list[str]:
    from kernelpro_plugins_ncu import metrics as M

    names = list(M.STAGE2_ALL)
    for cls in micro_profiler_classes():
        names += list(cls.metrics)
    return M.unique(names)


def target_for(name: str):
    import kp_ncu_cases as C
    from kernelpro.api import ProfileTarget

    problem, candidate = C.write_pair(name, WORK / "pairs")
    env = {k: os.environ[k] for k in ("KP_NCU_EXT_SO", "TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST")
           if k in os.environ}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PLUGIN / "src"), str(REPO / "kernelpro_core" / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return ProfileTarget(problem_path=problem, candidate_path=candidate, device="cuda",
                         workdir=WORK / "runs" / name, python=sys.executable, env=env)


def describe(data) -> str:
    return (f"{len(data.kernels)} kernels, wall {data.payload.get('wall_s', 0):.1f}s, notes={list(data.notes)}")


@step("suite: stage 1 and stage 2")
def suite() -> None:
    from kernelpro_plugins_ncu.collector import NcuCollector, NcuSettings
    from kernelpro_plugins_ncu import report as R

    target = target_for("suite")
    collector = NcuCollector(NcuSettings(export_csv=True, warmup=1, timeout_s=max(60.0, remaining(0.4))))
    reason = collector.unavailable_reason(target)
    if reason:
        log(f"collector unavailable: {reason}")
        SUMMARY.append(f"collector unavailable: {reason}")
        return
    s1 = collector.collect(target, 1)
    log(f"suite stage 1: {describe(s1)}")
    for k in s1.kernels:
        log(f"   {k.name[:70]:70s} {k.duration_ns or 0:12.0f} ns  {len(k.metrics)} metrics")
    metrics = all_stage2_metrics()
    collector.settings = attrs.evolve(collector.settings, timeout_s=max(90.0, remaining(0.6)))
    s2 = collector.collect(target, 2, metrics)
    log(f"suite stage 2 ({len(metrics)} metrics asked): {describe(s2)}")
    SUMMARY.append(f"suite: stage1 {s1.payload['wall_s']:.1f}s ({len(s1.kernels)} kernels, {passes(s1):.0f} passes), "
                   f"stage2 {s2.payload['wall_s']:.1f}s ({passes(s2):.0f} passes)")
    copy_outputs(target.workdir, STAGE / "suite")
    from kernelpro_plugins_ncu.collector import find_ncu

    ncu = find_ncu()
    for stage in (1, 2):
        rep = target.workdir / f"ncu_stage{stage}.ncu-rep"
        if rep.exists():
            try:
                (STAGE / "suite" / f"ncu_stage{stage}.details.csv").write_text(
                    R.ncu_import_csv(rep, ncu, "details"))
            except Exception as exc:
                log(f"details export failed: {exc}")
    (STAGE / "suite" / "kernels.json").write_text(json.dumps(
        [{"name": k.name, "duration_ns": k.duration_ns, "n_metrics": len(k.metrics)} for k in s2.kernels],
        indent=1))


@step("calibration")
def calibration() -> None:
    from kernelpro_plugins_ncu.calibrate import measure

    record = measure()
    (STAGE / "calibration.json").write_text(json.dumps(record, indent=1, sort_keys=True))
    SUMMARY.append(f"calibration: copy {record['dram_bandwidth_gbs']:.0f} GB/s, "
                   f"bf16 {record.get('bf16_tflops', 0):.0f} TFLOP/s, fp32 {record.get('fp32_tflops', 0):.1f}")
    log(json.dumps(record, indent=1))


@step("--set full on two kernels")
def full_set(ncu: str) -> None:
    from kernelpro.evaluate import forward

    target = target_for("suite")
    out = WORK / "full"
    out.mkdir(exist_ok=True)
    rep = out / "full.ncu-rep"
    argv = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--set", "full", "--import-source", "yes", "--kernel-name", "regex:kp_transpose_naive|kp_sgemm_fp32",
            "--launch-count", "2", "-f", "--export", str(rep)]
    argv += forward.command(target.problem_path, target.candidate_path, "cuda", warmup=1, iters=1,
                            python=sys.executable)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (PLUGIN / "src", REPO / "kernelpro_core" / "src"))
    t = time.perf_counter()
    text = sh(argv, timeout=120, env=env)
    log(f"full set: {time.perf_counter() - t:.1f}s\n{text[-3000:]}")
    (out / "full.log").write_text(text)
    if rep.exists():
        raw = sh([ncu, "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"], timeout=60)
        (out / "full.raw.csv").write_text(raw)
    copy_outputs(out, STAGE / "full")


def passes(data) -> float:
    """Replay passes ncu needed, summed over the profiled kernels (profiler__replayer_passes)."""
    return sum(k.metrics.get("profiler__replayer_passes", 0.0) for k in data.kernels)


def gated(bottleneck) -> tuple[list[str], list[str]]:
    from kernelpro_plugins_ncu import metrics as M

    names, tools = [], []
    for cls in micro_profiler_classes():
        inst = cls()
        if inst.applies(bottleneck):
            names += list(cls.metrics)
            tools.append(cls.name)
    return M.unique(names), tools


@step("per-candidate stage 1 + gated stage 2")
def per_candidate() -> None:
    from kernelpro.api import ProfileContext
    from kernelpro_plugins_ncu.collector import NcuCollector, NcuSettings

    order = ["transpose_naive", "matmul_bf16", "copy_vec4", "tiny_grid", "chain_unfused",
             "sgemm_fp32", "transpose_conflict", "pointer_chase", "spill", "divergent",
             "tail_grid", "smem_hog", "occupancy_gap", "unfused_fp32", "strided_reuse",
             "fused_fp32", "transpose_padded", "chain_fused"]
    first = [c for c in os.environ.get("KP_NCU_FIRST", "").split(",") if c in order]
    order = first + [c for c in order if c not in first]
    try:
        from kernelpro_plugins_ncu.classifier import RooflineClassifier

        classifier = RooflineClassifier()
    except Exception as exc:
        log(f"classifier not importable: {exc}")
        classifier = None
    import torch
    from kernelpro_plugins_ncu.classifier import find_spec

    gpu = find_spec(torch.cuda.get_device_name(0))
    log(f"GPU spec for gating: {gpu}")
    bench = []
    for name in order:
        if elapsed() > BUDGET_S - 30:
            log(f"time budget reached: skipping {name} and later cases")
            break
        try:
            target = target_for(name)
            collector = NcuCollector(NcuSettings(export_csv=True, warmup=1, timeout_s=remaining(0.5)))
            s1 = collector.collect(target, 1)
            bottleneck = None
            if classifier is not None:
                try:
                    bottleneck = classifier.classify({"kernel": s1}, ProfileContext(gpu=gpu, device="cuda"))
                except Exception as exc:
                    log(f"{name}: classify failed {type(exc).__name__}: {exc}")
            metrics, tools = gated(bottleneck)
            if not metrics:
                metrics = all_stage2_metrics()
            s2 = collector.collect(target, 2, metrics)
            row = {"case": name, "stage1_s": round(s1.payload["wall_s"], 2),
                   "stage2_s": round(s2.payload["wall_s"], 2), "stage2_metrics": len(metrics),
                   "kernels": len(s1.kernels), "bottleneck": getattr(bottleneck, "kind", None),
                   "stage1_replay_passes": passes(s1), "stage2_replay_passes": passes(s2),
                   "gated_tools": tools, "notes": list(s1.notes) + list(s2.notes)}
            bench.append(row)
            log(f"{name}: {row}")
            copy_outputs(target.workdir, STAGE / "cases" / name)
        except Exception as exc:
            log(f"{name}: FAILED {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    (STAGE / "bench.json").write_text(json.dumps(bench, indent=1))
    for row in bench:
        SUMMARY.append(f"{row['case']:18s} stage1 {row['stage1_s']:5.1f}s  stage2 {row['stage2_s']:5.1f}s "
                       f"({row['stage2_metrics']} metrics)  {row['bottleneck']}")


def pack() -> None:
    LOG.flush()
    tar = OUT / "ncu.tar.gz"
    while True:
        with tarfile.open(tar, "w:gz") as tf:
            tf.add(STAGE, arcname="ncu")
        size = tar.stat().st_size
        if size <= MAX_TAR:
            break
        reps = sorted(STAGE.rglob("*.ncu-rep"), key=lambda p: p.stat().st_size, reverse=True)
        if not reps:
            break
        log(f"tarball {size} B over the limit: dropping {reps[0].relative_to(STAGE)}")
        reps[0].unlink()
    print(f"wrote {tar} ({tar.stat().st_size} bytes)")


def main() -> int:
    env = environment() or {}
    ncu = env.get("ncu")
    try:
        if build_extension() is None:
            return 1
        calibration()
        sanity_and_io()
        if ncu and "suite" in PARTS:
            metric_catalogue(ncu)
            suite()
        if ncu and "full" in PARTS and elapsed() < BUDGET_S - 40:
            full_set(ncu)
        if ncu and "cases" in PARTS:
            per_candidate()
    finally:
        log("summary:\n" + "\n".join(SUMMARY))
        pack()
        print("\n".join(["", "=== ncu capture summary ===", *SUMMARY, f"total {elapsed():.0f}s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
