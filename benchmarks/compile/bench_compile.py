"""Compile-stage benchmark: cold build, cache hit, parallel throughput of compile_many.

    python benchmarks/compile/bench_compile.py --device cuda --n 8 --workers 8 --out DIR
    python benchmarks/compile/bench_compile.py --device cpu --n 4 --workers 1,2 --out DIR

Candidates: ``n`` distinct small ``load_inline`` extensions (one elementwise CUDA kernel
each with ``--device cuda``; one C++ loop with ``--device cpu``), differing only in a
constant so that each has its own cache key. Measured (wall seconds, this process):

* cold: the first candidate into an empty cache (compile process start, torch import,
  nvcc/c++ build of the extension, import of the result);
* hit: the same candidate again (the cache lookup, no process);
* load: a fresh process importing the cached candidate (what the worker pays);
* pool: all ``n`` candidates into an empty cache with ``compile_many`` at each worker
  count, as candidates per minute.

Writes ``compile.json`` in ``--out`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import attrs

from kernelpro.config import EvaluatorConfig
from kernelpro.evaluate import compile as build
from kernelpro.evaluate.runner import build_env

CUDA_TEMPLATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = """
#include <torch/extension.h>
__global__ void scale_kernel_{i}(const float* x, float* out, long n) {{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * {c}f;
}}
torch::Tensor scale_{i}(torch::Tensor x) {{
    auto out = torch::empty_like(x);
    long n = x.numel();
    scale_kernel_{i}<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}}
"""
ext = load_inline(name="bench_scale_{i}", cpp_sources="torch::Tensor scale_{i}(torch::Tensor x);",
                  cuda_sources=CUDA_SRC, functions=["scale_{i}"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale_{i}(x)
'''

CPU_TEMPLATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = """
#include <torch/extension.h>
torch::Tensor scale_{i}(torch::Tensor x) {{
    auto out = torch::empty_like(x);
    const float* a = x.data_ptr<float>();
    float* b = out.data_ptr<float>();
    for (long k = 0; k < x.numel(); ++k) b[k] = a[k] * {c}f;
    return out;
}}
"""
ext = load_inline(name="bench_scale_{i}", cpp_sources=CPP_SRC, functions=["scale_{i}"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale_{i}(x)
'''


def write_candidates(where: Path, n: int, device: str, tag: str) -> list[Path]:
    where.mkdir(parents=True, exist_ok=True)
    template = CUDA_TEMPLATE if device == "cuda" else CPU_TEMPLATE
    paths = []
    for i in range(n):
        p = where / f"cand_{i}.py"
        # the tag makes every benchmark run's sources new, so "cold" is really cold
        p.write_text(f"# {tag}\n" + template.format(i=i, c=1.0 + i / 8))
        paths.append(p)
    return paths


def load_seconds(cand: Path, outcome: build.CompileOutcome) -> float:
    # the worker's environment: the entry's architecture, include paths and flags (meta.json);
    # a different include list changes the extension's build arguments and torch rebuilds it
    env = build_env(outcome.build_dir)
    code = ("import time,sys; t=time.monotonic(); from kernelpro.evaluate.loader import load_module; "
            "load_module(sys.argv[1], 'c'); print(time.monotonic()-t)")
    out = subprocess.run([sys.executable, "-c", code, str(cand)], env=env, capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--workers", default="8", help="comma-separated worker counts for the pool")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--skip-cold", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tag = f"{time.time_ns()}"
    base = EvaluatorConfig(compile_timeout_s=900)
    res: dict = {"device": args.device, "host": platform.node(), "cpu_count": os.cpu_count(), "n": args.n,
                 "toolchain": build.toolchain.fingerprint(), "arch": build.toolchain.arch_for("")}

    if not args.skip_cold:
        cands = write_candidates(args.out / "single", 1, args.device, tag + "-single")
        cfg = attrs.evolve(base, build_cache_dir=str(args.out / "cache_single"))
        t0 = time.monotonic()
        cold = build.compile_candidate(cands[0], config=cfg)
        res["cold_s"] = time.monotonic() - t0
        res["cold_status"] = cold.status
        res["cold_log"] = cold.log or cold.reason
        t0 = time.monotonic()
        hit = build.compile_candidate(cands[0], config=cfg)
        res["hit_s"] = time.monotonic() - t0
        res["hit_cached"] = hit.cached
        if cold.status == "ok":
            res["load_in_fresh_process_s"] = load_seconds(cands[0], cold)
        print(f"cold {res['cold_s']:.1f} s ({cold.status}), hit {res['hit_s'] * 1e3:.1f} ms, "
              f"load {res.get('load_in_fresh_process_s', float('nan')):.2f} s", flush=True)
        (args.out / "compile.json").write_text(json.dumps(res, indent=1))

    res["pool"] = []
    for w in [int(x) for x in args.workers.split(",") if x]:
        cands = write_candidates(args.out / f"pool{w}", args.n, args.device, f"{tag}-pool{w}")
        cfg = attrs.evolve(base, build_cache_dir=str(args.out / f"cache_pool{w}"))
        t0 = time.monotonic()
        outs = build.compile_many(cands, config=cfg, workers=w)
        wall = time.monotonic() - t0
        ok = sum(o.status == "ok" for o in outs)
        row = {"workers": w, "n": args.n, "ok": ok, "wall_s": wall, "per_minute": 60.0 * args.n / wall,
               "build_s": [round(o.compile_seconds, 2) for o in outs]}
        res["pool"].append(row)
        print(f"pool workers={w}: {args.n} candidates ({ok} ok) in {wall:.1f} s = {row['per_minute']:.1f}/min",
              flush=True)
        (args.out / "compile.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
