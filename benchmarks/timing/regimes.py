"""How a short call's CUDA-event time depends on what the GPU and the host were doing just
before it: the evidence behind the harness's timing method for calls of a few microseconds.

    python3 benchmarks/timing/regimes.py [--calls 400] [--out FILE.json]

One process, one problem (bias + GELU + scale of an N x N fp32 activation, 3 kernels in
eager PyTorch; N in 1024, 4096), every call preceded by an L2 flush, timed with events on
the current stream in these regimes:

* ``idle_gap``: the GPU idle and the host asleep for 0.6 ms before the start event (what a
  call answered over the judge's protocol sees);
* ``idle_gap_busywait``: the same gap spent spinning on the host;
* ``spin_before``: the same sleeping gap, then a ~50 us GPU spin enqueued before the start
  event, so the call's launches are queued while the GPU is still busy;
* ``back_to_back``: no gap (triton's do_bench regime: flush, start, call, end, repeat).

Prints per regime: median, 10th/90th percentile and coefficient of variation of the event
times (ms), and writes them as JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def forward(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x + bias) * 1.7


def run(n: int, calls: int) -> dict[str, dict[str, float]]:
    x = torch.rand(n, n, device="cuda")
    bias = torch.randn(n, device="cuda")
    flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    ev = torch.cuda.Event
    # cycles of torch.cuda._sleep per microsecond, measured
    a, b = ev(enable_timing=True), ev(enable_timing=True)
    a.record(); torch.cuda._sleep(1 << 20); b.record(); b.synchronize()
    per_us = (1 << 20) / (a.elapsed_time(b) * 1e3)

    def one(regime: str) -> float:
        flush.zero_()
        torch.cuda.synchronize()
        if regime != "back_to_back":
            end = time.perf_counter() + 0.6e-3
            if regime == "idle_gap_busywait":
                while time.perf_counter() < end:
                    pass
            else:
                time.sleep(0.6e-3)
        if regime == "spin_before":
            torch.cuda._sleep(int(50 * per_us))
        s, e = ev(enable_timing=True), ev(enable_timing=True)
        s.record()
        forward(x, bias)
        e.record()
        e.synchronize()
        return s.elapsed_time(e)

    regimes = ["idle_gap", "idle_gap_busywait", "spin_before", "back_to_back"]
    for r in regimes:  # warm-up
        for _ in range(20):
            one(r)
    times: dict[str, list[float]] = {r: [] for r in regimes}
    for _ in range(calls // 20):  # regimes alternated in blocks of 20
        for r in regimes:
            for _ in range(20):
                times[r].append(one(r))
    out = {}
    for r, xs in times.items():
        q = statistics.quantiles(xs, n=10)
        out[r] = {"median_ms": statistics.median(xs), "p10_ms": q[0], "p90_ms": q[-1],
                  "cv": statistics.pstdev(xs) / statistics.fmean(xs), "n": len(xs)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--out")
    args = ap.parse_args()
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    for n in (1024, 4096):
        result[f"n{n}"] = run(n, args.calls)
        for r, s in result[f"n{n}"].items():
            print(f"N={n:5d} {r:18s} median {s['median_ms']:.4f}  p10 {s['p10_ms']:.4f}  p90 {s['p90_ms']:.4f}  "
                  f"cv {s['cv']:.2f}  (n={s['n']})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
