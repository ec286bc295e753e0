"""What one comparison of a large output costs the judge: seconds and device kernels.

    python benchmarks/timing/compare_cost.py [--device cuda] [--elements 536870912]
        [--dtype float32] [--reps 5] [--json OUT]

Compares a candidate's output with the reference's the way the judge does
(``kernelpro.evaluate.compare.compare``) on one output of ``--elements`` values (default
2^29: a 2-GB float32 output, as KernelBench level 1's largest have), two ways, interleaved
``--reps`` times:

* ``finite``: the default path (every difference finite: the shorter computation);
* ``general``: the path every piece took before it (NaN and Inf counted on both sides),
  forced by replacing ``compare._piece`` with ``compare._piece_general``.

Cases: ``equal`` (the candidate's output within the tolerance everywhere) and ``off`` (a
thousandth of its values off by ten times the tolerance: the failing path, with its example).
For each: the median seconds (synchronized), and from one profiled call the number of
device kernels (``--device cuda``) or of ATen operators (CPU), and the number of
``cudaStreamSynchronize`` and ``cudaMemcpy*`` calls (CUDA only: every read-back of a number
is one; copies the other way would count too, and a comparison on one device makes none).
The two paths' Comparisons must be equal, else it exits 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from kernelpro.evaluate import compare


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _counts(fn, device: str) -> dict[str, int]:
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=acts) as prof:
        fn()
        _sync(device)
    events = prof.events()
    if device.startswith("cuda"):
        kernels = sum(1 for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
        waits = sum(1 for e in events if e.name in ("cudaStreamSynchronize", "cudaMemcpyAsync")
                    or e.name.startswith("cudaMemcpy"))
        return {"kernels": kernels, "sync_and_copy_calls": waits}
    return {"aten_ops": sum(1 for e in events if e.name.startswith("aten::"))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--elements", type=int, default=1 << 29)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16", "float64"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.elements < 1 or args.reps < 1:
        print("compare_cost.py: --elements and --reps must be positive", file=sys.stderr)
        return 2
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("compare_cost.py: --device cuda asked for, and no CUDA GPU is visible", file=sys.stderr)
        return 2
    dtype = getattr(torch, args.dtype)
    tols = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2), "float64": (1e-6, 1e-5)}
    gen = torch.Generator(device=args.device).manual_seed(0)
    ref = torch.randn(args.elements, generator=gen, device=args.device, dtype=torch.float32).to(dtype)
    equal = ref.clone()
    off = ref.clone()
    idx = torch.randint(0, args.elements, (max(1, args.elements // 1000),), generator=gen, device=args.device)
    atol, rtol = tols[args.dtype]
    off[idx] = (ref[idx].double() + 10 * (atol + rtol * ref[idx].double().abs())).to(dtype)
    general = compare._piece_general
    finite = compare._piece

    def run(case: torch.Tensor, path) -> compare.Comparison:
        compare._piece = path
        try:
            return compare.compare(case, ref, tols)
        finally:
            compare._piece = finite

    out: dict[str, dict] = {"device": args.device, "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda")
                            else None, "elements": args.elements, "dtype": args.dtype, "reps": args.reps, "cases": {}}
    failed = False
    for name, case in (("equal", equal), ("off", off)):
        a, b = run(case, finite), run(case, general)
        if a != b:
            print(f"{name}: the two paths differ: {a} against {b}", file=sys.stderr)
            failed = True
        secs: dict[str, list[float]] = {"finite": [], "general": []}
        for _ in range(args.reps):
            for label, path in (("finite", finite), ("general", general)):
                _sync(args.device)
                t0 = time.perf_counter()
                run(case, path)
                _sync(args.device)
                secs[label].append(time.perf_counter() - t0)
        row = {"ok": a.ok, "message": a.message[:160]}
        for label, path in (("finite", finite), ("general", general)):
            row[label] = {"median_s": statistics.median(secs[label]), "all_s": secs[label],
                          **_counts(lambda: run(case, path), args.device)}
        out["cases"][name] = row
        f, g = row["finite"], row["general"]
        counts = ", ".join(f"{k} {f[k]} against {g[k]}" for k in f if k not in ("median_s", "all_s"))
        print(f"{name}: ok={a.ok} finite {f['median_s'] * 1e3:.1f} ms, general {g['median_s'] * 1e3:.1f} ms "
              f"({g['median_s'] / f['median_s']:.2f}x); {counts}")
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
