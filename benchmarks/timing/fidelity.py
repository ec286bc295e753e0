"""Timing fidelity: the evaluator's timer on one >= 1 ms kernel, in separate processes and
against Nsight Compute.

    python benchmarks/timing/fidelity.py --out DIR [--procs 10] [--ncu]

Kernel: an fp32 GEMM (4096 x 4096 x 4096, TF32 off: ~137 GFLOP, a few ms on an H100/H200).

* ``--procs`` separate processes each time it with :class:`kernelpro.evaluate.timing.Timer`
  (CUDA events, L2 flush before each call, device sync before the end event; rep_ms=500)
  and report the median; the coefficient of variation of those medians is the run-to-run
  spread a user sees.
* With ``--ncu``: ``ncu --clock-control none --metrics gpu__time_duration.sum`` on 5 GEMM
  launches of the same kernel (after 5 skipped), whose median is compared with the
  event median (their ratio - 1 is the timer's offset: flush excluded, sync latency included).

Writes ``timing.json`` in ``--out`` and prints a table.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

N = 4096


def _setup():
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.rand(N, N, generator=g).cuda()
    b = torch.rand(N, N, generator=g).cuda()
    return torch, a, b


def one() -> None:
    """Child: time the GEMM with the evaluator's timer; print one JSON line."""
    torch, a, b = _setup()
    from kernelpro.evaluate.timing import Timer

    timer = Timer("cuda", warmup_ms=100, rep_ms=500, min_reps=20, max_reps=1000)
    res = timer.interleaved({"gemm": lambda: torch.mm(a, b)}, rounds=5)["gemm"]
    print(json.dumps({"median_ms": res.median_ms, "iqr_ms": res.iqr_ms, "cv": res.cv, "n": res.n,
                      "overhead_ms": timer.overhead_ms(50), "gpu": torch.cuda.get_device_name()}))


def ncu_target() -> None:
    """Child under ncu: 10 GEMM launches."""
    torch, a, b = _setup()
    for _ in range(10):
        torch.mm(a, b)
    torch.cuda.synchronize()


def run_ncu(timeout_s: float) -> dict:
    ncu = shutil.which("ncu")
    if ncu is None:
        return {"error": "ncu not on PATH"}
    argv = [ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", "--print-units",
            "base", "-k", "regex:gemm|Kernel|xmma|nvjet", "--launch-skip", "5", "--launch-count", "5",
            sys.executable, __file__, "--mode", "ncu"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    text = out.stdout
    start = text.find('"ID"')
    if start < 0:
        return {"error": "no CSV from ncu", "stdout": text[-2000:], "stderr": out.stderr[-2000:]}
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    ns = [float(r["Metric Value"].replace(",", "")) for r in rows if r.get("Metric Name") == "gpu__time_duration.sum"]
    names = sorted({r.get("Kernel Name", "")[:80] for r in rows})
    units = sorted({r.get("Metric Unit", "") for r in rows})
    return {"durations_ns": ns, "median_ms": statistics.median(ns) / 1e6 if ns else None, "kernels": names,
            "units": units}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["main", "one", "ncu"], default="main")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--ncu", action="store_true")
    args = ap.parse_args()
    if args.mode == "one":
        one()
        return 0
    if args.mode == "ncu":
        ncu_target()
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    for i in range(args.procs):
        out = subprocess.run([sys.executable, __file__, "--mode", "one"], capture_output=True, text=True,
                             timeout=120)
        if out.returncode != 0:
            runs.append({"error": out.stderr[-1500:]})
            continue
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"process {i}: median {runs[-1]['median_ms']:.4f} ms (cv {runs[-1]['cv']:.4f}, n {runs[-1]['n']})",
              flush=True)
    medians = [r["median_ms"] for r in runs if "median_ms" in r]
    res: dict = {"kernel": f"fp32 GEMM {N}x{N}x{N} (torch.mm, TF32 off)", "runs": runs}
    if len(medians) >= 2:
        mean = statistics.fmean(medians)
        res["median_of_medians_ms"] = statistics.median(medians)
        res["cv_of_medians"] = statistics.pstdev(medians) / mean
        print(f"{len(medians)} processes: median {res['median_of_medians_ms']:.4f} ms, "
              f"CV of medians {100 * res['cv_of_medians']:.3f} %", flush=True)
    if args.ncu:
        try:
            res["ncu"] = run_ncu(240)
        except subprocess.TimeoutExpired:
            res["ncu"] = {"error": "ncu timed out"}
        n = res["ncu"].get("median_ms")
        if n and medians:
            res["event_over_ncu"] = res["median_of_medians_ms"] / n
            print(f"ncu gpu__time_duration median {n:.4f} ms; event/ncu = {res['event_over_ncu']:.4f}", flush=True)
        else:
            print(f"ncu: {res['ncu'].get('error', 'no durations')}", flush=True)
    (args.out / "timing.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
