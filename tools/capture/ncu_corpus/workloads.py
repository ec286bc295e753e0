#!/usr/bin/env python3
"""The kernels of the micro-profiler corpus: PyTorch's own kernels across operator families,
the Triton kernels torch.compile writes for some of the same operations, and the expert
generator's template kernels, each at a size past the H200's L2 and at a launch-bound size.

Run under Nsight Compute with ``--profile-from-start off`` (``capture.py`` does):

    python3 workloads.py run GROUP [--sources DIR]

GROUP is ``eager``, ``compiled`` or ``template``. Each workload is built, run three times
(warm-up, torch.compile's compilation and autotuning happen there), then run once inside an
NVTX range named ``<workload>@<size>`` between ``cudaProfilerStart`` and
``cudaProfilerStop``: the kernels of that one call are the ones profiled. ``--sources DIR``
writes each template candidate's source there; torch.compile's generated code is found in
its cache directory (``TORCHINDUCTOR_CACHE_DIR``) by ``capture.py``.

``python3 workloads.py list`` prints the workloads and sizes without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

Build = Callable[[Any, str], Callable[[], Any]]  # (torch, size) -> one call


def _eager(size_args: dict[str, tuple[Any, ...]], make: Callable[..., Callable[[], Any]]) -> dict[str, Any]:
    return {"sizes": size_args, "make": make}


def _softmax(t, rows, cols):
    x = t.randn(rows, cols, device="cuda")
    return lambda: t.softmax(x, dim=-1)


def _layer_norm(t, rows, cols):
    x = t.randn(rows, cols, device="cuda")
    w, b = t.randn(cols, device="cuda"), t.randn(cols, device="cuda")
    return lambda: t.nn.functional.layer_norm(x, (cols,), w, b)


def _group_norm(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device="cuda")
    w, b = t.randn(c, device="cuda"), t.randn(c, device="cuda")
    return lambda: t.nn.functional.group_norm(x, 32 if c >= 32 else 4, w, b)


def _batch_norm(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device="cuda")
    rm, rv = t.zeros(c, device="cuda"), t.ones(c, device="cuda")
    w, b = t.randn(c, device="cuda"), t.randn(c, device="cuda")
    return lambda: t.nn.functional.batch_norm(x, rm, rv, w, b, training=True)


def _sum_rows(t, rows, cols):
    x = t.randn(rows, cols, device="cuda")
    return lambda: x.sum(-1)


def _sum_cols(t, rows, cols):
    x = t.randn(rows, cols, device="cuda")
    return lambda: x.sum(0)


def _cumsum(t, rows, cols):
    x = t.randn(rows, cols, device="cuda")
    return lambda: t.cumsum(x, 1)


def _bias_mul(t, rows, cols):
    x, y = t.randn(rows, cols, device="cuda"), t.randn(rows, cols, device="cuda")
    b = t.randn(cols, device="cuda")
    return lambda: (x + b[None, :]) * y


def _gelu(t, n):
    x = t.randn(n, device="cuda")
    return lambda: t.nn.functional.gelu(x)


def _index_select(t, rows, cols):
    x = t.randn(rows, cols, device="cuda")
    idx = t.randint(0, rows, (rows,), device="cuda")
    return lambda: x.index_select(0, idx)


def _embedding(t, vocab, dim, count):
    w = t.randn(vocab, dim, device="cuda")
    idx = t.randint(0, vocab, (count,), device="cuda")
    return lambda: t.nn.functional.embedding(idx, w)


def _transpose(t, rows, cols):
    x = t.randn(rows, cols, device="cuda")
    return lambda: x.t().contiguous()


def _max_pool(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device="cuda")
    return lambda: t.nn.functional.max_pool2d(x, 3, 2, 1)


def _conv(t, n, cin, hw, cout):
    x = t.randn(n, cin, hw, hw, device="cuda")
    w = t.randn(cout, cin, 3, 3, device="cuda")
    return lambda: t.nn.functional.conv2d(x, w, padding=1)


def _matmul(dtype_name, tf32=False):
    def make(t, m, n, k):
        t.backends.cuda.matmul.allow_tf32 = tf32
        dtype = getattr(t, dtype_name)
        a, b = t.randn(m, k, device="cuda", dtype=dtype), t.randn(k, n, device="cuda", dtype=dtype)
        return lambda: a @ b
    return make


def _argmax(t, rows, cols):
    x = t.randn(rows, cols, device="cuda")
    return lambda: x.argmax(-1)


def _cross_entropy(t, rows, classes):
    x = t.randn(rows, classes, device="cuda")
    y = t.randint(0, classes, (rows,), device="cuda")
    return lambda: t.nn.functional.cross_entropy(x, y)


# name -> sizes (large: past the 50 MB L2; small: launch-bound) and the builder
EAGER: dict[str, dict[str, Any]] = {
    "softmax_rows": _eager({"large": (4096, 16384), "small": (64, 1024)}, _softmax),
    "layer_norm": _eager({"large": (16384, 4096), "small": (64, 1024)}, _layer_norm),
    "group_norm": _eager({"large": (32, 128, 64), "small": (2, 16, 16)}, _group_norm),
    "batch_norm_train": _eager({"large": (32, 128, 64), "small": (4, 16, 16)}, _batch_norm),
    "sum_rows": _eager({"large": (16384, 4096), "small": (64, 1024)}, _sum_rows),
    "sum_cols": _eager({"large": (16384, 4096), "small": (64, 1024)}, _sum_cols),
    "cumsum_rows": _eager({"large": (4096, 8192), "small": (64, 1024)}, _cumsum),
    "bias_mul_broadcast": _eager({"large": (8192, 4096), "small": (64, 1024)}, _bias_mul),
    "gelu": _eager({"large": (64 << 20,), "small": (1 << 16,)}, _gelu),
    "index_select_rows": _eager({"large": (262144, 256), "small": (1024, 64)}, _index_select),
    "embedding": _eager({"large": (100000, 512, 65536), "small": (1000, 64, 256)}, _embedding),
    "transpose": _eager({"large": (8192, 8192), "small": (256, 256)}, _transpose),
    "max_pool2d": _eager({"large": (32, 64, 112), "small": (2, 16, 32)}, _max_pool),
    "conv2d_fp32_cudnn": _eager({"large": (32, 64, 56, 128), "small": (1, 16, 16, 16)}, _conv),
    "matmul_fp32": _eager({"large": (4096, 4096, 4096), "small": (128, 128, 128)}, _matmul("float32")),
    "matmul_tf32": _eager({"large": (4096, 4096, 4096), "small": (128, 128, 128)}, _matmul("float32", True)),
    "matmul_bf16": _eager({"large": (8192, 8192, 8192), "small": (128, 128, 128)}, _matmul("bfloat16")),
    "argmax_rows": _eager({"large": (16384, 4096), "small": (64, 1024)}, _argmax),
    "cross_entropy": _eager({"large": (2048, 32000), "small": (64, 1000)}, _cross_entropy),
}

# torch.compile (default mode) of some of the same operations: Inductor's Triton kernels
COMPILED = {name: EAGER[name] for name in (
    "softmax_rows", "layer_norm", "group_norm", "sum_rows", "bias_mul_broadcast", "transpose",
    "cumsum_rows", "cross_entropy")}


def _problem(forward: str, inputs: str, init: str = "", init_inputs: str = "[]", init_args: str = "") -> str:
    return ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
            "class Model(nn.Module):\n"
            f"    def __init__(self{init_args}):\n        super().__init__()\n{init}"
            f"    def forward(self, x):\n        return {forward}\n\n\n"
            f"def get_inputs():\n    return {inputs}\n\n\n"
            f"def get_init_inputs():\n    return {init_inputs}\n")


# The expert generator's template kernels (default tiles) on problems written for the corpus
TEMPLATE: dict[str, dict[str, str]] = {
    "tpl_bias_gelu_scale": {
        size: _problem("F.gelu(x + self.bias) * 1.7", f"[torch.randn({r}, {c})]",
                       "        self.bias = nn.Parameter(torch.randn(cols) * 0.1)\n", f"[{c}]", ", cols")
        for size, (r, c) in {"large": (8192, 4096), "small": (64, 1024)}.items()},
    "tpl_softmax_rows": {size: _problem("torch.softmax(x, dim=-1)", f"[torch.randn({r}, {c})]")
                         for size, (r, c) in {"large": (4096, 16384), "small": (64, 1024)}.items()},
    "tpl_sum_rows": {size: _problem("x.sum(dim=-1)", f"[torch.randn({r}, {c})]")
                     for size, (r, c) in {"large": (16384, 4096), "small": (64, 1024)}.items()},
    "tpl_rms_norm": {size: _problem("x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5)",
                                    f"[torch.randn({r}, {c})]")
                     for size, (r, c) in {"large": (16384, 4096), "small": (64, 1024)}.items()},
    "tpl_matmul_fp32": {size: _problem("torch.matmul(x, self.w)", f"[torch.randn({n}, {n})]",
                                       f"        self.w = nn.Parameter(torch.randn({n}, {n}))\n")
                        for size, n in {"large": 4096, "small": 128}.items()},
    "tpl_max_pool2d": {size: _problem("F.max_pool2d(x, 3, 2, 1)", f"[torch.randn({n}, {c}, {hw}, {hw})]")
                       for size, (n, c, hw) in {"large": (32, 64, 112), "small": (2, 16, 32)}.items()},
}


def workloads(group: str) -> list[tuple[str, str]]:
    table = {"eager": EAGER, "compiled": COMPILED, "template": TEMPLATE}[group]
    out = []
    for name, spec in table.items():
        sizes = spec["sizes"] if group != "template" else spec
        prefix = "tc_" if group == "compiled" else ""
        out += [(prefix + name, size) for size in sizes]
    return out


def _build(group: str, name: str, size: str, sources: Path | None) -> Callable[[], Any]:
    import torch

    if group in ("eager", "compiled"):
        base = name[3:] if group == "compiled" else name
        spec = EAGER[base]
        call = spec["make"](torch, *spec["sizes"][size])
        if group == "compiled":
            torch._dynamo.reset()
            return torch.compile(call)
        return call
    from kernelpro.evaluate.loader import load_module
    from kernelpro_plugins_expert.recognize import recognize
    from kernelpro_plugins_expert.render import default_params, gemm_params, render_candidate

    source = TEMPLATE[name][size]
    rec = recognize(source)
    params = gemm_params(rec) or default_params(rec)
    if not params.get("lower"):
        raise RuntimeError(f"the expert generator recognizes no kernel region in {name}")
    text = render_candidate(source, rec, params)
    out = (sources or Path("/tmp")) / f"{name}@{size}.py"
    out.write_text(text)
    (out.parent / f"{name}@{size}.problem.py").write_text(source)
    prob = load_module(out.parent / f"{name}@{size}.problem.py", f"prob_{name}_{size}")
    cand = load_module(out, f"cand_{name}_{size}")
    torch.manual_seed(0)
    model = cand.ModelNew(*prob.get_init_inputs()).cuda()
    inputs = [x.cuda() for x in prob.get_inputs()]
    return lambda: model(*inputs)


def run(group: str, sources: Path | None) -> int:
    import torch

    torch.manual_seed(0)
    done: list[dict[str, Any]] = []
    # KP_CORPUS_DEADLINE (seconds since the epoch): no workload starts after it, so that the
    # profiler ends normally and writes its report
    deadline = float(os.environ.get("KP_CORPUS_DEADLINE", "inf"))
    for name, size in workloads(group):
        label = f"{name}@{size}"
        if time.time() > deadline:
            done.append({"workload": label, "ok": False, "error": "skipped: the capture's time was up"})
            print(json.dumps(done[-1]), flush=True)
            continue
        try:
            with torch.no_grad():
                call = _build(group, name, size, sources)
                for _ in range(3):
                    call()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_push(label)
                torch.cuda.profiler.start()
                call()
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
                torch.cuda.nvtx.range_pop()
            done.append({"workload": label, "ok": True})
        except Exception as exc:  # recorded, the next workload still runs
            torch.cuda.synchronize()
            done.append({"workload": label, "ok": False,
                         "error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"})
            traceback.print_exc(limit=3)
        torch.cuda.empty_cache()
        print(json.dumps(done[-1]), flush=True)
    return 0 if any(d["ok"] for d in done) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("group", choices=["eager", "compiled", "template"])
    r.add_argument("--sources", type=Path)
    sub.add_parser("list")
    args = ap.parse_args()
    if args.cmd == "list":
        for group in ("eager", "compiled", "template"):
            for name, size in workloads(group):
                print(group, f"{name}@{size}")
        return 0
    return run(args.group, args.sources)


if __name__ == "__main__":
    sys.exit(main())
