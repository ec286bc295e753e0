#!/usr/bin/env python3
"""Does cuDNN's own algorithm search pay on a problem's convolutions? Run on the GPU.

    python benchmarks/cudnn_autotune_probe.py SUITE.jsonl [--ids 2,32] [--rounds 5] [--calls 30] [--json OUT]

SUITE.jsonl: rows of ``benchmarks/kernelbench/split.py --write`` (``level``, ``problem_id``,
``name``, ``code``); rows whose code has no convolution module are skipped. For each problem,
the reference ``Model`` in eval mode on its own inputs (seed 0) is timed four ways, under
PyTorch's default flags otherwise:

* ``default``: ``torch.backends.cudnn.benchmark`` off (PyTorch's default: cuDNN's heuristics
  choose the algorithm);
* ``benchmark``: on, within ``torch.backends.cudnn.flags`` around the call (cuDNN times its
  algorithms on the first call of each shape and keeps the fastest);
* ``cl`` and ``cl_benchmark``: the same with the model's weights and the input in
  channels-last (the input converted inside each timed call, as a candidate would).

Times: CUDA events around ``--calls`` calls, per call, the median over ``--rounds`` rounds
that visit the four ways in turn (interleaved, so drift hits all alike). Outputs are compared
with the default way's (max abs error, and the reference's scale) so that an algorithm that
buys speed with precision shows. Prints one line per problem; ``--json`` writes the numbers.
This is a probe for a decision, run on the tuning sample only.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import types
from pathlib import Path
from typing import Any

CONV = re.compile(r"nn\.Conv(?:Transpose)?[123]d|F\.conv|functional\.conv")


def _load(code: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(code, name, "exec"), mod.__dict__)  # the suite's own problem code
    return mod


def _time(fn: Any, calls: int) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def probe(row: dict[str, Any], rounds: int, calls: int) -> dict[str, Any]:
    import torch

    mod = _load(str(row["code"]), f"L{row['level']}_{row['problem_id']}")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).cuda().eval()
    torch.manual_seed(0)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    cl_model = None
    if all(not isinstance(x, torch.Tensor) or x.dim() in (4, 5) for x in inputs):
        import copy

        cl_model = copy.deepcopy(model)
        fmt = torch.channels_last if any(isinstance(x, torch.Tensor) and x.dim() == 4 for x in inputs) \
            else torch.channels_last_3d
        rank = 4 if fmt is torch.channels_last else 5
        with torch.no_grad():  # the convolutions' weights; Module.to would refuse a 1-D bias under the 3-D format
            for param in cl_model.parameters():
                if param.dim() == rank:
                    param.data = param.data.contiguous(memory_format=fmt)

        def cl_call(bench: bool) -> Any:
            with torch.backends.cudnn.flags(enabled=True, benchmark=bench, deterministic=False,
                                            allow_tf32=torch.backends.cudnn.allow_tf32):
                return cl_model(*[x.contiguous(memory_format=fmt) if isinstance(x, torch.Tensor) else x
                                  for x in inputs])

    def call(bench: bool) -> Any:
        with torch.backends.cudnn.flags(enabled=True, benchmark=bench, deterministic=False,
                                        allow_tf32=torch.backends.cudnn.allow_tf32):
            return model(*inputs)

    ways: dict[str, Any] = {"default": lambda: call(False), "benchmark": lambda: call(True)}
    if cl_model is not None:
        ways["cl"] = lambda: cl_call(False)
        ways["cl_benchmark"] = lambda: cl_call(True)
    out: dict[str, Any] = {"level": row["level"], "id": row["problem_id"], "name": row["name"], "ms": {}, "err": {}}
    with torch.no_grad():
        ref = ways["default"]()
        scale = float(ref.abs().max()) if isinstance(ref, torch.Tensor) else None
        out["scale"] = scale
        for key, fn in ways.items():
            y = fn()  # first call: cuDNN's search where benchmark is on
            torch.cuda.synchronize()
            if isinstance(ref, torch.Tensor):
                out["err"][key] = float((y.float() - ref.float()).abs().max())
            for _ in range(3):
                fn()
        samples: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(rounds):
            for key, fn in ways.items():
                samples[key].append(_time(fn, calls))
    out["ms"] = {k: statistics.median(v) for k, v in samples.items()}
    out["spread"] = {k: (max(v) - min(v)) / statistics.median(v) for k, v in samples.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("--ids", default="", help="comma-separated problem ids (default: every convolution problem)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("error: this probe times cuDNN: it needs a CUDA GPU", file=sys.stderr)
        return 2
    try:
        rows = [json.loads(line) for line in args.suite.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the suite {args.suite}: {exc}", file=sys.stderr)
        return 2
    ids = {int(i) for i in args.ids.split(",") if i.strip()}
    rows = [r for r in rows if CONV.search(str(r.get("code", ""))) and (not ids or r.get("problem_id") in ids)]
    print(f"gpu: {torch.cuda.get_device_name()}  torch {torch.__version__}  cudnn {torch.backends.cudnn.version()}")
    results = []
    for row in rows:
        try:
            res = probe(row, args.rounds, args.calls)
        except Exception as exc:  # one problem's failure (out of memory, a shape cuDNN refuses) is its line
            print(f"L{row.get('level')} {row.get('problem_id')}: failed: {type(exc).__name__}: {exc}".splitlines()[0])
            torch.cuda.empty_cache()
            continue
        results.append(res)
        ms, base = res["ms"], res["ms"]["default"]
        parts = " ".join(f"{k} {v:.4g} ms ({base / v:.2f}x, err {res['err'].get(k, float('nan')):.2g}, "
                         f"spread {100 * res['spread'][k]:.1f}%)" for k, v in ms.items())
        print(f"L{res['level']} {res['id']} {res['name'][:40]}: scale {res['scale']:.3g}: {parts}", flush=True)
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
