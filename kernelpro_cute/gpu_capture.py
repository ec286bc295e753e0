"""GPU evidence for kernelpro_cute (run on the H200 from the repository root).

What it does, in order, each step recorded even when a later one fails:
1. Builds the CuTe WGMMA candidate (examples/gemm_bf16_wgmma.py) with load_inline and
   ``kernelpro_cute.build_flags()`` in a fresh extensions directory; records the wall time.
2. Correctness against torch.matmul on fresh random bf16 inputs (3 seeds at 4096^3 plus
   two smaller shapes, one with fewer K tiles than pipeline stages): relative error
   ||C - C_ref||_F / ||C_ref||_F, computed in fp32, and the max abs error.
3. Timing against torch.matmul: CUDA events around each call, 20 warm-up calls then 50
   timed calls each, interleaved; median and IQR in ms; TFLOP/s = 2*M*N*K / median.
4. ``cuobjdump -sass`` of the built .so: HGMMA / UTMALDG / SYNCS instruction counts.
5. ``kernelpro eval`` and ``kernelpro analyze`` on the candidate when this kernelpro has
   them.
Everything goes to $OUT/cute.tar.gz (summary.json, sass.txt excerpt, logs).
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
# a result within this relative Frobenius error of torch.matmul counts as correct: bf16
# output rounding alone is ~2^-9 = 2e-3 relative per element; fp32 accumulation order
# differences are far smaller
REL_ERR_LIMIT = 1e-2


def _log(msg: str) -> None:
    print(msg, flush=True)


def _kernelpro_cmd() -> list[str]:
    exe = shutil.which("kernelpro")
    if exe:
        return [exe]
    return [sys.executable, "-c", "import sys; from kernelpro.cli import main; sys.exit(main())"]


def _load_candidate():
    import importlib.util

    spec = importlib.util.spec_from_file_location("kp_cute_candidate", CANDIDATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def step_build(work: Path, summary: dict):
    os.environ["TORCH_EXTENSIONS_DIR"] = str(work / "torch_extensions")
    import kernelpro_cute

    summary["corpus"] = str(kernelpro_cute.locate().root)
    summary["build_flags"] = kernelpro_cute.build_flags()
    cand = _load_candidate()
    t0 = time.perf_counter()
    ext = cand._extension()
    summary["build_s"] = round(time.perf_counter() - t0, 1)
    summary["so_path"] = ext.__file__
    _log(f"built {ext.__file__} in {summary['build_s']} s")
    return cand


def _rel_err(out, ref) -> tuple[float, float]:
    import torch

    diff = out.float() - ref.float()
    rel = (torch.linalg.norm(diff) / torch.linalg.norm(ref.float())).item()
    return rel, diff.abs().max().item()


def step_correctness(cand, summary: dict) -> None:
    import torch

    model = cand.ModelNew().cuda()
    checks = []
    shapes = [(4096, 4096, 4096, s) for s in (1, 2, 3)] + [
        (256, 384, 192, 4),  # 3 K tiles: fewer than the 4 pipeline stages
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
        _log(f"correctness {M}x{N}x{K} seed {seed}: rel {rel:.3e} max_abs {max_abs:.3e} -> {'ok' if ok else 'FAIL'}")
    try:
        model(torch.zeros(100, 64, device="cuda", dtype=torch.bfloat16),
              torch.zeros(64, 128, device="cuda", dtype=torch.bfloat16))
        summary["bad_shape_rejected"] = False
    except ValueError as exc:
        summary["bad_shape_rejected"] = str(exc)
    summary["correctness"] = checks
    summary["correct"] = all(c["passed"] for c in checks)


def step_timing(cand, summary: dict) -> None:
    import torch

    model = cand.ModelNew().cuda()
    M = N = K = 4096
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    fns = {"cute_wgmma": lambda: model(A, B), "torch_matmul": lambda: torch.matmul(A, B)}
    for _ in range(20):
        for fn in fns.values():
            fn()
    torch.cuda.synchronize()
    times = {k: [] for k in fns}
    for _ in range(50):
        for name, fn in fns.items():
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end))
    result = {}
    for name, ts in times.items():
        ts = sorted(ts)
        med = ts[len(ts) // 2]
        iqr = ts[(3 * len(ts)) // 4] - ts[len(ts) // 4]
        result[name] = {"median_ms": med, "iqr_ms": iqr, "n": len(ts),
                        "tflops": 2 * M * N * K / (med * 1e-3) / 1e12}
        _log(f"timing {name}: median {med:.4f} ms, IQR {iqr:.4f} ms, {result[name]['tflops']:.0f} TFLOP/s")
    result["speedup_vs_torch"] = result["torch_matmul"]["median_ms"] / result["cute_wgmma"]["median_ms"]
    summary["timing_4096"] = result
    summary["gpu_name"] = torch.cuda.get_device_name()


def step_sass(summary: dict, out_dir: Path) -> None:
    exe = shutil.which("cuobjdump")
    if exe is None:
        summary["sass"] = "cuobjdump not on PATH"
        return
    proc = subprocess.run([exe, "-sass", summary["so_path"]], capture_output=True, text=True,
                          timeout=120)
    text = proc.stdout
    counts = {}
    for op in ("HGMMA", "UTMALDG", "SYNCS", "WARPGROUP", "LDS", "STG", "BAR"):
        counts[op] = len(re.findall(rf"\b{op}[\.\s]", text))
    summary["sass_counts"] = counts
    summary["sass_rc"] = proc.returncode
    keep = [line for line in text.splitlines()
            if re.search(r"Function|HGMMA|UTMALDG|SYNCS|WARPGROUP|\.target|arch", line)]
    (out_dir / "sass_excerpt.txt").write_text("\n".join(keep[:4000]) + "\n")
    _log(f"sass: {counts}")


def _run_tool(args: list[str], out_file: Path, timeout_s: int) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        out_file.write_text(f"timed out after {timeout_s} s\n")
        return {"cmd": args, "rc": None, "timed_out": True}
    out_file.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr[-20000:])
    return {"cmd": args, "rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 1)}


def step_kernelpro(summary: dict, out_dir: Path) -> None:
    kp = _kernelpro_cmd()
    help_eval = subprocess.run(kp + ["eval", "--help"], capture_output=True, text=True)
    if help_eval.returncode != 0:
        summary["kernelpro_eval"] = "kernelpro eval not available: " + (help_eval.stderr.strip().splitlines() or [""])[-1]
    else:
        summary["kernelpro_eval"] = _run_tool(
            kp + ["eval", str(PROBLEM), str(CANDIDATE), "--device", "cuda", "--json"],
            out_dir / "kernelpro_eval.json", timeout_s=150)
        _log(f"kernelpro eval: {summary['kernelpro_eval']}")
    help_an = subprocess.run(kp + ["analyze", "--help"], capture_output=True, text=True)
    if help_an.returncode == 0 and summary.get("so_path"):
        summary["kernelpro_analyze"] = _run_tool(
            kp + ["analyze", summary["so_path"]], out_dir / "kernelpro_analyze.txt", timeout_s=60)
        _log(f"kernelpro analyze: {summary['kernelpro_analyze']}")


def main() -> int:
    out_root = Path(os.environ.get("OUT", "."))
    out_dir = Path(tempfile.mkdtemp(prefix="cute_out_"))
    work = Path(tempfile.mkdtemp(prefix="kp_cute_build_"))
    summary: dict = {"started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    cand = None
    for name, step in (("build", lambda: step_build(work, summary)),
                       ("correctness", lambda: step_correctness(cand, summary)),
                       ("timing", lambda: step_timing(cand, summary)),
                       ("sass", lambda: step_sass(summary, out_dir)),
                       ("kernelpro", lambda: step_kernelpro(summary, out_dir))):
        if name in ("correctness", "timing", "sass") and cand is None:
            summary.setdefault("skipped", []).append(name)
            continue
        try:
            value = step()
            if name == "build":
                cand = value
        except Exception as exc:  # record and keep going: every step's evidence matters
            summary.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
            (out_dir / f"error_{name}.txt").write_text(traceback.format_exc())
            _log(f"step {name} failed: {type(exc).__name__}: {str(exc)[:2000]}")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    out_root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out_root / "cute.tar.gz", "w:gz") as tar:
        for f in sorted(out_dir.iterdir()):
            tar.add(f, arcname=f.name)
    # short table
    _log("\n=== kernelpro_cute GPU capture ===")
    _log(f"gpu            {summary.get('gpu_name')}")
    _log(f"build_s        {summary.get('build_s')}")
    _log(f"correct        {summary.get('correct')}")
    t = summary.get("timing_4096", {})
    if t:
        _log(f"cute  ms       {t['cute_wgmma']['median_ms']:.4f}  ({t['cute_wgmma']['tflops']:.0f} TFLOP/s)")
        _log(f"torch ms       {t['torch_matmul']['median_ms']:.4f}  ({t['torch_matmul']['tflops']:.0f} TFLOP/s)")
        _log(f"speedup        {t['speedup_vs_torch']:.3f}")
    _log(f"sass           {summary.get('sass_counts')}")
    _log(f"errors         {summary.get('errors', {})}")
    return 0 if summary.get("correct") else 1


if __name__ == "__main__":
    sys.exit(main())
