#!/usr/bin/env python3
"""Markdown record of an ncu validation capture: tool-fired table, findings, calibration,
stage-1/stage-2 profiling time per candidate.

    python benchmarks/ncu_validation.py CAPTURE_DIR > report.md
    python benchmarks/ncu_validation.py --bench CAPTURE_DIR/bench.json

CAPTURE_DIR is the unpacked ``ncu/`` folder of ``tools/capture/ncu/gpu_capture.py``
(or ``tests/ncu/fixtures``). Runs on a CPU machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "capture" / "ncu" / "gpu_kernels"))

import kp_ncu_validate as V  # noqa: E402


def timing_table(bench: list[dict]) -> list[str]:
    out = ["| case | kernels | bottleneck | stage 1 s | stage 1 passes | stage 2 s | stage 2 passes | stage-2 metrics |",
           "|---|---|---|---|---|---|---|---|"]
    for row in bench:
        out.append(f"| {row['case']} | {row['kernels']} | {row['bottleneck']} | {row['stage1_s']:.1f} | "
                   f"{row.get('stage1_replay_passes', 0):.0f} | {row['stage2_s']:.1f} | "
                   f"{row.get('stage2_replay_passes', 0):.0f} | {row['stage2_metrics']} |")
    s1 = sorted(r["stage1_s"] for r in bench)
    s2 = sorted(r["stage2_s"] for r in bench)
    if bench:
        out += ["", f"median stage 1 {s1[len(s1) // 2]:.1f} s, median stage 2 {s2[len(s2) // 2]:.1f} s "
                f"over {len(bench)} candidates"]
    return out


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--bench":  # only the timing table of one bench.json
        import json

        print("\n".join(timing_table(json.loads(Path(argv[1]).read_text()))))
        return 0
    if len(argv) != 1:
        print("usage: python benchmarks/ncu_validation.py CAPTURE_DIR | --bench BENCH_JSON", file=sys.stderr)
        return 2
    capture = Path(argv[0])
    env = V.read_json(capture / "env.json") or {}
    cal = V.read_json(capture / "calibration.json")
    bench = V.read_json(capture / "bench.json") or []
    out = [f"GPU: {env.get('gpu')} (capability {env.get('capability')}), torch {env.get('torch')}, "
           f"CUDA {env.get('cuda')}, captured {env.get('date_utc')} UTC", ""]
    if env.get("ncu_version"):
        out += ["ncu: " + " ".join(env["ncu_version"].split())[-60:], ""]
    if cal:
        out += ["## Calibration (kernelpro calibrate's measurement)", "",
                "| quantity | measured | |", "|---|---|---|",
                f"| device copy bandwidth (read+write) | {cal['dram_bandwidth_gbs']:.0f} GB/s | {cal['copy_ms']:.3f} ms per 1 GiB copy |"]
        for t in ("bf16", "fp16", "tf32", "fp32", "fp64"):
            if f"{t}_tflops" in cal:
                out.append(f"| {t} matmul n={cal[f'{t}_matmul_n']} | {cal[f'{t}_tflops']:.1f} TFLOP/s | "
                           f"{cal[f'{t}_matmul_ms']:.3f} ms |")
        out += ["", f"Method: {cal.get('method')}", ""]
    for calibrated in (True, False):
        results = V.evaluate(capture, calibrated=calibrated)
        label = "calibrated ceilings" if calibrated else "datasheet ceilings"
        out += [f"## Micro-profilers fired per case ({label})", "",
                "Bold: a tool designed to fire on that case; [missing]: designed but did not fire.", "",
                V.markdown_table(results), ""]
    out += ["## Findings (gated, calibrated ceilings)", ""]
    for r in V.evaluate(capture, calibrated=True):
        b = r.bottleneck
        out.append(f"### {r.case}")
        out.append(f"- bottleneck: {b.summary if b else 'none'}")
        for f in r.gated:
            src = f" [source: {', '.join(f.source_lines)}]" if f.source_lines else ""
            out.append(f"- **{f.tool}** ({f.severity}, gain {f.estimated_gain:.2f}): {f.message}{src}")
        out.append("")
    if bench:
        out += ["## Profiling time per candidate (NcuCollector, H200)", "", *timing_table(bench), ""]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
