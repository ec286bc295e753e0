"""Does a memory-bound kernel use less energy at the same speed when fewer SMs or fewer warps
do the work? One GPU, one streaming pass, several launch shapes.

    python benchmarks/energy_levers.py [--repeats 3] [--gib 1] [--json out.json]

The pass is ``y = 1.5 x + 0.25`` over ``--gib`` GiB of fp32 (read once, written once; past L2),
in Triton:

- ``blocks``: one program per 4,096 elements, 8 warps (the expert's pointwise shape; the
  baseline every other variant is compared with);
- ``blocks_2w``: one program per 1,024 elements, 2 warps (fewer warps issuing per element);
- ``sm<P>_b<B>_w<W>``: persistent, one program on each of ``P`` % of the SMs (a grid no larger
  than the SM count is normally placed one program per SM), each walking tiles of ``B``
  elements with ``W`` warps: the other SMs stay idle for the whole call.

Each variant is checked against PyTorch, timed (CUDA events, median of 100 calls) and its
energy measured with the energy plugin's defaults (counter-aligned windows), the variants
interleaved within each of ``--repeats`` rounds (order reversed every other round) so that
the GPU's warm-up drift falls on all alike. Printed per variant: ms per call, bandwidth
(2 x bytes / time), mJ per call, average power, and time and energy against ``blocks`` with
the spread of the per-round ratios. Exit status 1 with one line when energy cannot be
measured here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _variants(sms: int) -> dict[str, dict]:
    out: dict[str, dict] = {"blocks": {"block": 4096, "warps": 8},
                            "blocks_2w": {"block": 1024, "warps": 2}}
    for pct, block, warps in ((100, 8192, 16), (75, 16384, 16), (50, 16384, 16), (50, 32768, 32),
                              (33, 32768, 32)):
        programs = max(1, round(sms * pct / 100))
        out[f"sm{pct}_b{block}_w{warps}"] = {"block": block, "warps": warps, "programs": programs}
    return out


def _calls(n: int, device: str, sms: int) -> tuple[dict, dict]:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def blocks_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = offs < n
        x = tl.load(x_ptr + offs, mask=inside, other=0.0)
        tl.store(y_ptr + offs, x * 1.5 + 0.25, mask=inside)

    @triton.jit
    def persistent_kernel(x_ptr, y_ptr, n, programs, iters, BLOCK: tl.constexpr):
        # tile i of this program: program_id + i * programs (32-bit: --gib stays below 8)
        pid = tl.program_id(0)
        for i in range(0, iters):
            offs = (pid + i * programs).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            inside = offs < n
            x = tl.load(x_ptr + offs, mask=inside, other=0.0)
            tl.store(y_ptr + offs, x * 1.5 + 0.25, mask=inside)

    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(n, device=device, dtype=torch.float32, generator=gen)
    y = torch.empty_like(x)
    expected = x * 1.5 + 0.25
    specs = _variants(sms)
    calls = {}
    for name, spec in specs.items():
        block, warps = spec["block"], spec["warps"]
        if "programs" in spec:
            programs = spec["programs"]
            iters = triton.cdiv(triton.cdiv(n, block), programs)

            def call(programs=programs, iters=iters, block=block, warps=warps) -> None:
                persistent_kernel[(programs,)](x, y, n, programs, iters, BLOCK=block, num_warps=warps)
        else:
            grid = (triton.cdiv(n, block),)

            def call(grid=grid, block=block, warps=warps) -> None:
                blocks_kernel[grid](x, y, n, BLOCK=block, num_warps=warps)
        y.zero_()
        call()
        torch.cuda.synchronize()
        # Triton contracts x * 1.5 + 0.25 into one FMA; PyTorch rounds twice
        if not torch.allclose(y, expected, rtol=1e-6, atol=1e-6):
            raise SystemExit(f"error: variant {name} is not correct on this machine")
        calls[name] = call
    return calls, specs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/energy_levers.py")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gib", type=float, default=1.0, help="GiB of fp32 input (the output is as large)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", help="write the raw numbers here")
    args = ap.parse_args(argv)
    if args.repeats < 2 or not 0 < args.gib < 8:
        print("error: need --repeats >= 2 and 0 < --gib < 8", file=sys.stderr)
        return 2

    from kernelpro.api import MeasurementError
    from kernelpro_plugins_energy import stats
    from kernelpro_plugins_energy.bench import measure_energy, time_call_ms
    from kernelpro_plugins_energy.nvml_access import open_counter

    counter, reason = open_counter(args.device)
    if counter is None:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    counter.close()
    import torch

    torch.set_grad_enabled(False)
    sms = torch.cuda.get_device_properties(torch.device(args.device)).multi_processor_count
    n = int(args.gib * 2**30) // 4
    calls, specs = _calls(n, args.device, sms)
    names = list(calls)
    raw: dict[str, list[dict]] = {k: [] for k in names}
    try:
        for rep in range(args.repeats):
            for name in names if rep % 2 == 0 else list(reversed(names)):
                t = time_call_ms(calls[name])
                m = measure_energy(calls[name], args.device)
                raw[name].append({"ms": t["median_ms"], "cv": t["cv"], "j_per_call": m["energy_j_per_call"],
                                  "power_w": m.get("power_w"), "measure_s": m.get("measure_s")})
                print(f"round {rep + 1} {name}: {t['median_ms']:.4f} ms, "
                      f"{m['energy_j_per_call'] * 1e3:.3f} mJ/call", flush=True)
    except MeasurementError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    gpu = torch.cuda.get_device_name(torch.device(args.device))
    print(f"\n{gpu}, {sms} SMs, {args.gib:g} GiB fp32 read and written, {args.repeats} rounds")
    print(f"{'variant':<22} {'programs':>9} {'ms':>8} {'GB/s':>7} {'mJ/call':>9} {'W':>6} "
          f"{'dt %':>7} {'dE %':>7} {'dE range %':>16}")
    base = raw["blocks"]
    summary = {}
    for name in names:
        runs = raw[name]
        ms = stats.median([r["ms"] for r in runs])
        mj = stats.median([r["j_per_call"] for r in runs]) * 1e3
        watts = [r["power_w"] for r in runs if r["power_w"] is not None]
        dt = [r["ms"] / b["ms"] - 1 for r, b in zip(runs, base)]
        de = [r["j_per_call"] / b["j_per_call"] - 1 for r, b in zip(runs, base)]
        spec = specs[name]
        programs = spec.get("programs", -(-n // spec["block"]))
        summary[name] = {"programs": programs, "block": spec["block"], "warps": spec["warps"], "ms": ms,
                         "gb_s": 2 * n * 4 / (ms * 1e-3) / 1e9, "mj_per_call": mj,
                         "power_w": stats.median(watts) if watts else None,
                         "dt": stats.median(dt), "de": stats.median(de), "de_min": min(de), "de_max": max(de)}
        s = summary[name]
        power = f"{s['power_w']:.0f}" if s["power_w"] is not None else "-"
        print(f"{name:<22} {programs:>9} {ms:>8.4f} {s['gb_s']:>7.0f} {mj:>9.3f} {power:>6} "
              f"{s['dt'] * 100:>+7.2f} {s['de'] * 100:>+7.2f} {s['de_min'] * 100:>+7.2f}..{s['de_max'] * 100:>+7.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": gpu, "sms": sms, "n": n, "raw": raw, "summary": summary},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
