"""How short can the energy windows be? Repeatability, a known energy difference, and the
seconds a measurement costs, at several window lengths, on one GPU.

    python benchmarks/energy_window.py [--windows 1.5,0.75,0.5] [--stop-spread 0.01] [--repeats 4]
                                       [--json out.json]

``--windows`` also takes ``SECONDS:STOP_SPREAD`` items (``1.5:0.01,0.75:0.02``): that window
length with that early-stop spread.

Kernels: a bf16 8192^3 cuBLAS matmul (compute-bound, ~1.5 ms per call on an H200) and the
memory-bound affine pair of ``tools/capture/energy/pairs/`` (``triton_fma0``: y = 1.5 x + 0.25
over 1 GiB; ``triton_fma8``: the same pass with 8 redundant FMAs per element hidden under the
DRAM time: the same speed, more energy). Each (kernel, window) is measured ``--repeats``
times with the measurement's defaults otherwise (at most 5 windows, stop after 3 that agree
within ``--stop-spread`` or the item's own), the window lengths interleaved within each repeat so that the GPU's warm-up
drift falls on all of them alike. Printed per kernel and window: joules per call (median),
the spread of the repeats ((max - min) / median), the seconds one measurement took
(``measure_s``: warm-up, edges and windows), and for the pair fma8 / fma0 - 1 with its
spread. Exit status 1 with one line when energy cannot be measured here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAIRS = REPO / "tools" / "capture" / "energy" / "pairs"


def _kernels(device: str) -> dict:
    import torch

    from kernelpro.evaluate.loader import build_model, load_module, make_inputs
    from kernelpro_plugins_energy.bench import bf16_matmul_call

    torch.set_grad_enabled(False)
    calls = {"matmul_bf16_8192": bf16_matmul_call(8192, device)}
    problem = load_module(PAIRS / "affine_problem.py", "energy_window_affine_problem")
    cands = load_module(PAIRS / "affine_candidates.py", "energy_window_affine_candidates")
    inputs = make_inputs(problem, 1, device)
    expected = problem.Model()(*inputs)
    for name in ("triton_fma0", "triton_fma8"):
        model = build_model(cands.VARIANTS[name], problem, 0, device)
        got = model(*inputs)
        if not torch.allclose(got, expected, rtol=1e-5, atol=1e-5):
            raise SystemExit(f"error: affine {name} is not correct on this machine")
        calls[f"affine_{name}"] = (lambda m=model, xs=inputs: m(*xs))
    return calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/energy_window.py")
    ap.add_argument("--windows", default="1.5,0.75,0.5",
                    help="window lengths in seconds, comma-separated; SECONDS:STOP_SPREAD sets that one's early stop")
    ap.add_argument("--stop-spread", type=float, default=0.01, help="the early stop of windows given without one")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", help="write the raw numbers here")
    args = ap.parse_args(argv)
    configs: dict[str, tuple[float, float]] = {}
    try:
        for item in (w.strip() for w in args.windows.split(",") if w.strip()):
            length, _, stop = item.partition(":")
            configs[item] = (float(length), float(stop) if stop else args.stop_spread)
    except ValueError:
        print(f"error: --windows must be SECONDS or SECONDS:STOP_SPREAD items, not {args.windows!r}", file=sys.stderr)
        return 2
    if not configs or min(w for w, _ in configs.values()) <= 0 or min(s for _, s in configs.values()) < 0 \
            or args.repeats < 2:
        print("error: need at least one window > 0 s, stop spreads >= 0 and --repeats >= 2", file=sys.stderr)
        return 2
    windows = list(configs)

    from kernelpro.api import MeasurementError
    from kernelpro_plugins_energy import stats
    from kernelpro_plugins_energy.bench import measure_energy, time_call_ms
    from kernelpro_plugins_energy.measure import EnergySettings
    from kernelpro_plugins_energy.nvml_access import open_counter

    counter, reason = open_counter(args.device)
    if counter is None:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    counter.close()
    calls = _kernels(args.device)
    timing = {name: time_call_ms(call) for name, call in calls.items()}
    raw: dict[str, dict[str, list[dict]]] = {k: {w: [] for w in windows} for k in calls}
    try:
        for rep in range(args.repeats):
            for w in windows if rep % 2 == 0 else list(reversed(windows)):
                for name, call in calls.items():
                    length, stop = configs[w]
                    m = measure_energy(call, args.device, EnergySettings(window_s=length, stop_spread=stop))
                    raw[name][w].append({k: m[k] for k in ("energy_j_per_call", "energy_cv", "power_w",
                                                                "measure_s", "trials", "window_s",
                                                                "counter_updates", "counter_update_hz",
                                                                "trials_spread") if k in m})
                    print(f"rep {rep + 1} window {w} s {name}: {m['energy_j_per_call'] * 1e3:.3f} mJ/call, "
                          f"{m['measure_s']:.2f} s", flush=True)
    except MeasurementError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    summary: dict[str, dict] = {}
    print(f"\n{'kernel':<22} {'window s':>10} {'mJ/call':>10} {'spread %':>9} {'measure s':>10}")
    for name, by_w in raw.items():
        summary[name] = {}
        for w, runs in by_w.items():
            e = [r["energy_j_per_call"] for r in runs]
            cost = [r["measure_s"] for r in runs]
            summary[name][w] = {"median_j_per_call": stats.median(e), "spread": stats.spread(e),
                                "measure_s_median": stats.median(cost), "ms_per_call": timing[name]["median_ms"]}
            s = summary[name][w]
            print(f"{name:<22} {w:>10} {s['median_j_per_call'] * 1e3:>10.3f} {s['spread'] * 100:>9.2f} "
                  f"{s['measure_s_median']:>10.2f}")
    pair: dict[str, dict] = {}
    for w in raw["affine_triton_fma0"]:
        ratios = [b["energy_j_per_call"] / a["energy_j_per_call"] - 1
                  for a, b in zip(raw["affine_triton_fma0"][w], raw["affine_triton_fma8"][w])]
        pair[w] = {"median": stats.median(ratios), "min": min(ratios), "max": max(ratios)}
        print(f"affine fma8 / fma0 - 1 at {w} s windows: {pair[w]['median'] * 100:+.2f} % "
              f"(repeats {pair[w]['min'] * 100:+.2f} .. {pair[w]['max'] * 100:+.2f} %)")
    print("time per call (ms): " + ", ".join(f"{k} {v['median_ms']:.4f}" for k, v in timing.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"timing": timing, "raw": raw, "summary": summary, "pair": pair},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
