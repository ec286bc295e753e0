#!/usr/bin/env python3
"""The kernels of the micro-profiler corpus: PyTorch's own kernels across operator families,
the Triton kernels torch.compile writes for some of the same operations, and the expert
generator's template kernels, each at a size past the H200's L2 and at a launch-bound size.

Run under Nsight Compute with ``--profile-from-start off`` (``capture.py`` does):

    python3 workloads.py run GROUP [--sources DIR]

GROUP is ``eager``, ``compiled`` or ``template`` (the first corpus), or ``eager_v2`` or
``compiled_v2`` (the validation corpus v2: other operator families, fixed before its capture
and never tuned on; ``benchmarks/ncu_corpus/validation_v2.md``), or ``eager_v3`` (corpus v3,
``validation_v3.md``: families neither has, after v2 became tuning data), or ``eager_v4``
(corpus v4, ``validation_v4.md``: families none of them has, after v3 became tuning data), or
``eager_v5`` (corpus v5, ``validation_v5.md``: the same, after v4 became tuning data), or
``eager_v6`` (corpus v6, ``validation_v6.md``: the same, after v5), or ``eager_v7`` (corpus v7,
``validation_v7.md``: the same, after v6). Each workload is built,
run three times (warm-up, torch.compile's compilation and autotuning happen there), then
run once inside an NVTX range named ``<workload>@<size>`` between ``cudaProfilerStart`` and
``cudaProfilerStop``: the kernels of that one call are the ones profiled. ``--sources DIR``
writes each template candidate's source there; torch.compile's generated code is found in
its cache directory (``TORCHINDUCTOR_CACHE_DIR``) by ``capture.py``.

``python3 workloads.py list`` prints the workloads and sizes without a GPU.
``KP_CORPUS_DEVICE`` (default ``cuda``) puts the eager builders' tensors elsewhere (``cpu``
for the tests; ``run`` itself needs CUDA).
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

#: where the eager builders put their tensors: the GPU under ncu; ``KP_CORPUS_DEVICE=cpu``
#: (or ``meta``) lets the tests build and run them without one. The template group always
#: runs on CUDA.
DEVICE = os.environ.get("KP_CORPUS_DEVICE", "cuda")


def _eager(size_args: dict[str, tuple[Any, ...]], make: Callable[..., Callable[[], Any]]) -> dict[str, Any]:
    return {"sizes": size_args, "make": make}


def _softmax(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.softmax(x, dim=-1)


def _layer_norm(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    w, b = t.randn(cols, device=DEVICE), t.randn(cols, device=DEVICE)
    return lambda: t.nn.functional.layer_norm(x, (cols,), w, b)


def _group_norm(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    w, b = t.randn(c, device=DEVICE), t.randn(c, device=DEVICE)
    return lambda: t.nn.functional.group_norm(x, 32 if c >= 32 else 4, w, b)


def _batch_norm(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    rm, rv = t.zeros(c, device=DEVICE), t.ones(c, device=DEVICE)
    w, b = t.randn(c, device=DEVICE), t.randn(c, device=DEVICE)
    return lambda: t.nn.functional.batch_norm(x, rm, rv, w, b, training=True)


def _sum_rows(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: x.sum(-1)


def _sum_cols(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: x.sum(0)


def _cumsum(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.cumsum(x, 1)


def _bias_mul(t, rows, cols):
    x, y = t.randn(rows, cols, device=DEVICE), t.randn(rows, cols, device=DEVICE)
    b = t.randn(cols, device=DEVICE)
    return lambda: (x + b[None, :]) * y


def _gelu(t, n):
    x = t.randn(n, device=DEVICE)
    return lambda: t.nn.functional.gelu(x)


def _index_select(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    idx = t.randint(0, rows, (rows,), device=DEVICE)
    return lambda: x.index_select(0, idx)


def _embedding(t, vocab, dim, count):
    w = t.randn(vocab, dim, device=DEVICE)
    idx = t.randint(0, vocab, (count,), device=DEVICE)
    return lambda: t.nn.functional.embedding(idx, w)


def _transpose(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: x.t().contiguous()


def _max_pool(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.max_pool2d(x, 3, 2, 1)


def _conv(t, n, cin, hw, cout):
    x = t.randn(n, cin, hw, hw, device=DEVICE)
    w = t.randn(cout, cin, 3, 3, device=DEVICE)
    return lambda: t.nn.functional.conv2d(x, w, padding=1)


def _matmul(dtype_name, tf32=False):
    def make(t, m, n, k):
        t.backends.cuda.matmul.allow_tf32 = tf32
        dtype = getattr(t, dtype_name)
        a, b = t.randn(m, k, device=DEVICE, dtype=dtype), t.randn(k, n, device=DEVICE, dtype=dtype)
        return lambda: a @ b
    return make


def _argmax(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: x.argmax(-1)


def _cross_entropy(t, rows, classes):
    x = t.randn(rows, classes, device=DEVICE)
    y = t.randint(0, classes, (rows,), device=DEVICE)
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


# ---- validation corpus v2 (fixed 2026-12-03 before any capture; benchmarks/ncu_corpus/
# validation_v2.md): operator families the first corpus does not hold. Not to be tuned on.
# Per large workload, the bytes of every tensor it creates (inputs, intermediates, output;
# tests/ncu/test_ncu_corpus_v2_workloads.py computes them on the meta device) in brackets.

def _log_softmax(t, rows, cols):
    # rows of 4096: by PyTorch's source, its register-resident softmax kernel
    # (cunn_SoftMaxForwardReg, rows of 2049 to ~9000 fp32); the first corpus has the warp
    # and the generic ones
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.log_softmax(x, dim=-1)


def _softmax_cols(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.softmax(x, dim=0)


def _instance_norm(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.instance_norm(x)


def _layer_norm_bf16(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE, dtype=t.bfloat16)
    w = t.randn(cols, device=DEVICE, dtype=t.bfloat16)
    b = t.randn(cols, device=DEVICE, dtype=t.bfloat16)
    return lambda: t.nn.functional.layer_norm(x, (cols,), w, b)


def _rms_normalize(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: x * t.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def _std_rows(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: x.std(-1)


def _avg_pool(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.avg_pool2d(x, 3, 2, 1)


def _adaptive_avg_pool(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.adaptive_avg_pool2d(x, 7)


def _upsample_bilinear(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)


def _gather_cols(t, rows, cols, picked):
    x = t.randn(rows, cols, device=DEVICE)
    idx = t.randint(0, cols, (rows, picked), device=DEVICE)
    return lambda: t.gather(x, 1, idx)


def _scatter_add(t, rows, cols):
    base, src = t.zeros(rows, cols, device=DEVICE), t.randn(rows, cols, device=DEVICE)
    idx = t.randint(0, cols, (rows, cols), device=DEVICE)
    return lambda: base.scatter_add(1, idx, src)


def _where(t, n):
    x, y = t.randn(n, device=DEVICE), t.randn(n, device=DEVICE)
    mask = t.rand(n, device=DEVICE) > 0.5
    return lambda: t.where(mask, x, y)


def _clamp_fp16(t, n):
    x = t.randn(n, device=DEVICE, dtype=t.float16)
    return lambda: x.clamp(-1.0, 1.0)


def _broadcast3(t, a, b, c):
    x, y = t.randn(a, c, device=DEVICE), t.randn(b, c, device=DEVICE)
    return lambda: x[:, None, :] * y[None, :, :]


def _cat_cols(t, rows, cols):
    x, y = t.randn(rows, cols, device=DEVICE), t.randn(rows, cols, device=DEVICE)
    return lambda: t.cat([x, y], dim=1)


def _flip_cols(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: x.flip(-1)


def _channels_last(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: x.contiguous(memory_format=t.channels_last)


def _bmm(dtype_name):
    def make(t, batch, m, n, k):
        t.backends.cuda.matmul.allow_tf32 = False  # fp32 stays fp32 (the old group's tf32 GEMM sets it)
        dtype = getattr(t, dtype_name)
        a = t.randn(batch, m, k, device=DEVICE, dtype=dtype)
        b = t.randn(batch, k, n, device=DEVICE, dtype=dtype)
        return lambda: t.bmm(a, b)
    return make


def _conv_transpose(t, n, cin, hw, cout):
    x = t.randn(n, cin, hw, hw, device=DEVICE)
    w = t.randn(cin, cout, 4, 4, device=DEVICE)
    return lambda: t.nn.functional.conv_transpose2d(x, w, stride=2, padding=1)


def _depthwise_conv(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    w = t.randn(c, 1, 3, 3, device=DEVICE)
    return lambda: t.nn.functional.conv2d(x, w, padding=1, groups=c)


def _mse_loss(t, n):
    x, y = t.randn(n, device=DEVICE), t.randn(n, device=DEVICE)
    return lambda: t.nn.functional.mse_loss(x, y)


def _topk(t, rows, cols, k):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.topk(x, k, dim=-1)


# name -> sizes (large: past the 50 MB L2; small: launch-bound) and the builder. The order is
# the capture's: a workload past the group's deadline is skipped, so the ones with many
# kernels per call come last.
EAGER_V2: dict[str, dict[str, Any]] = {
    "log_softmax_rows": _eager({"large": (16384, 4096), "small": (64, 4096)}, _log_softmax),  # [537 MB]
    "softmax_cols": _eager({"large": (4096, 16384), "small": (64, 1024)}, _softmax_cols),  # [537 MB]
    "layer_norm_bf16": _eager({"large": (16384, 4096), "small": (64, 1024)}, _layer_norm_bf16),  # [269 MB]
    "std_rows": _eager({"large": (16384, 4096), "small": (64, 1024)}, _std_rows),  # [268 MB]
    "avg_pool2d": _eager({"large": (32, 128, 112), "small": (2, 16, 32)}, _avg_pool),  # [257 MB]
    "adaptive_avg_pool2d": _eager({"large": (64, 256, 56), "small": (2, 16, 14)}, _adaptive_avg_pool),  # [209 MB]
    "upsample_bilinear": _eager({"large": (16, 64, 128), "small": (2, 16, 16)}, _upsample_bilinear),  # [336 MB]
    "gather_cols": _eager({"large": (16384, 4096, 1024), "small": (64, 1024, 256)}, _gather_cols),  # [470 MB]
    "where_select": _eager({"large": (32 << 20,), "small": (1 << 16,)}, _where),  # [570 MB]
    "clamp_fp16": _eager({"large": (128 << 20,), "small": (1 << 16,)}, _clamp_fp16),  # [537 MB]
    "broadcast3_mul": _eager({"large": (256, 256, 1024), "small": (8, 8, 1024)}, _broadcast3),  # [271 MB]
    "cat_cols": _eager({"large": (8192, 4096), "small": (64, 1024)}, _cat_cols),  # [537 MB]
    "flip_cols": _eager({"large": (8192, 8192), "small": (256, 256)}, _flip_cols),  # [537 MB]
    "to_channels_last": _eager({"large": (32, 128, 112), "small": (2, 16, 32)}, _channels_last),  # [411 MB]
    "bmm_fp32": _eager({"large": (32, 1024, 1024, 1024), "small": (4, 64, 64, 64)}, _bmm("float32")),  # [403 MB]
    # attention-score shaped: inputs of 32 MB, an output of 256 MB
    "bmm_bf16": _eager({"large": (128, 1024, 1024, 128), "small": (4, 64, 64, 64)}, _bmm("bfloat16")),  # [336 MB]
    "conv_transpose2d": _eager({"large": (32, 128, 64, 64), "small": (1, 16, 16, 16)}, _conv_transpose),  # [202 MB]
    "depthwise_conv2d": _eager({"large": (32, 512, 56), "small": (1, 16, 16)}, _depthwise_conv),  # [411 MB]
    "topk_rows": _eager({"large": (16384, 4096, 16), "small": (64, 1024, 16)}, _topk),  # [272 MB]
    "instance_norm": _eager({"large": (32, 128, 128), "small": (2, 16, 16)}, _instance_norm),  # [537 MB]
    "scatter_add_cols": _eager({"large": (8192, 4096), "small": (64, 1024)}, _scatter_add),  # [671 MB]
    "mse_loss": _eager({"large": (32 << 20,), "small": (1 << 16,)}, _mse_loss),  # [268 MB + 134 MB inside mse_loss]
    "rms_normalize": _eager({"large": (16384, 4096), "small": (64, 1024)}, _rms_normalize),  # [805 MB]
}

# torch.compile (default mode) of eight of them, where Inductor writes Triton kernels:
# normalizations, reductions, pointwise with broadcasting, losses (kernel names ``tc2_``)
COMPILED_V2 = {name: EAGER_V2[name] for name in (
    "log_softmax_rows", "softmax_cols", "layer_norm_bf16", "rms_normalize", "std_rows",
    "broadcast3_mul", "mse_loss", "instance_norm")}


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


# ---- validation corpus v3 (benchmarks/ncu_corpus/validation_v3.md): families neither the
# first corpus nor v2 has, fixed on 2026-12-04 before its capture


def _roll_cols(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.roll(x, 7, 1)


def _unfold(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.unfold(x, 3, padding=1)


def _histc(t, n):
    x = t.randn(n, device=DEVICE)
    return lambda: t.histc(x, bins=256, min=-4.0, max=4.0)


def _embedding_bag(t, vocab, dim, bags, per_bag):
    w = t.randn(vocab, dim, device=DEVICE)
    idx = t.randint(0, vocab, (bags, per_bag), device=DEVICE)
    return lambda: t.nn.functional.embedding_bag(idx, w, mode="mean")


def _grid_sample(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    grid = t.rand(n, hw, hw, 2, device=DEVICE) * 2 - 1
    return lambda: t.nn.functional.grid_sample(x, grid, mode="bilinear", align_corners=False)


def _cdist_p1(t, m, n, d):
    x, y = t.randn(m, d, device=DEVICE), t.randn(n, d, device=DEVICE)
    return lambda: t.cdist(x, y, p=1.0)


def _rfft_rows(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.fft.rfft(x, dim=-1)


def _sdpa_bf16(t, b, h, s, d):
    q, k, v = (t.randn(b, h, s, d, device=DEVICE, dtype=t.bfloat16) for _ in range(3))
    return lambda: t.nn.functional.scaled_dot_product_attention(q, k, v)


def _mv_fp32(t, rows, cols):
    a, v = t.randn(rows, cols, device=DEVICE), t.randn(cols, device=DEVICE)
    return lambda: t.mv(a, v)


def _dropout_train(t, n):
    x = t.randn(n, device=DEVICE)
    return lambda: t.nn.functional.dropout(x, 0.1, training=True)


def _searchsorted(t, edges, n):
    b = t.sort(t.randn(edges, device=DEVICE)).values
    v = t.randn(n, device=DEVICE)
    return lambda: t.searchsorted(b, v)


def _nonzero(t, n):
    x = t.randn(n, device=DEVICE)
    return lambda: t.nonzero(x > 0)


EAGER_V3: dict[str, dict[str, Any]] = {
    "roll_cols": _eager({"large": (8192, 8192), "small": (256, 256)}, _roll_cols),
    "unfold_im2col": _eager({"large": (16, 64, 64), "small": (1, 4, 16)}, _unfold),
    "histc": _eager({"large": (64 << 20,), "small": (1 << 16,)}, _histc),
    "embedding_bag_mean": _eager({"large": (262144, 256, 8192, 32), "small": (1024, 64, 16, 8)}, _embedding_bag),
    "grid_sample_bilinear": _eager({"large": (32, 64, 128), "small": (1, 4, 16)}, _grid_sample),
    "cdist_p1": _eager({"large": (4096, 16384, 64), "small": (64, 64, 16)}, _cdist_p1),
    "rfft_rows": _eager({"large": (8192, 4096), "small": (64, 256)}, _rfft_rows),
    "sdpa_bf16": _eager({"large": (16, 16, 2048, 64), "small": (1, 2, 64, 64)}, _sdpa_bf16),
    "mv_fp32": _eager({"large": (16384, 8192), "small": (256, 256)}, _mv_fp32),
    "dropout_train": _eager({"large": (64 << 20,), "small": (1 << 16,)}, _dropout_train),
    "searchsorted": _eager({"large": (1 << 20, 64 << 20), "small": (1024, 1 << 16)}, _searchsorted),
    "nonzero": _eager({"large": (64 << 20,), "small": (1 << 16,)}, _nonzero),
}


def _sort_rows(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.sort(x, dim=-1)


def _index_put_acc(t, table, n):
    base = t.zeros(table, device=DEVICE)
    idx = t.randint(0, table, (n,), device=DEVICE)
    vals = t.randn(n, device=DEVICE)
    return lambda: base.index_put((idx,), vals, accumulate=True)


def _kthvalue_rows(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.kthvalue(x, cols // 2, dim=-1)


def _reflection_pad2d(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.pad(x, (3, 3, 3, 3), mode="reflect")


def _triu(t, rows, cols):
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.triu(x, 1)


def _lstm(t, seq, batch, hidden):
    lstm = t.nn.LSTM(hidden, hidden).to(DEVICE)
    x = t.randn(seq, batch, hidden, device=DEVICE)
    return lambda: lstm(x)[0]


def _conv3d(t, n, cin, d, hw):
    x = t.randn(n, cin, d, hw, hw, device=DEVICE)
    w = t.randn(cin, cin, 3, 3, 3, device=DEVICE) * 0.05
    return lambda: t.nn.functional.conv3d(x, w, padding=1)


def _max_pool3d(t, n, c, d, hw):
    x = t.randn(n, c, d, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.max_pool3d(x, 2)


#: corpus v4 (``benchmarks/ncu_corpus/validation_v4.md``): families none of v1-v3 has, fixed
#: before its capture and before the micro-profiler changes of the session that captured it
EAGER_V4: dict[str, dict[str, Any]] = {
    "sort_rows": _eager({"large": (4096, 8192), "small": (64, 256)}, _sort_rows),
    "index_put_acc": _eager({"large": (1 << 20, 16 << 20), "small": (1024, 4096)}, _index_put_acc),
    "kthvalue_rows": _eager({"large": (8192, 8192), "small": (64, 256)}, _kthvalue_rows),
    "reflection_pad2d": _eager({"large": (32, 64, 128), "small": (1, 4, 16)}, _reflection_pad2d),
    "triu": _eager({"large": (8192, 8192), "small": (256, 256)}, _triu),
    "lstm_cudnn": _eager({"large": (256, 64, 1024), "small": (8, 2, 32)}, _lstm),
    "conv3d": _eager({"large": (8, 32, 32, 64), "small": (1, 4, 4, 8)}, _conv3d),
    "max_pool3d": _eager({"large": (16, 32, 32, 64), "small": (1, 4, 4, 8)}, _max_pool3d),
}


def _int8_mm(t, m, k, n):
    a = t.randint(-8, 8, (m, k), dtype=t.int8, device=DEVICE)
    b = t.randint(-8, 8, (k, n), dtype=t.int8, device=DEVICE)
    return lambda: t._int_mm(a, b)


def _atan2(t, n):
    y, x = t.randn(n, device=DEVICE), t.randn(n, device=DEVICE)
    return lambda: t.atan2(y, x)


def _exp_fp64(t, n):
    x = t.randn(n, device=DEVICE, dtype=t.float64)
    return lambda: t.exp(x)


def _layer_norm_backward(t, rows, cols):
    """The backward kernels of a layer norm alone: the forward and its graph are built once."""
    with t.enable_grad():
        x = t.randn(rows, cols, device=DEVICE, requires_grad=True)
        w = t.ones(cols, device=DEVICE, requires_grad=True)
        b = t.zeros(cols, device=DEVICE, requires_grad=True)
        y = t.nn.functional.layer_norm(x, (cols,), w, b)
    grad = t.randn(rows, cols, device=DEVICE)

    def call():
        with t.enable_grad():
            return t.autograd.grad(y, (x, w, b), grad, retain_graph=True)

    return call


def _fold(t, n, c, hw):
    cols = t.randn(n, c * 9, hw * hw, device=DEVICE)
    return lambda: t.nn.functional.fold(cols, (hw, hw), 3, padding=1)


def _adaptive_max_pool(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.adaptive_max_pool2d(x, (7, 7))


def _pixel_shuffle(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.pixel_shuffle(x, 2)


def _multinomial(t, rows, cols, draws):
    probs = t.rand(rows, cols, device=DEVICE)
    return lambda: t.multinomial(probs, draws, replacement=True)


#: corpus v5 (``benchmarks/ncu_corpus/validation_v5.md``): families none of v1-v4 has, fixed
#: in session 14 before its capture and before that session changed any micro-profiler
EAGER_V5: dict[str, dict[str, Any]] = {
    "int8_mm": _eager({"large": (8192, 8192, 8192), "small": (32, 64, 32)}, _int8_mm),
    "atan2": _eager({"large": (32 << 20,), "small": (1 << 16,)}, _atan2),
    "exp_fp64": _eager({"large": (32 << 20,), "small": (1 << 16,)}, _exp_fp64),
    "layer_norm_backward": _eager({"large": (8192, 4096), "small": (64, 256)}, _layer_norm_backward),
    "fold_col2im": _eager({"large": (16, 64, 64), "small": (1, 4, 16)}, _fold),
    "adaptive_max_pool2d": _eager({"large": (64, 64, 128), "small": (1, 4, 16)}, _adaptive_max_pool),
    "pixel_shuffle": _eager({"large": (16, 256, 128), "small": (1, 16, 16)}, _pixel_shuffle),
    "multinomial": _eager({"large": (8192, 8192, 64), "small": (64, 256, 16)}, _multinomial),
}


def _fp8_mm(t, m, k, n):
    """float8 e4m3 x e4m3 -> bf16 with per-tensor scales (Hopper's FP8 tensor cores). The
    operands are drawn as bytes and viewed as float8 (exponents 6 to 8: values 0.5 to 3.75,
    no NaN pattern), so that no float tensor is converted; the second one is column-major, as
    _scaled_mm requires."""
    a = t.randint(0x30, 0x48, (m, k), dtype=t.uint8, device=DEVICE).view(t.float8_e4m3fn)
    b = t.randint(0x30, 0x48, (n, k), dtype=t.uint8, device=DEVICE).view(t.float8_e4m3fn).t()
    one = t.ones((), device=DEVICE)
    return lambda: t._scaled_mm(a, b, one, one, out_dtype=t.bfloat16)


def _remainder_int64(t, n):
    # operands past 32 bits, so that the 64-bit division is not shortened to a 32-bit one
    a = t.randint(-(1 << 62), 1 << 62, (n,), device=DEVICE)
    b = t.randint(1, 1 << 40, (n,), device=DEVICE)
    return lambda: t.remainder(a, b)


def _cumprod_outer(t, batch, steps, features):
    """cumprod over the middle dimension of (batch, steps, features): the scan over a dimension
    that is not the innermost (factors near 1, so that the products stay finite)."""
    x = t.rand(batch, steps, features, device=DEVICE)
    x.mul_(0.02).add_(0.99)
    return lambda: t.cumprod(x, 1)


def _upsample_bicubic(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)


def _ctc_loss(t, steps, batch, classes, target_len):
    """The forward (alpha) recursion of CTC, per sample: (steps, batch, classes) log-probabilities,
    int64 targets of target_len labels on the device (cuDNN's path takes int32 targets: not taken)."""
    log_probs = t.randn(steps, batch, classes, device=DEVICE)
    log_probs.sub_(log_probs.logsumexp(-1, keepdim=True))
    targets = t.randint(1, classes, (batch, target_len), device=DEVICE)
    steps_each, target_each = (steps,) * batch, (target_len,) * batch
    return lambda: t.nn.functional.ctc_loss(log_probs, targets, steps_each, target_each, reduction="none")


def _index_add_rows(t, rows, cols, picked):
    """index_add_ of picked source rows into a table of rows (in place: no copy of the table)."""
    base = t.zeros(rows, cols, device=DEVICE)
    idx = t.randint(0, rows, (picked,), device=DEVICE)
    src = t.randn(picked, cols, device=DEVICE)
    return lambda: base.index_add_(0, idx, src)


def _spmm_csr(t, rows, cols, dense_cols, per_row):
    """A CSR matrix (rows x cols, per_row nonzeros in each row) times a dense (cols x dense_cols)
    one: cuSPARSE's SpMM. Row r's j-th nonzero is in column j * (cols // per_row) + offset_r, so
    that the column indices are sorted and unique without a sort."""
    band = cols // per_row
    crow = t.arange(0, rows * per_row + 1, per_row, device=DEVICE)
    col = (t.randint(0, band, (rows, 1), device=DEVICE) + t.arange(0, cols, band, device=DEVICE)).reshape(-1)
    a = t.sparse_csr_tensor(crow, col, t.randn(rows * per_row, device=DEVICE), (rows, cols))
    b = t.randn(cols, dense_cols, device=DEVICE)
    return lambda: a @ b


def _normal_fill(t, n):
    x = t.empty(n, device=DEVICE)
    return lambda: x.normal_()


#: corpus v6 (``benchmarks/ncu_corpus/validation_v6.md``): families none of v1-v5 has, fixed
#: in session 17 before its capture
EAGER_V6: dict[str, dict[str, Any]] = {
    "fp8_scaled_mm": _eager({"large": (8192, 8192, 8192), "small": (32, 64, 32)}, _fp8_mm),
    "remainder_int64": _eager({"large": (16 << 20,), "small": (1 << 16,)}, _remainder_int64),
    "cumprod_outer": _eager({"large": (64, 512, 1024), "small": (2, 32, 256)}, _cumprod_outer),
    "upsample_bicubic": _eager({"large": (4, 64, 256), "small": (1, 4, 16)}, _upsample_bicubic),
    "ctc_loss": _eager({"large": (256, 512, 256, 64), "small": (32, 4, 32, 8)}, _ctc_loss),
    "index_add_rows": _eager({"large": (65536, 256, 262144), "small": (1024, 64, 4096)}, _index_add_rows),
    "normal_fill": _eager({"large": (64 << 20,), "small": (1 << 16,)}, _normal_fill),
    "spmm_csr": _eager({"large": (65536, 131072, 256, 32), "small": (256, 256, 32, 8)}, _spmm_csr),
}


def _upsample_nearest(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.interpolate(x, scale_factor=2, mode="nearest")


def _upsample_trilinear(t, n, c, d, hw):
    x = t.randn(n, c, d, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.interpolate(x, scale_factor=2, mode="trilinear", align_corners=False)


def _cummax_rows(t, rows, cols):
    """cummax along each row: the scan that carries an index with its value."""
    x = t.randn(rows, cols, device=DEVICE)
    return lambda: t.cummax(x, 1)


def _max_unpool(t, n, c, hw):
    """max_unpool2d with a 2 x 2 window: the pooled values scattered back to the positions the
    indices name (one of each window's four, drawn), zeros elsewhere. The indices are built
    directly, without running a max-pool first."""
    x = t.randn(n, c, hw, hw, device=DEVICE)
    row = t.arange(hw, device=DEVICE).view(hw, 1) * 2
    col = t.arange(hw, device=DEVICE).view(1, hw) * 2
    pick = t.randint(0, 4, (n, c, hw, hw), device=DEVICE)
    idx = (row + pick // 2) * (2 * hw) + col + pick % 2
    return lambda: t.nn.functional.max_unpool2d(x, idx, 2)


def _avg_pool3d(t, n, c, d, hw):
    x = t.randn(n, c, d, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.avg_pool3d(x, 2)


def _replication_pad(t, n, c, hw):
    x = t.randn(n, c, hw, hw, device=DEVICE)
    return lambda: t.nn.functional.pad(x, (3, 3, 3, 3), mode="replicate")


def _pdist(t, n, d):
    """Every pairwise Euclidean distance of n points in d dimensions (the upper triangle)."""
    x = t.randn(n, d, device=DEVICE)
    return lambda: t.nn.functional.pdist(x)


def _cross3(t, n):
    a = t.randn(n, 3, device=DEVICE)
    b = t.randn(n, 3, device=DEVICE)
    return lambda: t.linalg.cross(a, b, dim=1)


#: corpus v7 (``benchmarks/ncu_corpus/validation_v7.md``): families none of v1-v6 has, fixed
#: in session 28 before its capture
EAGER_V7: dict[str, dict[str, Any]] = {
    "upsample_nearest2d": _eager({"large": (16, 64, 128), "small": (1, 4, 16)}, _upsample_nearest),
    "upsample_trilinear3d": _eager({"large": (4, 32, 32, 64), "small": (1, 2, 4, 8)}, _upsample_trilinear),
    "cummax_rows": _eager({"large": (4096, 4096), "small": (64, 256)}, _cummax_rows),
    "max_unpool2d": _eager({"large": (16, 64, 128), "small": (1, 4, 16)}, _max_unpool),
    "avg_pool3d": _eager({"large": (16, 32, 32, 64), "small": (1, 4, 4, 8)}, _avg_pool3d),
    "replication_pad2d": _eager({"large": (32, 64, 128), "small": (1, 4, 16)}, _replication_pad),
    "pdist": _eager({"large": (12288, 64), "small": (128, 16)}, _pdist),
    "cross3": _eager({"large": (8 << 20,), "small": (1 << 14,)}, _cross3),
}


#: group -> its table of eager builders and the prefix of its workload names (``template``
#: has its own table of problem sources)
TABLES: dict[str, tuple[dict[str, dict[str, Any]], str]] = {
    "eager": (EAGER, ""), "compiled": (COMPILED, "tc_"),
    "eager_v2": (EAGER_V2, ""), "compiled_v2": (COMPILED_V2, "tc2_"),
    "eager_v3": (EAGER_V3, ""), "eager_v4": (EAGER_V4, ""), "eager_v5": (EAGER_V5, ""),
    "eager_v6": (EAGER_V6, ""), "eager_v7": (EAGER_V7, ""),
}
COMPILED_GROUPS = ("compiled", "compiled_v2")
GROUPS = ("eager", "compiled", "template", "eager_v2", "compiled_v2", "eager_v3", "eager_v4", "eager_v5",
          "eager_v6", "eager_v7")


def workloads(group: str) -> list[tuple[str, str]]:
    if group == "template":
        return [(name, size) for name, spec in TEMPLATE.items() for size in spec]
    table, prefix = TABLES[group]
    return [(prefix + name, size) for name, spec in table.items() for size in spec["sizes"]]


def _build(group: str, name: str, size: str, sources: Path | None) -> Callable[[], Any]:
    import torch

    if group in TABLES:
        table, prefix = TABLES[group]
        spec = table[name[len(prefix):]]
        call = spec["make"](torch, *spec["sizes"][size])
        if group in COMPILED_GROUPS:
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


def selected(group: str, only: str | None = None) -> list[tuple[str, str]]:
    """The group's workloads, or those of the families named in ``only`` (comma-separated,
    ``KP_CORPUS_WORKLOADS``): a capture that ran out of time continues with the rest in a
    later call (its own archive), in the group's order."""
    every = workloads(group)
    if not only:
        return every
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    unknown = sorted(set(wanted) - {name for name, _ in every})
    if unknown:
        raise SystemExit(f"error: KP_CORPUS_WORKLOADS names no workload of {group}: {', '.join(unknown)}")
    return [(name, size) for name, size in every if name in wanted]


def run(group: str, sources: Path | None) -> int:
    import torch

    torch.manual_seed(0)
    done: list[dict[str, Any]] = []
    # KP_CORPUS_DEADLINE (seconds since the epoch): no workload starts after it, so that the
    # profiler ends normally and writes its report
    deadline = float(os.environ.get("KP_CORPUS_DEADLINE", "inf"))
    for name, size in selected(group, os.environ.get("KP_CORPUS_WORKLOADS")):
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
    r.add_argument("group", choices=GROUPS)
    r.add_argument("--sources", type=Path)
    sub.add_parser("list")
    args = ap.parse_args()
    if args.cmd == "list":
        for group in GROUPS:
            for name, size in workloads(group):
                print(group, f"{name}@{size}")
        return 0
    return run(args.group, args.sources)


if __name__ == "__main__":
    sys.exit(main())
