"""GPU evidence for kernelpro_cute (run on the H200 from the repository root):

    python3 tools/capture/cute/gpu_capture.py

Two CuTe candidates: ``examples/gemm_bf16_wgmma.py`` (the evidence candidate: 128x128
tile, TMA + WGMMA, 2 warpgroups) and ``examples/gemm_bf16_wgmma_ws.py`` (warp-specialized
128x256 tile, 3 warpgroups). The capture keeps to a deadline (``KP_CUTE_DEADLINE_S``,
default 138 s, for a 150 s slot): every wait is cut to what is left and
$OUT/cute.tar.gz is rewritten after every step. Steps, each recorded even when a later
one fails:

1. Build both with load_inline and ``kernelpro_cute.build_flags()`` in a fresh extensions
   directory, in two processes at once; wall time of each build (concurrent builds and
   the eval's own build share the CPU, so these are upper bounds of a lone build).
2. Per candidate, in one child process with a time limit (a deadlocked kernel cannot
   hang the capture; results are saved after every measurement): correctness against torch.matmul on fresh random bf16 inputs (3 seeds at
   4096^3 plus two smaller shapes, one with fewer K tiles than pipeline stages), relative
   error ||C - C_ref||_F / ||C_ref||_F in fp32 and max abs error; then timing at 4096^3
   against torch.matmul: CUDA events around each call, 20 warm-up calls then 50 timed
   calls each, interleaved; median and IQR in ms; TFLOP/s = 2*M*N*K / median.
3. ``cuobjdump -sass`` of each built .so: HGMMA / UTMALDG / SYNCS ... instruction counts.
4. ``kernelpro eval`` of the evidence candidate (started first, in the background, so its
   build overlaps ours; waited for before our GPU work while the deadline allows, else
   recorded as overlapping) and ``kernelpro analyze`` of its .so, when this kernelpro has
   those commands.

Everything goes to $OUT/cute.tar.gz (summary.json, SASS excerpts, tool outputs, logs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBLEM = HERE / "examples" / "gemm_bf16_problem.py"
CANDIDATE = HERE / "examples" / "gemm_bf16_wgmma.py"
CANDIDATES = {
    "cute_wgmma": CANDIDATE,
    "cute_wgmma_ws": HERE / "examples" / "gemm_bf16_wgmma_ws.py",
}
# a result within this relative Frobenius error of torch.matmul counts as correct: bf16
# output rounding alone gives ~2^-9 = 2e-3 relative per element; differences in fp32
# accumulation order are far smaller; a wrong tile or layout gives O(1)
REL_ERR_LIMIT = 1e-2
#: the whole capture ends within this many seconds (the batch gives it 150 s); every
#: step's time limit is cut to what is left, and the tarball is rewritten after each step
DEADLINE_S = float(os.environ.get("KP_CUTE_DEADLINE_S", "138"))
T0 = time.perf_counter()


def remaining() -> float:
    return DEADLINE_S - (time.perf_counter() - T0)


def _log(msg: str) -> None:
    print(msg, flush=True)


def _kernelpro_cmd() -> list[str]:
    exe = shutil.which("kernelpro")
    if exe:
        return [exe]
    return [sys.executable, "-c", "import sys; from kernelpro.cli import main; sys.exit(main())"]


def _load_candidate(name: str, path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"kp_{name}_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- 1. build ------------------------------------------------------------------------------


def build_main(name: str) -> int:
    """Child: import (and so build) one candidate; print the .so path on the last line."""
    module = _load_candidate(name, CANDIDATES[name])
    print(module._extension().__file__, flush=True)
    return 0


def start_builds(summary: dict, out_dir: Path) -> dict:
    """Start building every candidate, each in its own process (nvcc is single-threaded
    per translation unit and the machine has cores to spare)."""
    import kernelpro_cute

    summary["corpus"] = str(kernelpro_cute.locate().root)
    summary["build_flags"] = kernelpro_cute.build_flags()
    summary["builds"] = {}
    procs = {}
    for name in CANDIDATES:
        log = open(out_dir / f"build_{name}.log", "w+")
        procs[name] = (subprocess.Popen([sys.executable, __file__, "--build", name], stdout=log,
                                        stderr=subprocess.STDOUT, text=True),
                       log, time.perf_counter())
    return procs


def finish_builds(procs: dict, summary: dict, reserve_s: float) -> None:
    """Wait for the builds, leaving ``reserve_s`` seconds of the deadline for the rest."""
    for name, (proc, log, t0) in procs.items():
        try:
            rc = proc.wait(timeout=max(1.0, remaining() - reserve_s))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = "timeout"
        seconds = round(time.perf_counter() - t0, 1)
        log.seek(0)
        text = log.read()
        log.close()
        lines = text.strip().splitlines()
        if rc == 0 and lines and lines[-1].endswith(".so"):
            summary["builds"][name] = {"so_path": lines[-1], "build_s": seconds}
            _log(f"built {name}: {lines[-1]} in {seconds} s")
        else:
            summary["builds"][name] = {"error": f"rc {rc} after {seconds} s: {text[-4000:]}"}
            _log(f"build {name} failed (rc {rc}): {text[-3000:]}")


# --- 2. correctness and timing (child process) -------------------------------------------


def _rel_err(out, ref) -> tuple[float, float]:
    import torch

    diff = out.float() - ref.float()
    rel = (torch.linalg.norm(diff) / torch.linalg.norm(ref.float())).item()
    return rel, diff.abs().max().item()


def child_main(names: list[str], result_path: Path) -> int:
    """Correctness then timing of each candidate in turn, in one process (one torch/CUDA
    start-up); writes JSON to ``result_path`` after every measurement, so what was done
    survives a hang that gets this process killed."""
    import torch

    results: dict = {"gpu_name": torch.cuda.get_device_name()}

    def save() -> None:
        result_path.write_text(json.dumps(results, indent=2))

    rc = 0
    for name in names:
        result = results[name] = {}
        try:
            rc |= _check_and_time(name, result, save)
        except Exception as exc:
            result["error"] = f"{type(exc).__name__}: {str(exc)[:3000]}"
            save()
            rc = 1
    return rc


def _check_and_time(name: str, result: dict, save) -> int:
    import torch

    cand = _load_candidate(name, CANDIDATES[name])
    model = cand.ModelNew().cuda()
    checks = []
    shapes = [(4096, 4096, 4096, s) for s in (1, 2, 3)] + [
        (256, 512, 192, 4),  # 3 K tiles: fewer than the 4 pipeline stages
        (1024, 512, 2048, 5),
    ]
    for M, N, K, seed in shapes:
        g = torch.Generator(device="cuda").manual_seed(seed)
        A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
        B = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=g)
        out = model(A, B)
        torch.cuda.synchronize()
        ref = torch.matmul(A, B)
        rel, max_abs = _rel_err(out, ref)
        ok = bool(rel < REL_ERR_LIMIT and torch.isfinite(out).all().item())
        checks.append({"M": M, "N": N, "K": K, "seed": seed, "rel_err": rel,
                       "max_abs_err": max_abs, "ref_abs_max": ref.float().abs().max().item(),
                       "passed": ok})
        _log(f"correctness {name} {M}x{N}x{K} seed {seed}: rel {rel:.3e} max_abs {max_abs:.3e} -> {'ok' if ok else 'FAIL'}")
        result["checks"] = checks
        save()
    try:
        model(torch.ones(100, 64, device="cuda", dtype=torch.bfloat16),
              torch.ones(64, 128, device="cuda", dtype=torch.bfloat16))
        result["bad_shape_rejected"] = False
    except ValueError as exc:
        result["bad_shape_rejected"] = str(exc)
    result["passed"] = all(c["passed"] for c in checks)
    save()
    if not result["passed"]:
        return 1

    M = N = K = 4096
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    fns = {name: lambda: model(A, B), "torch_matmul": lambda: torch.matmul(A, B)}
    for _ in range(20):
        for fn in fns.values():
            fn()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(50):
        for key, fn in fns.items():
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times[key].append(start.elapsed_time(end))
    timing = {}
    for key, ts in times.items():
        ts = sorted(ts)
        med = ts[len(ts) // 2]
        timing[key] = {"median_ms": med, "iqr_ms": ts[(3 * len(ts)) // 4] - ts[len(ts) // 4],
                       "n": len(ts), "tflops": 2 * M * N * K / (med * 1e-3) / 1e12}
        _log(f"timing {key}: median {med:.4f} ms, {timing[key]['tflops']:.0f} TFLOP/s")
    timing[name]["speedup_vs_torch"] = timing["torch_matmul"]["median_ms"] / timing[name]["median_ms"]
    result["timing_4096"] = timing
    save()
    return 0


def step_runs(summary: dict, out_dir: Path, reserve_s: float) -> None:
    """One child process runs every built candidate (evidence candidate first)."""
    names = [n for n, b in summary.get("builds", {}).items() if "so_path" in b]
    if not names:
        return
    result_path = out_dir / "runs.json"
    t0 = time.perf_counter()
    log_path = out_dir / "runs.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, __file__, "--child", ",".join(names), str(result_path)],
                                stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            rc = proc.wait(timeout=max(5.0, remaining() - reserve_s))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = "timeout"
    runs = json.loads(result_path.read_text()) if result_path.exists() else {}
    summary["runs"] = {n: runs.get(n, {}) for n in names}
    summary["runs_rc"] = rc
    summary["runs_wall_s"] = round(time.perf_counter() - t0, 1)
    summary["gpu_name"] = runs.get("gpu_name")
    _log(f"runs: rc {rc} in {summary['runs_wall_s']} s: " +
         ", ".join(f"{n} passed={summary['runs'][n].get('passed')}" for n in names))
    if rc != 0:
        _log(log_path.read_text()[-3000:])
    summary["correct"] = bool(summary["runs"].get("cute_wgmma", {}).get("passed"))


# --- 3. SASS -------------------------------------------------------------------------------


def step_sass(summary: dict, out_dir: Path) -> None:
    exe = shutil.which("cuobjdump")
    if exe is None:
        summary["sass_counts"] = "cuobjdump not on PATH"
        return
    summary["sass_counts"] = {}
    for name, build in summary.get("builds", {}).items():
        if "so_path" not in build:
            continue
        proc = subprocess.run([exe, "-sass", build["so_path"]], capture_output=True, text=True,
                              timeout=max(3.0, min(30.0, remaining() - 8)))
        text = proc.stdout
        counts: dict = {"rc": proc.returncode}
        for op in ("HGMMA", "UTMALDG", "SYNCS", "WARPGROUP", "USETMAXREG", "STG", "BAR"):
            counts[op] = len(re.findall(rf"\b{op}[\.\s]", text))
        summary["sass_counts"][name] = counts
        keep = [line for line in text.splitlines()
                if re.search(r"Function|HGMMA|UTMALDG|SYNCS|WARPGROUP|USETMAXREG|\.target|arch", line)]
        (out_dir / f"sass_excerpt_{name}.txt").write_text("\n".join(keep[:4000]) + "\n")
        _log(f"sass {name}: {counts}")


# --- 4. kernelpro commands -------------------------------------------------------------------


def _run_tool(args: list[str], out_file: Path, timeout_s: int) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        out_file.write_text(f"timed out after {timeout_s} s\n")
        return {"cmd": args, "rc": None, "timed_out": True}
    out_file.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr[-20000:])
    return {"cmd": args, "rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 1)}


def start_eval(summary: dict, out_dir: Path):
    """Start ``kernelpro eval`` of the evidence candidate in the background (its own
    build overlaps ours); None when this kernelpro has no eval command."""
    kp = _kernelpro_cmd()
    help_eval = subprocess.run(kp + ["eval", "--help"], capture_output=True, text=True)
    if help_eval.returncode != 0:
        last = (help_eval.stderr.strip().splitlines() or [""])[-1]
        summary["kernelpro_eval"] = f"kernelpro eval not available: {last}"
        return None
    args = kp + ["eval", str(PROBLEM), str(CANDIDATE), "--device", "cuda", "--json"]
    summary["kernelpro_eval"] = {"cmd": args}
    out = open(out_dir / "kernelpro_eval.json", "w")
    err = open(out_dir / "kernelpro_eval.stderr.txt", "w")
    proc = subprocess.Popen(args, stdout=out, stderr=err, text=True)
    return proc, time.perf_counter(), out, err


def wait_eval(handle, summary: dict, until_remaining_s: float, kill: bool) -> bool:
    """Wait for the eval started by :func:`start_eval` while more than
    ``until_remaining_s`` seconds of the deadline are left; kill it at that point when
    ``kill``. True when it has finished (or never started)."""
    if handle is None or "rc" in summary["kernelpro_eval"]:
        return True
    proc, t0, out, err = handle
    try:
        rc = proc.wait(timeout=max(0.5, remaining() - until_remaining_s))
    except subprocess.TimeoutExpired:
        if not kill:
            return False
        proc.kill()
        proc.wait()
        rc = "killed at the capture deadline"
    out.close()
    err.close()
    summary["kernelpro_eval"].update(rc=rc, wall_s=round(time.perf_counter() - t0, 1))
    _log(f"kernelpro eval: rc {rc} in {summary['kernelpro_eval']['wall_s']} s")
    return True


def step_analyze(summary: dict, out_dir: Path) -> None:
    kp = _kernelpro_cmd()
    so = summary.get("builds", {}).get("cute_wgmma", {}).get("so_path")
    if not so or remaining() < 12:
        return
    help_an = subprocess.run(kp + ["analyze", "--help"], capture_output=True, text=True)
    if help_an.returncode == 0:
        summary["kernelpro_analyze"] = _run_tool(
            kp + ["analyze", so], out_dir / "kernelpro_analyze.txt",
            timeout_s=int(max(3, remaining() - 5)))
        _log(f"kernelpro analyze: {summary['kernelpro_analyze']}")


# --- driver --------------------------------------------------------------------------------


def _pack(summary: dict, out_dir: Path, out_root: Path) -> None:
    """(Re)write $OUT/cute.tar.gz with everything gathered so far."""
    summary["wall_s"] = round(time.perf_counter() - T0, 1)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    out_root.mkdir(parents=True, exist_ok=True)
    tmp = out_root / "cute.tar.gz.part"
    with tarfile.open(tmp, "w:gz") as tar:
        for f in sorted(out_dir.iterdir()):
            tar.add(f, arcname=f.name)
    os.replace(tmp, out_root / "cute.tar.gz")


def main() -> int:
    out_root = Path(os.environ.get("OUT", "."))
    out_dir = Path(tempfile.mkdtemp(prefix="cute_out_"))
    work = Path(tempfile.mkdtemp(prefix="kp_cute_build_"))
    os.environ["TORCH_EXTENSIONS_DIR"] = str(work / "torch_extensions")
    summary: dict = {"started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                     "deadline_s": DEADLINE_S}

    def guarded(name, fn):
        try:
            return fn()
        except Exception as exc:  # record and keep going: every step's evidence matters
            summary.setdefault("errors", {})[name] = f"{type(exc).__name__}: {str(exc)[:3000]}"
            (out_dir / f"error_{name}.txt").write_text(traceback.format_exc())
            _log(f"step {name} failed: {type(exc).__name__}: {str(exc)[:3000]}")
        finally:
            _pack(summary, out_dir, out_root)

    # the eval's build and ours overlap on the CPU; its GPU phase is given time alone
    # before ours starts, as long as the deadline allows
    eval_handle = guarded("eval_start", lambda: start_eval(summary, out_dir))
    builds = guarded("build_start", lambda: start_builds(summary, out_dir)) or {}
    guarded("build", lambda: finish_builds(builds, summary, reserve_s=35))
    eval_done = guarded("eval_wait", lambda: wait_eval(eval_handle, summary, 32, kill=False))
    summary["eval_overlapped_our_gpu_runs"] = not eval_done
    if any("so_path" in b for b in summary.get("builds", {}).values()):
        guarded("runs", lambda: step_runs(summary, out_dir, reserve_s=12))
        guarded("sass", lambda: step_sass(summary, out_dir))
    guarded("eval_finish", lambda: wait_eval(eval_handle, summary, 4, kill=True))
    guarded("analyze", lambda: step_analyze(summary, out_dir))

    _log("\n=== kernelpro_cute GPU capture ===")
    _log(f"gpu            {summary.get('gpu_name')}")
    for name, build in summary.get("builds", {}).items():
        run = summary.get("runs", {}).get(name, {})
        timing = run.get("timing_4096", {})
        line = f"{name:<14} build {build.get('build_s', 'FAILED')!s:>6} s  correct {run.get('passed')!s:<5}"
        if name in timing:
            t, ref = timing[name], timing["torch_matmul"]
            line += (f"  {t['median_ms']:.4f} ms {t['tflops']:.0f} TFLOP/s  torch {ref['median_ms']:.4f} ms"
                     f" {ref['tflops']:.0f} TFLOP/s  x{t['speedup_vs_torch']:.3f}")
        sass = summary.get("sass_counts", {})
        if isinstance(sass, dict) and name in sass:
            line += f"  HGMMA {sass[name].get('HGMMA')} UTMALDG {sass[name].get('UTMALDG')}"
        _log(line)
    ev = summary.get("kernelpro_eval")
    _log(f"kernelpro eval {ev if isinstance(ev, str) else {k: ev.get(k) for k in ('rc', 'wall_s')}}")
    _log(f"errors         {summary.get('errors', {})}")
    _log(f"wall           {round(time.perf_counter() - T0, 1)} s (deadline {DEADLINE_S:g} s)")
    return 0 if summary.get("correct") else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--build":
        sys.exit(build_main(sys.argv[2]))
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.exit(child_main(sys.argv[2].split(","), Path(sys.argv[3])))
    sys.exit(main())
