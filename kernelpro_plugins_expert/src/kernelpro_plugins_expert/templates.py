'''Jinja templates of the expert generator's kernels and of the candidate file around them.

Rendered by one Environment with StrictUndefined (a missing variable is an error, never
an empty string). Every kernel computes in fp32 and stores in the output's dtype.

* ``POINTWISE``: one fused kernel for a pointwise region. Inputs are indexed through
  their broadcast strides over the output's (coalesced) shape; an input that is
  contiguous with the output's shape is read at the flat offset (``CONTIG`` constexpr).
* ``ROWCOL``: reductions (sum/mean/max/min), the softmax family (softmax, log_softmax,
  logsumexp, online max/sum pass) and layernorm/rmsnorm over a tensor viewed as
  ``(outer, R, inner)``. Layout ``row`` (inner == 1): one program per row, a vector of
  ``BLOCK_R`` along it. Layout ``col`` (inner > 1): one program per (outer, block of
  ``BLOCK_I`` inner positions), a ``[BLOCK_R, BLOCK_I]`` tile that reads along the
  contiguous inner dimension. The reduced extent ``R`` is a constexpr: one compiled
  kernel per extent (fixed in KernelBench problems), and loops with Python-int bounds,
  which Triton's interpreter also runs under NumPy 2.4 (it cannot index a range with a
  runtime scalar there).
* A reduction-like kernel may carry a one-input pointwise ``prologue`` (applied to each
  loaded element, masked lanes reset to the op's neutral value) and ``epilogue`` (applied
  to each value before it is stored).
* ``GEMM``: a tiled tensor-core GEMM with its epilogue applied in registers (below).
* ``POOL``: max/avg pooling 1d/2d/3d with prologue and epilogue (below).
* ``CONV``: a dense 1-D/2-D convolution as an implicit GEMM on tensor cores (below).
* ``CANDIDATE``: the problem's source, the kernels, the fx rewrite that swaps each region
  for its kernel call, and optionally CUDA-graph capture of the whole forward.
'''

from __future__ import annotations

import jinja2

ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                         keep_trailing_newline=True)

POINTWISE = r"""
@triton.jit
def _kp_{{ rid }}_kernel({% for i in range(n_in) %}in{{ i }}_ptr, {% endfor %}out_ptr, n_elements,
        {% for d in range(rank) %}size{{ d }}, {% endfor %}

        {% for i in range(n_in) %}{% for d in range(rank) %}st{{ i }}_{{ d }}, {% endfor %}{% endfor %}

        {% for i in range(n_in) %}CONTIG{{ i }}: tl.constexpr, {% endfor %}INDEX64: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX64:
        # 64-bit index math only when an offset can pass 2**31 (int64 div/mod is slow)
        pid = pid.to(tl.int64)
{% set block_body %}
offs = start + tl.arange(0, BLOCK)
mask = offs < n_elements
rem = offs
{% for d in range(rank - 1, -1, -1) %}
i{{ d }} = rem % size{{ d }}
rem = rem // size{{ d }}
{% endfor %}
{% for i in range(n_in) %}
if CONTIG{{ i }}:
    off{{ i }} = offs
else:
    off{{ i }} = {% for d in range(rank) %}i{{ d }} * st{{ i }}_{{ d }}{% if not loop.last %} + {% endif %}{% endfor %}

a{{ i }} = tl.load(in{{ i }}_ptr + off{{ i }}, mask=mask, other=0.0).to(tl.float32)
{% endfor %}
{% for line in body %}
{{ line }}
{% endfor %}
tl.store(out_ptr + offs, {{ result }}.to(out_ptr.dtype.element_ty), mask=mask)
{% endset %}
{% if persistent %}
    # persistent: a fixed grid of programs walks the blocks with a grid stride
    for start in range(pid * BLOCK, n_elements, tl.num_programs(0) * BLOCK):
{{ block_body | indent(8, first=True) }}
{% else %}
    start = pid * BLOCK
{{ block_body | indent(4, first=True) }}
{% endif %}

_kp_{{ rid }}_plans = {}


def _kp_{{ rid }}(*xs):
    # the launch plan (shapes, strides, grid) depends only on the inputs' layout: computed
    # once per layout, so a call costs one lookup, one allocation and the launch
    key = tuple((tuple(x.shape), x.stride(), x.dtype, x.device) for x in xs)
    plan = _kp_{{ rid }}_plans.get(key)
    if plan is None:
        shape = _kp_torch.broadcast_shapes(*(x.shape for x in xs))
        dtype = xs[0].dtype
        for x in xs[1:]:
            dtype = _kp_torch.promote_types(dtype, x.dtype)
        n = _kp_prod(shape)
        sizes, strides = _kp_coalesce(tuple(shape), [x.expand(shape).stride() for x in xs], {{ rank }})
        contig = [x.is_contiguous() and tuple(x.shape) == tuple(shape) for x in xs]
        flat = [s for st in strides for s in st]
        reach = max([n] + [sum((sz - 1) * st for sz, st in zip(x.shape, x.stride())) + 1 for x in xs])
{% if persistent %}
        grid = (min(triton.cdiv(n, {{ BLOCK }}), {{ persistent }} * _kp_sm_count(xs[0].device)),)
{% else %}
        grid = (triton.cdiv(n, {{ BLOCK }}),)
{% endif %}
        if len(_kp_{{ rid }}_plans) >= 64:
            _kp_{{ rid }}_plans.clear()
        plan = _kp_{{ rid }}_plans[key] = (shape, dtype, n, (n, *sizes, *flat, *contig, reach >= 2**31), grid)
    shape, dtype, n, scalars, grid = plan
    out = _kp_torch.empty(shape, dtype=dtype, device=xs[0].device)
    if n == 0:
        return out
    _kp_{{ rid }}_kernel[grid](*xs, out, *scalars, BLOCK={{ BLOCK }}, num_warps={{ num_warps }})
    return out
"""

# The output of a row/column or split-row kernel's wrapper: the reduced shape (keepdim or
# not) for reductions, the input's shape for softmax and the norms. Shared by ROWCOL and SPLIT.
ROW_OUTPUT = r"""{% if op in ("sum", "mean", "max", "min", "logsumexp") %}
{% if keepdim %}
    out_shape = shape[:{{ dim }}] + (1,) * {{ ndims }} + shape[{{ dim }} + {{ ndims }}:]
{% else %}
    out_shape = shape[:{{ dim }}] + shape[{{ dim }} + {{ ndims }}:]
{% endif %}
    out = _kp_torch.empty(out_shape, dtype=x.dtype, device=x.device)
{% else %}
    out = _kp_torch.empty_like(x)
{% endif %}
"""

# Accumulator updates per op, written for a tile ``x`` (masked lanes get ``other``).
ROWCOL = r"""
@triton.jit
def _kp_{{ rid }}_kernel(x_ptr, out_ptr, {% if has_w %}w_ptr, {% endif %}{% if has_b %}b_ptr, {% endif %}inner, n_iblk, eps,
        R: tl.constexpr, BLOCK_R: tl.constexpr{% if layout == "col" %}, BLOCK_I: tl.constexpr{% endif %}):
    pid = tl.program_id(0).to(tl.int64)
{% if layout == "row" %}
    o = pid
    base = o * R
    lanes = tl.arange(0, BLOCK_R)
{% set T = "[BLOCK_R]" %}
{% set S = "" %}
{% else %}
    o = pid // n_iblk
    cols = (pid % n_iblk) * BLOCK_I + tl.arange(0, BLOCK_I)
    cmask = cols < inner
    base = o * R * inner
    lanes = tl.arange(0, BLOCK_R)
{% set T = "[BLOCK_R, BLOCK_I]" %}
{% set S = "[None, :]" %}
{% endif %}
{% macro tile(other) %}
{% if layout == "row" %}
        r = r0 + lanes
        m = r < R
        offs = base + r
{% else %}
        r = r0 + lanes
        m = (r < R)[:, None] & cmask[None, :]
        offs = base + r[:, None] * inner + cols[None, :]
{% endif %}
        x = tl.load(x_ptr + offs, mask=m, other={{ other }}).to(tl.float32)
{% for line in prologue %}
        {{ line }}
{% endfor %}
{% if prologue %}
        x = tl.where(m, {{ prologue_result }}, {{ other }})
{% endif %}
{% endmacro %}
{% macro epi(ind) %}
{% for line in epilogue %}
{{ ind }}{{ line }}
{% endfor %}
{% endmacro %}
{% macro store_stat(val) %}
{% if layout == "row" %}
    tl.store(out_ptr + o, ({{ val }}).to(out_ptr.dtype.element_ty))
{% else %}
    tl.store(out_ptr + o * inner + cols, ({{ val }}).to(out_ptr.dtype.element_ty), mask=cmask)
{% endif %}
{% endmacro %}
{% macro weights() %}
{% if has_w %}
{% if layout == "row" %}
        y = y * tl.load(w_ptr + r, mask=m, other=0.0).to(tl.float32)
{% else %}
        y = y * tl.load(w_ptr + r, mask=r < R, other=0.0).to(tl.float32)[:, None]
{% endif %}
{% endif %}
{% if has_b %}
{% if layout == "row" %}
        y = y + tl.load(b_ptr + r, mask=m, other=0.0).to(tl.float32)
{% else %}
        y = y + tl.load(b_ptr + r, mask=r < R, other=0.0).to(tl.float32)[:, None]
{% endif %}
{% endif %}
{% endmacro %}
{% macro multi_pass() %}
{% if op in ("softmax", "log_softmax", "logsumexp") %}
    mx = tl.full({{ T }}, float('-inf'), tl.float32)
    sm = tl.zeros({{ T }}, dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
{{ tile("float('-inf')") }}
        new = tl.maximum(mx, x)
        live = new != float('-inf')
        sm = sm * tl.where(live, tl.exp(mx - new), 0.0) + tl.where(live, tl.exp(x - new), 0.0)
        mx = new
    row_max = tl.max(mx, axis=0)
    row_sum = tl.sum(sm * tl.where(mx != float('-inf'), tl.exp(mx - row_max{{ S }}), 0.0), axis=0)
{% if op == "logsumexp" %}
    y = row_max + tl.log(row_sum)
{{ epi("    ") }}{{ store_stat("y") }}
{% else %}
    for r0 in range(0, R, BLOCK_R):
{{ tile("float('-inf')") }}
{% if op == "softmax" %}
        y = tl.exp(x - row_max{{ S }}) / row_sum{{ S }}
{% else %}
        y = x - row_max{{ S }} - tl.log(row_sum){{ S }}
{% endif %}
{{ epi("        ") }}        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
{% endif %}
{% elif op == "layer_norm" %}
    acc = tl.zeros({{ T }}, dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
{{ tile("0.0") }}
        acc += x
    mean = tl.sum(acc, axis=0) / R
    acc = tl.zeros({{ T }}, dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
{{ tile("0.0") }}
        d = tl.where(m, x - mean{{ S }}, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / R + eps)
    for r0 in range(0, R, BLOCK_R):
{{ tile("0.0") }}
        y = (x - mean{{ S }}) * rstd{{ S }}
{{ weights() }}
{{ epi("        ") }}        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
{% elif op == "rms_norm" %}
    acc = tl.zeros({{ T }}, dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
{{ tile("0.0") }}
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / R + eps)
    for r0 in range(0, R, BLOCK_R):
{{ tile("0.0") }}
        y = x * rstd{{ S }}
{{ weights() }}
{{ epi("        ") }}        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
{% endif %}
{% endmacro %}
{% if op in ("sum", "mean") %}
    acc = tl.zeros({{ T }}, dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
{{ tile("0.0") }}
        acc += x
    total = tl.sum(acc, axis=0)
{% if op == "mean" %}
    total = total / R
{% endif %}
    y = total
{{ epi("    ") }}{{ store_stat("y") }}
{% elif op in ("max", "min") %}
    acc = tl.full({{ T }}, {{ "float('-inf')" if op == "max" else "float('inf')" }}, tl.float32)
    for r0 in range(0, R, BLOCK_R):
{{ tile("float('-inf')" if op == "max" else "float('inf')") }}
        acc = {{ "tl.maximum" if op == "max" else "tl.minimum" }}(acc, x)
    total = {{ "tl.max" if op == "max" else "tl.min" }}(acc, axis=0)
    y = total
{{ epi("    ") }}{{ store_stat("y") }}
{% elif op in ("softmax", "log_softmax", "layer_norm", "rms_norm") %}
    if BLOCK_R >= R:
        # the whole reduced extent fits one tile: read once, keep it in registers
        r0 = 0
{{ tile("float('-inf')" if op in ("softmax", "log_softmax") else "0.0") }}
{% if op in ("softmax", "log_softmax") %}
        row_max = tl.max(x, axis=0)
        e = tl.exp(x - row_max{{ S }})
        row_sum = tl.sum(e, axis=0)
{% if op == "softmax" %}
        y = e / row_sum{{ S }}
{% else %}
        y = x - row_max{{ S }} - tl.log(row_sum){{ S }}
{% endif %}
{% elif op == "layer_norm" %}
        mean = tl.sum(x, axis=0) / R
        d = tl.where(m, x - mean{{ S }}, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / R + eps)
        y = d * rstd{{ S }}
{{ weights() }}
{% else %}
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / R + eps)
        y = x * rstd{{ S }}
{{ weights() }}
{% endif %}
{{ epi("        ") }}        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
    else:
{{ multi_pass() | indent(4, first=True) }}
{% else %}
{{ multi_pass() }}
{% endif %}


def _kp_{{ rid }}(x{% if has_w %}, w{% endif %}{% if has_b %}, b{% endif %}):
    x = x.contiguous()
    shape = tuple(x.shape)
{% if op == "layer_norm" %}
    k = {{ normalized_ndim }}
    outer, R, inner = _kp_prod(shape[:-k]), _kp_prod(shape[-k:]), 1
{% elif op == "rms_norm" and normalized_ndim %}
    k = {{ normalized_ndim }}
    outer, R, inner = _kp_prod(shape[:-k]), _kp_prod(shape[-k:]), 1
{% else %}
    d, k = {{ dim }}, {{ ndims }}
    outer, R, inner = _kp_prod(shape[:d]), _kp_prod(shape[d:d + k]), _kp_prod(shape[d + k:])
{% endif %}
    if inner != {{ "1" if layout == "row" else "inner" }}{% if layout == "col" %} or inner == 1{% endif %}:
        raise RuntimeError("expert kernel _kp_{{ rid }} was written for layout {{ layout }}, got inner=%d" % inner)
""" + ROW_OUTPUT + r"""{% if layout == "row" %}
    n_iblk = 1
    grid = (outer,)
{% else %}
    n_iblk = triton.cdiv(inner, {{ BLOCK_I }})
    grid = (outer * n_iblk,)
{% endif %}
    if out.numel() == 0 or R == 0:
        return out
    _kp_{{ rid }}_kernel[grid](x, out, {% if has_w %}w.contiguous(), {% endif %}{% if has_b %}b.contiguous(), {% endif %}inner, n_iblk, {{ eps }},
                             R=R, BLOCK_R={{ BLOCK_R }}{% if layout == "col" %}, BLOCK_I={{ BLOCK_I }}{% endif %}, num_warps={{ num_warps }})
    return out
"""

CANDIDATE = r'''# KernelPro candidate (generator: expert): {{ description }}
# Parameters: {{ params_json }}
# The problem's source follows unchanged; ModelNew builds Model (same parameters under the
# same seed), traces it with torch.fx and replaces each recognized region by a kernel call.
{{ problem_source }}


import json as _kp_json
import math as _kp_math
import torch as _kp_torch
import torch.fx as _kp_fx
{% if kernels %}
import triton
import triton.language as tl


def _kp_prod(values):
    out = 1
    for v in values:
        out *= int(v)
    return out


_KP_SMS = {}


def _kp_sm_count(device):
    """Streaming multiprocessors of ``device`` (persistent grids); 4 off the GPU (interpreter)."""
    if device.type != "cuda":
        return 4
    if device.index not in _KP_SMS:
        _KP_SMS[device.index] = _kp_torch.cuda.get_device_properties(device).multi_processor_count
    return _KP_SMS[device.index]


def _kp_coalesce(shape, strides, rank):
    """Merge adjacent dims that every input walks contiguously; pad to ``rank`` dims."""
    dims = [(shape[d], [st[d] for st in strides]) for d in range(len(shape)) if shape[d] != 1]
    merged = []
    for size, st in dims:
        if merged:
            psize, pst = merged[-1]
            if all(p == s * size for p, s in zip(pst, st)):
                merged[-1] = (psize * size, st)
                continue
        merged.append((size, st))
    while len(merged) < rank:
        merged.insert(0, (1, [0] * len(strides)))
    if len(merged) > rank:
        raise RuntimeError("expert kernel: %d dims after coalescing, written for %d" % (len(merged), rank))
    sizes = [m[0] for m in merged]
    per_input = [[m[1][i] for m in merged] for i in range(len(strides))]
    return sizes, per_input


@triton.jit
def _kp_grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row-block, column-block) of program ``pid`` over an M x N output, in groups of
    GROUP_M row-blocks: consecutive programs share a column-block of B (kept in L2)."""
    n_m = tl.cdiv(M, BLOCK_M)
    n_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * n_n
    first_m = (pid // per_group) * GROUP_M
    rows_here = tl.minimum(n_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % rows_here, (pid % per_group) // rows_here
{% if fast_log %}


@triton.jit
def _kp_log_sfu(x):
    """ln x as log2(x) from the special-function unit (PTX lg2.approx.f32, without .ftz:
    subnormal inputs are kept; log2(0) = -inf, log2 of a negative number NaN) times ln 2:
    one instruction where libdevice's logf is a polynomial of about twenty. An
    approximation: the evaluator's tolerance check decides whether it stands."""
    return tl.inline_asm_elementwise("lg2.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                     pack=1) * 0.6931471805599453


@triton.jit
def _kp_log_exact(x):
    return tl.log(x)


# Triton's interpreter (TRITON_INTERPRET=1, tests off the GPU) runs no inline assembly:
# there the exact log stands in for the fast one
def _kp_interpreting():
    if hasattr(triton, "knobs"):  # Triton releases with knobs (3.5 and 3.6 here)
        return bool(triton.knobs.runtime.interpret)
    import os
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


_kp_fast_log = _kp_log_exact if _kp_interpreting() else _kp_log_sfu
{% endif %}


def _kp_pool_len(size, kernel, stride, pad, dilation, ceil_mode):
    """Pooled length as PyTorch computes it (floor or ceil; with ceil, the last window
    must start inside the input or its left padding)."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out
{% for k in kernels %}
{{ k }}
{% endfor %}
{% endif %}

_KP_REGIONS = _kp_json.loads({{ regions_json | tojson }})
_KP_FUNCS = { {% for r in region_ids %}{{ r | tojson }}: _kp_{{ r }}, {% endfor %} }


def _kp_lower(module):
    """Trace ``module`` and swap each region's nodes for one call of its kernel."""
    gm = _kp_fx.symbolic_trace(module)
    nodes = {n.name: n for n in gm.graph.nodes}
    for spec in _KP_REGIONS:
        wanted = spec["nodes"] + [i["node"] for i in spec["inputs"] if "node" in i]
        missing = [name for name in wanted if name not in nodes]
        if missing:
            raise RuntimeError("expert candidate: traced graph lacks nodes %s" % missing)
        out = nodes[spec["output"]]
        with gm.graph.inserting_before(out):
            args = []
            for i in spec["inputs"]:
                if "node" in i:
                    args.append(nodes[i["node"]])
                elif "param" in i:
                    args.append(gm.graph.get_attr(i["param"]))
            call = gm.graph.call_function(_KP_FUNCS[spec["rid"]], tuple(args))
        out.replace_all_uses_with(call)
        for name in reversed(spec["nodes"]):
            gm.graph.erase_node(nodes.pop(name))
        nodes[spec["output"]] = call  # later regions read this value from the kernel call
    gm.graph.lint()
    gm.recompile()
    return gm


def _kp_clone(value):
    if isinstance(value, _kp_torch.Tensor):
        return value.clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_kp_clone(v) for v in value)
    return value


class ModelNew(_kp_torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        # built like the reference, so the same seed gives the same parameters
        self.ref = Model(*args, **kwargs)
        self.lowered = _kp_lower(self.ref)
        self._kp_graphs = {}

    def forward(self, *args):
{% if graph %}
        tensors = [a for a in args if isinstance(a, _kp_torch.Tensor)]
        if not tensors or not all(t.is_cuda for t in tensors):
            return self.lowered(*args)
        return self._kp_replay(args)
{% else %}
        return self.lowered(*args)
{% endif %}
{% if graph %}

    def _kp_replay(self, args):
        """CUDA-graph capture of the whole forward, one graph per input signature. The
        evaluator changes input values between calls, so each call copies its inputs into
        the captured (static) buffers before replaying; the output is cloned so a caller
        holding an earlier result never sees it overwritten."""
        key = tuple((tuple(a.shape), a.dtype, a.stride(), str(a.device)) if isinstance(a, _kp_torch.Tensor)
                    else ("value", repr(a)) for a in args)
        entry = self._kp_graphs.get(key)
        if entry is None:
            static = [a.clone() if isinstance(a, _kp_torch.Tensor) else a for a in args]
            with _kp_torch.no_grad():
                side = _kp_torch.cuda.Stream()
                side.wait_stream(_kp_torch.cuda.current_stream())
                with _kp_torch.cuda.stream(side):
                    for _ in range(2):
                        self.lowered(*static)
                _kp_torch.cuda.current_stream().wait_stream(side)
                graph = _kp_torch.cuda.CUDAGraph()
                with _kp_torch.cuda.graph(graph):
                    out = self.lowered(*static)
            entry = self._kp_graphs[key] = (graph, static, out)
        graph, static, out = entry
        for buf, a in zip(static, args):
            if isinstance(a, _kp_torch.Tensor):
                buf.copy_(a)
        graph.replay()
        return _kp_clone(out)
{% endif %}
'''


def render(template: str, **values: object) -> str:
    return ENV.from_string(template).render(**values)

# Few long rows (outer too small to fill the GPU): each row is cut into chunks of CHUNK
# elements. Stage 1 (``_part``) writes per-chunk statistics: sum (sum, mean, rms_norm's
# sum of squares), max/min, softmax's (chunk max, sum of exp relative to it), layernorm's
# (count, shifted sum, shifted sum of squares; shift = the chunk's first element, which
# keeps fp32 cancellation small). Stage 2 (``_fin``) combines a row's chunks and either
# stores the row's value (reductions, logsumexp) or normalizes its own chunk.
SPLIT = r"""
@triton.jit
def _kp_{{ rid }}_part(x_ptr, part_ptr, n_chunks, R: tl.constexpr, CHUNK: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    o = pid // n_chunks
    start = (pid % n_chunks) * CHUNK
    base = o * R
    lanes = tl.arange(0, BLOCK_R)
{% if op in ("max", "min") %}
    acc = tl.full([BLOCK_R], {{ "float('-inf')" if op == "max" else "float('inf')" }}, tl.float32)
{% elif op in ("softmax", "log_softmax", "logsumexp") %}
    mx = tl.full([BLOCK_R], float('-inf'), tl.float32)
    sm = tl.zeros([BLOCK_R], dtype=tl.float32)
{% elif op == "layer_norm" %}
    shift = tl.load(x_ptr + base + start).to(tl.float32)
    s1 = tl.zeros([BLOCK_R], dtype=tl.float32)
    s2 = tl.zeros([BLOCK_R], dtype=tl.float32)
{% else %}
    acc = tl.zeros([BLOCK_R], dtype=tl.float32)
{% endif %}
    for r0 in range(0, CHUNK, BLOCK_R):
        r = start + r0 + lanes
        m = r < R
{% if op == "max" %}
        x = tl.load(x_ptr + base + r, mask=m, other=float('-inf')).to(tl.float32)
{% for line in prologue %}
        {{ line }}
{% endfor %}
{% if prologue %}
        x = tl.where(m, {{ prologue_result }}, float('-inf'))
{% endif %}
        acc = tl.maximum(acc, x)
{% elif op == "min" %}
        x = tl.load(x_ptr + base + r, mask=m, other=float('inf')).to(tl.float32)
{% for line in prologue %}
        {{ line }}
{% endfor %}
{% if prologue %}
        x = tl.where(m, {{ prologue_result }}, float('inf'))
{% endif %}
        acc = tl.minimum(acc, x)
{% elif op in ("softmax", "log_softmax", "logsumexp") %}
        x = tl.load(x_ptr + base + r, mask=m, other=float('-inf')).to(tl.float32)
{% for line in prologue %}
        {{ line }}
{% endfor %}
{% if prologue %}
        x = tl.where(m, {{ prologue_result }}, float('-inf'))
{% endif %}
        new = tl.maximum(mx, x)
        live = new != float('-inf')
        sm = sm * tl.where(live, tl.exp(mx - new), 0.0) + tl.where(live, tl.exp(x - new), 0.0)
        mx = new
{% elif op == "layer_norm" %}
        x = tl.load(x_ptr + base + r, mask=m, other=0.0).to(tl.float32)
{% for line in prologue %}
        {{ line }}
{% endfor %}
{% if prologue %}
        x = tl.where(m, {{ prologue_result }}, 0.0)
{% endif %}
        d = tl.where(m, x - shift, 0.0)
        s1 += d
        s2 += d * d
{% elif op == "rms_norm" %}
        x = tl.load(x_ptr + base + r, mask=m, other=0.0).to(tl.float32)
{% for line in prologue %}
        {{ line }}
{% endfor %}
{% if prologue %}
        x = tl.where(m, {{ prologue_result }}, 0.0)
{% endif %}
        acc += x * x
{% else %}
        x = tl.load(x_ptr + base + r, mask=m, other=0.0).to(tl.float32)
{% for line in prologue %}
        {{ line }}
{% endfor %}
{% if prologue %}
        x = tl.where(m, {{ prologue_result }}, 0.0)
{% endif %}
        acc += x
{% endif %}
{% if op in ("max", "min") %}
    tl.store(part_ptr + pid, {{ "tl.max" if op == "max" else "tl.min" }}(acc, axis=0))
{% elif op in ("softmax", "log_softmax", "logsumexp") %}
    cmax = tl.max(mx, axis=0)
    tl.store(part_ptr + pid * 2, cmax)
    tl.store(part_ptr + pid * 2 + 1, tl.sum(sm * tl.where(mx != float('-inf'), tl.exp(mx - cmax), 0.0), axis=0))
{% elif op == "layer_norm" %}
    n = tl.minimum(R - start, CHUNK).to(tl.float32)
    t1 = tl.sum(s1, axis=0)
    tl.store(part_ptr + pid * 3, n)
    tl.store(part_ptr + pid * 3 + 1, shift + t1 / n)
    tl.store(part_ptr + pid * 3 + 2, tl.sum(s2, axis=0) - t1 * t1 / n)
{% else %}
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))
{% endif %}


@triton.jit
def _kp_{{ rid }}_fin(x_ptr, out_ptr, part_ptr, {% if has_w %}w_ptr, {% endif %}{% if has_b %}b_ptr, {% endif %}n_chunks, eps,
        R: tl.constexpr, CHUNK: tl.constexpr, BLOCK_R: tl.constexpr, NCP2: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
{% set whole = op in ("softmax", "log_softmax", "layer_norm", "rms_norm") %}
{% if whole %}
    o = pid // n_chunks
{% else %}
    o = pid
{% endif %}
    ks = tl.arange(0, NCP2)
    km = ks < n_chunks
    row = o * n_chunks + ks
{% if op in ("max", "min") %}
    p = tl.load(part_ptr + row, mask=km, other={{ "float('-inf')" if op == "max" else "float('inf')" }})
    value = {{ "tl.max" if op == "max" else "tl.min" }}(p, axis=0)
{% elif op in ("sum", "mean") %}
    value = tl.sum(tl.load(part_ptr + row, mask=km, other=0.0), axis=0){% if op == "mean" %} / R{% endif %}

{% elif op in ("softmax", "log_softmax", "logsumexp") %}
    cmax = tl.load(part_ptr + row * 2, mask=km, other=float('-inf'))
    csum = tl.load(part_ptr + row * 2 + 1, mask=km, other=0.0)
    row_max = tl.max(cmax, axis=0)
    row_sum = tl.sum(csum * tl.where(cmax != float('-inf'), tl.exp(cmax - row_max), 0.0), axis=0)
    value = row_max + tl.log(row_sum)
{% elif op == "layer_norm" %}
    cn = tl.load(part_ptr + row * 3, mask=km, other=0.0)
    cmean = tl.load(part_ptr + row * 3 + 1, mask=km, other=0.0)
    cm2 = tl.load(part_ptr + row * 3 + 2, mask=km, other=0.0)
    mean = tl.sum(cn * cmean, axis=0) / R
    dm = tl.where(km, cmean - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(cm2 + cn * dm * dm, axis=0) / R + eps)
{% elif op == "rms_norm" %}
    rstd = 1.0 / tl.sqrt(tl.sum(tl.load(part_ptr + row, mask=km, other=0.0), axis=0) / R + eps)
{% endif %}
{% if whole %}
    base = o * R
    lanes = tl.arange(0, BLOCK_R)
    start = (pid % n_chunks) * CHUNK
    for r0 in range(0, CHUNK, BLOCK_R):
        r = start + r0 + lanes
        m = r < R
        x = tl.load(x_ptr + base + r, mask=m, other=0.0).to(tl.float32)
{% for line in prologue %}
        {{ line }}
{% endfor %}
{% if prologue %}
        x = tl.where(m, {{ prologue_result }}, 0.0)
{% endif %}
{% if op == "softmax" %}
        y = tl.exp(x - row_max) / row_sum
{% elif op == "log_softmax" %}
        y = x - value
{% elif op == "layer_norm" %}
        y = (x - mean) * rstd
{% else %}
        y = x * rstd
{% endif %}
{% if has_w %}
        y = y * tl.load(w_ptr + r, mask=m, other=0.0).to(tl.float32)
{% endif %}
{% if has_b %}
        y = y + tl.load(b_ptr + r, mask=m, other=0.0).to(tl.float32)
{% endif %}
{% for line in epilogue %}
        {{ line }}
{% endfor %}
        tl.store(out_ptr + base + r, y.to(out_ptr.dtype.element_ty), mask=m)
{% else %}
    y = value
{% for line in epilogue %}
    {{ line }}
{% endfor %}
    tl.store(out_ptr + o, y.to(out_ptr.dtype.element_ty))
{% endif %}


def _kp_{{ rid }}(x{% if has_w %}, w{% endif %}{% if has_b %}, b{% endif %}):
    x = x.contiguous()
    shape = tuple(x.shape)
{% if normalized_ndim %}
    k = {{ normalized_ndim }}
    outer, R, inner = _kp_prod(shape[:-k]), _kp_prod(shape[-k:]), 1
{% else %}
    d, k = {{ dim }}, {{ ndims }}
    outer, R, inner = _kp_prod(shape[:d]), _kp_prod(shape[d:d + k]), _kp_prod(shape[d + k:])
{% endif %}
    if inner != 1:
        raise RuntimeError("expert kernel _kp_{{ rid }} was written for split rows, got inner=%d" % inner)
""" + ROW_OUTPUT + r"""    if out.numel() == 0 or R == 0:
        return out
    n_chunks = triton.cdiv(R, {{ CHUNK }})
    part = _kp_torch.empty(outer * n_chunks * {{ 3 if op == "layer_norm" else (2 if op in ("softmax", "log_softmax", "logsumexp") else 1) }}, dtype=_kp_torch.float32, device=x.device)
    _kp_{{ rid }}_part[(outer * n_chunks,)](x, part, n_chunks, R=R, CHUNK={{ CHUNK }}, BLOCK_R={{ BLOCK_R }},
                                           num_warps={{ num_warps }})
    ncp2 = max(2, 1 << (n_chunks - 1).bit_length())
    grid = (outer * n_chunks,) if {{ op in ("softmax", "log_softmax", "layer_norm", "rms_norm") }} else (outer,)
    _kp_{{ rid }}_fin[grid](x, out, part, {% if has_w %}w.contiguous(), {% endif %}{% if has_b %}b.contiguous(), {% endif %}n_chunks, {{ eps }},
                           R=R, CHUNK={{ CHUNK }}, BLOCK_R={{ BLOCK_R }}, NCP2=ncp2, num_warps={{ num_warps }})
    return out
"""

# GEMM C = epilogue(A @ B) on tensor cores (fp16/bf16, or fp32 with ``precision``: "ieee"
# keeps full fp32 products, "tf32x3" splits each fp32 operand in two tf32 parts and sums
# three tensor-core products, about fp32 accuracy). One program per BLOCK_M x BLOCK_N tile
# of C, programs ordered in groups of GROUP_M row-blocks so that consecutive programs
# reuse the same B column-block from L2; K is walked in BLOCK_K steps with fp32
# accumulation; a batch is the grid's second axis. Rows and columns past the edges read
# a wrapped valid row/column (no mask in the K loop) and are dropped at the store. The
# epilogue (bias, the pointwise region) is applied to the accumulator tile in registers,
# its tensors read through broadcast strides over (batch, M, N); one store.
GEMM = r"""
@triton.jit
def _kp_{{ rid }}_kernel(a_ptr, b_ptr, c_ptr, {% for i in range(n_extra) %}e{{ i }}_ptr, {% endfor %}M, N,
        s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn,
        {% for i in range(n_extra) %}s{{ i }}_b, s{{ i }}_m, s{{ i }}_n, {% endfor %}

        K: tl.constexpr, INDEX64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    batch = tl.program_id(1).to(tl.int64)
    pid_m, pid_n = _kp_grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if INDEX64:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    am = rm % M
    bn = rn % N
    a_ptrs = a_ptr + batch * s_ab + am[:, None] * s_am + rk[None, :] * s_ak
    b_ptrs = b_ptr + batch * s_bb + rk[:, None] * s_bk + bn[None, :] * s_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if K % BLOCK_K == 0:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k0, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc{{ dot_args }})
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    mask = (rm[:, None] < M) & (rn[None, :] < N)
{% for i in range(n_extra) %}
    e{{ i }} = tl.load(e{{ i }}_ptr + batch * s{{ i }}_b + rm[:, None] * s{{ i }}_m + rn[None, :] * s{{ i }}_n,
                     mask=mask, other=0.0).to(tl.float32)
{% endfor %}
{% for line in body %}
    {{ line }}
{% endfor %}
    tl.store(c_ptr + batch * s_cb + rm[:, None] * s_cm + rn[None, :] * s_cn,
             {{ result }}.to(c_ptr.dtype.element_ty), mask=mask)


def _kp_{{ rid }}(a, b{% for i in range(n_extra) %}, x{{ i }}{% endfor %}):
{% if trans_b %}
    b = b.t()  # stored (N, K): read as (K, N) through its strides, no copy
{% endif %}
    if a.dtype != b.dtype or a.dtype != _kp_torch.{{ dtype }}:
        raise RuntimeError("expert kernel _kp_{{ rid }} was written for {{ dtype }} operands, got %s and %s"
                           % (a.dtype, b.dtype))
    K = a.shape[-1]
    N = b.shape[-1]
    if b.dim() == 2:
        out_shape = tuple(a.shape[:-1]) + (N,)
        a3 = a.reshape(1, -1, K)
        b3 = b.unsqueeze(0)
    else:
        out_shape = tuple(a.shape[:-1]) + (N,)
        a3 = a.reshape(-1, a.shape[-2], K)
        b3 = b.reshape(-1, K, N)
    batch, M = a3.shape[0], a3.shape[1]
    dtype = a.dtype
    extras = [{% for i in range(n_extra) %}x{{ i }}, {% endfor %}]
    for x in extras:
        dtype = _kp_torch.promote_types(dtype, x.dtype)
    c = _kp_torch.empty((batch, M, N), dtype=dtype, device=a.device)
    if c.numel() == 0:
        return c.reshape(out_shape)
    e3 = [x.expand(out_shape).reshape(batch, M, N) for x in extras]
    strides = [s for x in e3 for s in x.stride()]
    reach = max(1 + sum((sz - 1) * abs(st) for sz, st in zip(t.shape[1:], t.stride()[1:]))
                for t in [a3, b3, c] + e3)
    grid = (triton.cdiv(M, {{ BLOCK_M }}) * triton.cdiv(N, {{ BLOCK_N }}), batch)
    _kp_{{ rid }}_kernel[grid](a3, b3, c, *e3, M, N, *a3.stride(), *b3.stride(), *c.stride(), *strides,
                             K=K, INDEX64=reach >= 2**31, BLOCK_M={{ BLOCK_M }}, BLOCK_N={{ BLOCK_N }},
                             BLOCK_K={{ BLOCK_K }}, GROUP_M={{ GROUP_M }}, num_warps={{ num_warps }},
                             num_stages={{ num_stages }})
    return c.reshape(out_shape)
"""

# A dense 1-D/2-D convolution as an implicit GEMM (1-D padded to 2-D with H = 1): rows m
# are the output positions (n, oh, ow) of every image, columns the output channels, K the
# (in-channel, kh, kw) taps; the A tile is gathered from the input at each K step (padding
# masked to zero), the B tile is the weight read as (OC, K); fp32 accumulation on tensor
# cores (fp32 operands: ieee or tf32x3 products), the bias added to the accumulator, one
# store into (N, OC, OH, OW). Sizes are constexpr (a kernel per shape): every index
# division is by a constant.
CONV = r"""
@triton.jit
def _kp_{{ rid }}_kernel(x_ptr, w_ptr, {% if has_bias %}b_ptr, {% endif %}c_ptr, M,
        C: tl.constexpr, H: tl.constexpr, W: tl.constexpr, OC: tl.constexpr, OH: tl.constexpr,
        OW: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
        PH: tl.constexpr, PW: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr, K: tl.constexpr,
        INDEX64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr):
    pid_m, pid_n = _kp_grouped_tile(tl.program_id(0), M, OC, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if INDEX64:
        rm = rm.to(tl.int64)
    m_ok = rm < M
    n_ok = rn < OC
    img = rm // (OH * OW)
    pos = (rm - img * (OH * OW)).to(tl.int32)
    oh = pos // OW
    ow = pos - oh * OW
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    # an A element's offset: its row's part (image, window origin) plus its tap's part
    x_row = img * (C * H * W) + ih0 * W + iw0
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < K
        ci = rk // (KH * KW)
        tap = rk - ci * (KH * KW)
        kh = tap // KW
        kw = tap - kh * KW
        if PH == 0 and PW == 0:
            # no padding: every tap of a valid output position lies inside the input
            a_ok = m_ok[:, None] & k_ok[None, :]
        else:
            ih = ih0[:, None] + (kh * DH)[None, :]
            iw = iw0[:, None] + (kw * DW)[None, :]
            a_ok = m_ok[:, None] & k_ok[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + x_row[:, None] + (ci * (H * W) + kh * (DH * W) + kw * DW)[None, :], mask=a_ok,
                    other=0.0)
        b = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc{{ dot_args }})
{% if has_bias %}
    acc += tl.load(b_ptr + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
{% endif %}
    c_off = (img * (OC * OH * OW) + pos)[:, None] + (rn * (OH * OW))[None, :]
    tl.store(c_ptr + c_off, acc.to(c_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def _kp_{{ rid }}(x, w{% if has_bias %}, b{% endif %}):
    if x.dim() != {{ rank }} + 2 or w.dim() != {{ rank }} + 2:
        raise RuntimeError("expert kernel _kp_{{ rid }}: expected (N, C, *spatial) input and weight, got %s and %s"
                           % (tuple(x.shape), tuple(w.shape)))
    if x.dtype != w.dtype or x.dtype != _kp_torch.{{ dtype }}:
        raise RuntimeError("expert kernel _kp_{{ rid }} was written for {{ dtype }} input and weight, got %s and %s"
                           % (x.dtype, w.dtype))
    x = x.contiguous()
    w = w.contiguous()
{% if has_bias %}
    b = b.contiguous()
{% endif %}
    n, c = x.shape[0], x.shape[1]
    oc = w.shape[0]
    if w.shape[1] != c:
        raise RuntimeError("expert kernel _kp_{{ rid }}: %d input channels, the weight expects %d" % (c, w.shape[1]))
    sp = (1,) * (2 - {{ rank }}) + tuple(x.shape[2:])
    ks = (1,) * (2 - {{ rank }}) + tuple(w.shape[2:])
    ss, ps, ds = {{ stride2 }}, {{ padding2 }}, {{ dilation2 }}
    osp = tuple((size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, s, p, d in zip(sp, ks, ss, ps, ds))
    out = _kp_torch.empty((n, oc) + osp[2 - {{ rank }}:], dtype=x.dtype, device=x.device)
    m = n * osp[0] * osp[1]
    if out.numel() == 0:
        return out
    if c * sp[0] * sp[1] >= 2**31 or oc * osp[0] * osp[1] >= 2**31:
        raise RuntimeError("expert kernel _kp_{{ rid }}: one image is past 32-bit indices")
    grid = (triton.cdiv(m, {{ BLOCK_M }}) * triton.cdiv(oc, {{ BLOCK_N }}),)
    _kp_{{ rid }}_kernel[grid](x, w, {% if has_bias %}b, {% endif %}out, m, C=c, H=sp[0], W=sp[1], OC=oc, OH=osp[0],
                             OW=osp[1], KH=ks[0], KW=ks[1], SH=ss[0], SW=ss[1], PH=ps[0], PW=ps[1], DH=ds[0],
                             DW=ds[1], K=c * ks[0] * ks[1], INDEX64=max(x.numel(), out.numel()) >= 2**31,
                             BLOCK_M={{ BLOCK_M }}, BLOCK_N={{ BLOCK_N }}, BLOCK_K={{ BLOCK_K }},
                             GROUP_M={{ GROUP_M }}, num_warps={{ num_warps }}, num_stages={{ num_stages }})
    return out
"""

# A sum or mean over N of C = A B (+ bias) as A (sum over N of B) (+ sum(bias)): a
# matrix-vector product in the library instead of the GEMM. B's column sums are taken on
# every call (B may be a parameter that changes between calls); the constant scalings
# between the GEMM and the sum (prologue) and the arithmetic after it (epilogue) act on
# the reduced value.
# A reduction of a pointwise program over every element of k same-shape inputs to one
# value (e.g. a loss): a persistent grid of programs, each accumulating its grid-stride
# share in BLOCK fp32 lanes and storing one partial; the partials are summed once more and
# scaled (sum: 1; mean: 1/numel; batchmean: 1/size(0)). Masked lanes load 1.0 (finite under
# log/div) and are dropped before they are added.
REDUCE_ALL = r"""
@triton.jit
def _kp_{{ rid }}_kernel({% for i in range(n_in) %}in{{ i }}_ptr, {% endfor %}part_ptr, n_elements,
        ITERS: tl.constexpr, INDEX64: tl.constexpr, BLOCK: tl.constexpr):
    # ITERS (blocks per program) is a compile-time constant: one build per problem size;
    # offsets are 32-bit unless the walk passes 2**31 elements (64-bit index math kept the
    # integer pipe the busiest unit of L1 #98's loss on the H200)
    pid = tl.program_id(0)
    progs = tl.num_programs(0)
    if INDEX64:
        pid = pid.to(tl.int64)
        progs = progs.to(tl.int64)
    stride = progs * BLOCK
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for it in range(0, ITERS):
        offs = pid * BLOCK + it * stride + tl.arange(0, BLOCK)
        mask = offs < n_elements
{% for i in range(n_in) %}
        a{{ i }} = tl.load(in{{ i }}_ptr + offs, mask=mask, other=1.0).to(tl.float32)
{% endfor %}
{% for line in body %}
        {{ line }}
{% endfor %}
        acc += tl.where(mask, {{ result }}, 0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


def _kp_{{ rid }}(*xs):
    shape = xs[0].shape
    for x in xs[1:]:
        if x.shape != shape:
            raise RuntimeError("expert kernel: the inputs of a full reduction differ in shape")
    xs = [x.contiguous() for x in xs]
    n = xs[0].numel()
    dtype = xs[0].dtype
    programs = max(1, min(triton.cdiv(n, {{ BLOCK }}), {{ PER_SM }} * _kp_sm_count(xs[0].device)))
    iters = triton.cdiv(n, programs * {{ BLOCK }})
    part = _kp_torch.empty(programs, dtype=_kp_torch.float32, device=xs[0].device)
    _kp_{{ rid }}_kernel[(programs,)](*xs, part, n, ITERS=iters, INDEX64=programs * iters * {{ BLOCK }} >= 2**31,
                                     BLOCK={{ BLOCK }}, num_warps={{ num_warps }})
    total = part.sum()
{% if reduction == "mean" %}
    total = total / n
{% elif reduction == "batchmean" %}
    total = total / shape[0]
{% endif %}
    return total.to(dtype)
"""

GEMM_REDUCE = r"""
def _kp_{{ rid }}(a, b{% if has_bias %}, bias{% endif %}):
    w = b.sum({{ 0 if trans_b else -1 }})  # B summed over N: (K,)
    y = _kp_torch.matmul(a, w)
{% if has_bias %}
    y = y + bias.sum()
{% endif %}
{% if op == "mean" %}
    y = y / {{ n }}
{% endif %}
{% if keepdim %}
    y = y.unsqueeze(-1)
{% endif %}
{% for line in prologue %}
    {{ line }}
{% endfor %}
{% if prologue %}
    y = {{ prologue_result }}
{% endif %}
{% for line in epilogue %}
    {{ line }}
{% endfor %}
    return y
"""

# Max/avg pooling over the last 1, 2 or 3 dims, seen as (L0, L1, D, H, W) with size-1
# dims padded in. The output is a grid of rows (one per (L0, L1, od, oh)) of OW outputs;
# one program computes a tile of ROWS consecutive rows by BLOCK_W neighbouring outputs of
# a row (ROWS x BLOCK_W = BLOCK). The sizes are constexpr (a kernel per shape, as the
# problems' shapes are fixed), so every index division is by a constant (a multiply and a
# shift, not a division routine: with runtime sizes and a flat index per output, index
# arithmetic kept the integer pipe busiest and DRAM at 25-31 % of its bandwidth on the
# H200); each row is decomposed once, a column needs only adds, and a warp's load of one
# tap reads neighbouring input elements. The window's taps are a static loop over constexpr
# sizes. Max ignores padding (-inf); avg sums the in-bounds taps and divides as PyTorch
# does: the window clipped to the padded input (count_include_pad), or to the input, or
# divisor_override. A prologue is applied to each in-bounds loaded element (its tensors
# read at the input position), an epilogue to each result (its tensors read at the output
# position).
POOL = r"""
@triton.jit
def _kp_{{ rid }}_kernel(x_ptr, out_ptr, {% if conv %}w_ptr, {% if has_bias %}b_ptr, {% endif %}{% endif %}{% for i in range(n_pro) %}p{{ i }}_ptr, {% endfor %}{% for i in range(n_epi) %}e{{ i }}_ptr, {% endfor %}n_rows,
        {% for i in range(n_pro) %}{% for d in range(5) %}sp{{ i }}_{{ d }}, {% endfor %}{% endfor %}

        {% for i in range(n_epi) %}{% for d in range(5) %}se{{ i }}_{{ d }}, {% endfor %}{% endfor %}

        L1: tl.constexpr, ID: tl.constexpr, IH: tl.constexpr, IW: tl.constexpr, OD: tl.constexpr,
        OH: tl.constexpr, OW: tl.constexpr,
        KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
        SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr,
        DH: tl.constexpr, DW: tl.constexpr, {% for i in range(n_pro) %}FLAT{{ i }}: tl.constexpr, {% endfor %}INDEX64: tl.constexpr,
        DH_INSIDE: tl.constexpr,
        ROWS: tl.constexpr, BLOCK_W: tl.constexpr):
{% set avg_count = op == "avg_pool" and not divisor_override %}
{#- The average's divisor (both forms): the window clipped to the padded input
    (count_include_pad) or to the input. In a tile without bounds checks every window lies
    inside along W, so the W factor is KW and the divisor is one per row: its reciprocal is
    taken once per row and broadcast to ``shape``. Sets ``scale``. -#}
{% macro avg_scale(full, ind, shape) %}
{% if avg_count %}
{{ ind }}d0 = od * SD - PD
{{ ind }}h0 = oh * SH - PH
{{ ind }}d1 = tl.minimum(d0 + KD, ID + PD)
{{ ind }}h1 = tl.minimum(h0 + KH, IH + PH)
{% if not full %}
{{ ind }}w0 = ow * SW - PW
{{ ind }}w1 = tl.minimum(w0 + KW, IW + PW)
{% endif %}
{% set cnt = "count_row" if full else "count" %}
{% if count_include_pad %}
{{ ind }}{{ cnt }} = (d1 - d0) * (h1 - h0) * {{ "KW" if full else "(w1 - w0)" }}
{% else %}
{{ ind }}{{ cnt }} = (tl.minimum(d1, ID) - tl.maximum(d0, 0)) * (tl.minimum(h1, IH) - tl.maximum(h0, 0)) * \
{{ ind }}    {{ "KW" if full else "(tl.minimum(w1, IW) - tl.maximum(w0, 0))" }}
{% endif %}
{% if full %}
{{ ind }}scale = tl.broadcast_to(1.0 / count_row.to(tl.float32), {{ shape }})
{% else %}
{{ ind }}scale = 1.0 / count.to(tl.float32)
{% endif %}
{% endif %}
{% endmacro %}
{% if vec %}
{#- Vector form (stride 1 and dilation 1 along W, no prologue): a thread computes 4
    neighbouring outputs of one row from NB aligned 16-byte loads of the inputs they share
    (columns c<b>_<i> = x[o0 + W_AL + 4 b + i]), instead of one load per tap and output. With
    W_AL = -PW rounded down to a multiple of 4 and A = -PW - W_AL, output j's tap k is column
    A + j + k. Taps of a (D, H) row are added in order, as in the per-tap form. -#}
{% macro vec_body(full, ind) %}
{% for j in range(4) %}
{% if op == "max_pool" %}
{{ ind }}acc{{ j }} = tl.full([BLOCK_W // 4], float('-inf'), tl.float32)
{% else %}
{{ ind }}acc{{ j }} = tl.zeros([BLOCK_W // 4], dtype=tl.float32)
{% endif %}
{% endfor %}
{{ ind }}for kd in tl.static_range(KD):
{{ ind }}    i_d = od * SD - PD + kd * DD
{{ ind }}    for kh in tl.static_range(KH):
{{ ind }}        i_h = oh * SH - PH + kh * DH
{{ ind }}        x_row = x_ptr + (base + (i_d * IH + i_h) * IW)
{% if not full %}
{{ ind }}        dh_ok = (i_d >= 0) & (i_d < ID) & (i_h >= 0) & (i_h < IH)
{% endif %}
{% for bk in range(nb) %}
{{ ind }}        pos = o0[:, None] + ({{ w_al + 4 * bk }} + col4[None, :])
{% if full %}
{{ ind }}        blk = tl.load(x_row + pos).to(tl.float32)
{% else %}
{{ ind }}        blk = tl.load(x_row + pos, mask=dh_ok & (pos >= 0) & (pos < IW), other={{ "float('-inf')" if op == "max_pool" else "0.0" }}).to(tl.float32)
{% endif %}
{{ ind }}        q0, q1 = tl.split(tl.reshape(blk, [BLOCK_W // 4, 2, 2]))
{{ ind }}        c{{ bk }}_0, c{{ bk }}_2 = tl.split(q0)
{{ ind }}        c{{ bk }}_1, c{{ bk }}_3 = tl.split(q1)
{% endfor %}
{% if conv %}
{% for kw in range(kw_size) %}
{{ ind }}        w{{ kw }} = tl.load(w_ptr + l1 * (KD * KH * KW) + (kd * KH + kh) * KW + {{ kw }}).to(tl.float32)
{% endfor %}
{% endif %}
{% for j in range(4) %}
{% for kw in range(kw_size) %}
{% set n = a_off + j + kw %}
{% if op == "max_pool" %}
{{ ind }}        acc{{ j }} = tl.maximum(acc{{ j }}, c{{ n // 4 }}_{{ n % 4 }})
{% elif conv %}
{{ ind }}        acc{{ j }} += c{{ n // 4 }}_{{ n % 4 }} * w{{ kw }}
{% else %}
{{ ind }}        acc{{ j }} += c{{ n // 4 }}_{{ n % 4 }}
{% endif %}
{% endfor %}
{% endfor %}
{{ ind }}acc = tl.reshape(tl.join(tl.join(acc0, acc2), tl.join(acc1, acc3)), [BLOCK_W // 4, 4])
{{ ind }}ow = o0[:, None] + col4[None, :]
{% if op == "avg_pool" %}
{% if divisor_override %}
{{ ind }}y = acc / {{ divisor_override }}
{% else %}
{{ avg_scale(full, ind, "[BLOCK_W // 4, 4]") }}
{{ ind }}y = acc * scale
{% endif %}
{% elif conv and has_bias %}
{{ ind }}y = acc + tl.load(b_ptr + l1).to(tl.float32)
{% else %}
{{ ind }}y = acc
{% endif %}
{% for i in range(n_epi) %}
{% if full %}
{{ ind }}e{{ i }} = tl.load(e{{ i }}_ptr + (l0 * se{{ i }}_0 + l1 * se{{ i }}_1) + od * se{{ i }}_2 + oh * se{{ i }}_3 + ow * se{{ i }}_4).to(tl.float32)
{% else %}
{{ ind }}e{{ i }} = tl.load(e{{ i }}_ptr + (l0 * se{{ i }}_0 + l1 * se{{ i }}_1) + od * se{{ i }}_2 + oh * se{{ i }}_3 + ow * se{{ i }}_4,
{{ ind }}                 mask=ow < OW, other=0.0).to(tl.float32)
{% endif %}
{% endfor %}
{% for line in epilogue %}
{{ ind }}{{ line }}
{% endfor %}
{% if full %}
{{ ind }}tl.store(out_ptr + row * OW + ow, {{ epilogue_result }}.to(out_ptr.dtype.element_ty))
{% else %}
{{ ind }}tl.store(out_ptr + row * OW + ow, {{ epilogue_result }}.to(out_ptr.dtype.element_ty), mask=ow < OW)
{% endif %}
{% endmacro %}
    pid = tl.program_id(0)
    n_cb = tl.cdiv(OW, BLOCK_W)
    row = pid // n_cb
    cb = pid - row * n_cb
    if INDEX64:
        row = row.to(tl.int64)
    lc = row // (OD * OH)
    rr = (row - lc * (OD * OH)).to(tl.int32)
    od = rr // OH
    oh = rr - od * OH
    l0 = lc // L1
    l1 = lc - l0 * L1
    base = lc * (ID * IH * IW)
    o0 = cb * BLOCK_W + tl.arange(0, BLOCK_W // 4) * 4
    col4 = tl.arange(0, 4)
    # no check at all when every load of the tile lies inside the row, every output exists
    # and every (D, H) tap is inside (DH_INSIDE)
    first = cb * BLOCK_W + {{ w_al }}
    last = cb * BLOCK_W + BLOCK_W - 4 + {{ w_al + 4 * nb - 1 }}
    if (first >= 0) & (last < IW) & ((cb + 1) * BLOCK_W <= OW) & DH_INSIDE:
{{ vec_body(True, "        ") }}
    else:
{{ vec_body(False, "        ") }}
{% else %}
    pid = tl.program_id(0)
    n_cb = tl.cdiv(OW, BLOCK_W)
    rb = pid // n_cb
    cb = pid - rb * n_cb
    rows = rb * ROWS + tl.arange(0, ROWS)
    if INDEX64:
        # planes and flat offsets need 64 bits; positions inside a plane fit 32 (the
        # wrapper checks)
        rows = rows.to(tl.int64)
    row_ok = rows < n_rows
    lc = rows // (OD * OH)
    rr = (rows - lc * (OD * OH)).to(tl.int32)
    od1 = rr // OH
    oh1 = rr - od1 * OH
    l0 = lc // L1
    l1 = lc - l0 * L1
    ow1 = cb * BLOCK_W + tl.arange(0, BLOCK_W)
    # [ROWS, 1] per row, [1, BLOCK_W] per column
    od = od1[:, None]
    oh = oh1[:, None]
    ow = ow1[None, :]
    mask = row_ok[:, None] & (ow < OW)
    base = (lc * (ID * IH * IW))[:, None]
{% if op == "max_pool" %}
    acc = tl.full([ROWS, BLOCK_W], float('-inf'), tl.float32)
{% else %}
    acc = tl.zeros([ROWS, BLOCK_W], dtype=tl.float32)
{% endif %}
{% for i in range(n_pro) %}
    p{{ i }}_row = (l0 * sp{{ i }}_0 + l1 * sp{{ i }}_1)[:, None]
    if FLAT{{ i }}:
        # constant over the window (per-channel or scalar): read once per row
        p{{ i }}_c = tl.load(p{{ i }}_ptr + p{{ i }}_row, mask=row_ok[:, None], other=0.0).to(tl.float32)
{% endfor %}
{% if conv %}
    w_row = (l1 * (KD * KH * KW))[:, None]
{% endif %}
{% macro taps(mode, ind) %}
{# mode "full": every tap of every output of the tile in bounds, every row and column of
   the tile present: no predicate at all; "cols": every W tap in bounds, so one predicate
   per row and (D, H) tap and per column, computed once; "edge": checked per tap #}
{% set k = "_" ~ mode %}
{% set checked = mode == "edge" %}
{{ ind }}for kd in tl.static_range(KD):
{{ ind }}    i_d = od * SD - PD + kd * DD
{% if mode != "full" %}
{{ ind }}    ok_d{{ k }} = {{ "mask" if checked else "cols_ok" }} & (i_d >= 0) & (i_d < ID)
{% endif %}
{{ ind }}    for kh in tl.static_range(KH):
{{ ind }}        i_h = oh * SH - PH + kh * DH
{% if mode != "full" %}
{{ ind }}        ok_h{{ k }} = ok_d{{ k }} & (i_h >= 0) & (i_h < IH)
{% endif %}
{{ ind }}        row_off = base + (i_d * IH + i_h) * IW
{{ ind }}        # the window's first tap of each output; the others at constant offsets from it
{{ ind }}        x_tap0 = x_ptr + (row_off + (ow * SW - PW))
{{ ind }}        for kw in tl.static_range(KW):
{% if checked or n_pro %}
{{ ind }}            i_w = ow * SW - PW + kw * DW
{% endif %}
{% if checked %}
{{ ind }}            ok{{ k }} = ok_h{{ k }} & (i_w >= 0) & (i_w < IW)
{% elif mode == "cols" %}
{{ ind }}            ok{{ k }} = ok_h{{ k }}
{% endif %}
{% if mode == "full" %}
{{ ind }}            x = tl.load(x_tap0 + kw * DW).to(tl.float32)
{% elif op == "max_pool" and not prologue %}
{{ ind }}            x = tl.load(x_tap0 + kw * DW, mask=ok{{ k }}, other=float('-inf')).to(tl.float32)
{% else %}
{{ ind }}            x = tl.load(x_tap0 + kw * DW, mask=ok{{ k }}, other=0.0).to(tl.float32)
{% endif %}
{% for i in range(n_pro) %}
{{ ind }}            if FLAT{{ i }}:
{{ ind }}                p{{ i }} = p{{ i }}_c
{{ ind }}            else:
{% if mode == "full" %}
{{ ind }}                p{{ i }} = tl.load(p{{ i }}_ptr + p{{ i }}_row + i_d * sp{{ i }}_2 + i_h * sp{{ i }}_3 + i_w * sp{{ i }}_4).to(tl.float32)
{% else %}
{{ ind }}                p{{ i }} = tl.load(p{{ i }}_ptr + p{{ i }}_row + i_d * sp{{ i }}_2 + i_h * sp{{ i }}_3 + i_w * sp{{ i }}_4,
{{ ind }}                                 mask=ok{{ k }}, other=0.0).to(tl.float32)
{% endif %}
{% endfor %}
{% for line in prologue %}
{{ ind }}            {{ line }}
{% endfor %}
{% if prologue %}
{{ ind }}            x = {{ prologue_result }}
{% endif %}
{% if op == "max_pool" %}
{% if prologue and mode != "full" %}
{{ ind }}            acc = tl.maximum(acc, tl.where(ok{{ k }}, x, float('-inf')))
{% else %}
{{ ind }}            acc = tl.maximum(acc, x)
{% endif %}
{% elif conv %}
{{ ind }}            # channel l1's tap (kd, kh, kw) of its (KD, KH, KW) filter
{% if mode == "full" %}
{{ ind }}            wv = tl.load(w_ptr + w_row + ((kd * KH + kh) * KW + kw))
{% else %}
{{ ind }}            wv = tl.load(w_ptr + w_row + ((kd * KH + kh) * KW + kw), mask=row_ok[:, None], other=0.0)
{% endif %}
{% if prologue and mode != "full" %}
{{ ind }}            acc += tl.where(ok{{ k }}, x, 0.0) * wv.to(tl.float32)
{% else %}
{{ ind }}            acc += x * wv.to(tl.float32)
{% endif %}
{% else %}
{% if prologue and mode != "full" %}
{{ ind }}            acc += tl.where(ok{{ k }}, x, 0.0)
{% else %}
{{ ind }}            acc += x
{% endif %}
{% endif %}
{% endmacro %}
    # Bounds checks only where a tile needs them. Along W: when every output's window of
    # the tile's present columns lies inside [0, IW), no tap needs a W check. A tile whose
    # rows and columns are all present and whose (D, H) taps all lie inside (DH_INSIDE:
    # known from the shapes) needs no predicate at all; most tiles of long rows are such.
    # Otherwise one predicate per row and (D, H) tap, and per column; the edge tiles are
    # checked per tap. (A masked tap loads as 0, or -inf for max, and adds nothing.)
    n_cols = tl.minimum(OW - cb * BLOCK_W, BLOCK_W)
    w_inside = (cb * BLOCK_W * SW - PW >= 0) & ((cb * BLOCK_W + n_cols - 1) * SW - PW + (KW - 1) * DW < IW)
    full = w_inside & (n_cols == BLOCK_W) & ((rb + 1) * ROWS <= n_rows) & DH_INSIDE
    if full:
{{ taps("full", "        ") }}
{{ avg_scale(True, "        ", "[ROWS, BLOCK_W]") }}
    elif w_inside:
        cols_ok = mask
{{ taps("cols", "        ") }}
{{ avg_scale(False, "        ", "[ROWS, BLOCK_W]") }}
    else:
{{ taps("edge", "        ") }}
{{ avg_scale(False, "        ", "[ROWS, BLOCK_W]") }}
{% if op == "avg_pool" %}
{% if divisor_override %}
    y = acc / {{ divisor_override }}
{% else %}
    y = acc * scale
{% endif %}
{% elif conv and has_bias %}
    y = acc + tl.load(b_ptr + l1[:, None], mask=row_ok[:, None], other=0.0).to(tl.float32)
{% else %}
    y = acc
{% endif %}
{% for i in range(n_epi) %}
    e{{ i }} = tl.load(e{{ i }}_ptr + (l0 * se{{ i }}_0 + l1 * se{{ i }}_1)[:, None] + od * se{{ i }}_2 + oh * se{{ i }}_3 + ow * se{{ i }}_4,
                     mask=mask, other=0.0).to(tl.float32)
{% endfor %}
{% for line in epilogue %}
    {{ line }}
{% endfor %}
    tl.store(out_ptr + rows[:, None] * OW + ow, {{ epilogue_result }}.to(out_ptr.dtype.element_ty), mask=mask)
{% endif %}


def _kp_{{ rid }}(x{% if conv %}, w{% if has_bias %}, b{% endif %}{% endif %}{% for i in range(n_pro) %}, p{{ i }}{% endfor %}{% for i in range(n_epi) %}, e{{ i }}{% endfor %}):
    x = x.contiguous()
{% if conv %}
    w = w.contiguous()
{% if has_bias %}
    b = b.contiguous()
{% endif %}
{% endif %}
    shape = tuple(x.shape)
    r = {{ rank }}
    lead, spatial = shape[:-r], shape[-r:]
    if len(lead) not in (1, 2):
        raise RuntimeError("expert kernel _kp_{{ rid }}: expected (N, C, *spatial) or (C, *spatial), got %s" % (shape,))
    pads = (1,) * (3 - r)
    sp = pads + tuple(spatial)
    ks, ss, ps, ds = {{ kernel3 }}, {{ stride3 }}, {{ padding3 }}, {{ dilation3 }}
    osp = tuple(_kp_pool_len(n, k, s, p, d, {{ ceil_mode }}) for n, k, s, p, d in zip(sp, ks, ss, ps, ds))
    out_shape = lead + osp[3 - r:]
    dtype = x.dtype
{% if conv %}
    dtype = _kp_torch.promote_types(dtype, w.dtype)
{% endif %}
    for t in [{% for i in range(n_pro) %}p{{ i }}, {% endfor %}]:
        dtype = _kp_torch.promote_types(dtype, t.dtype)
    for t in [{% for i in range(n_epi) %}e{{ i }}, {% endfor %}]:
        dtype = _kp_torch.promote_types(dtype, t.dtype)
    out = _kp_torch.empty(out_shape, dtype=dtype, device=x.device)
    n = out.numel()
    if n == 0:
        return out
    if _kp_prod(sp) >= 2**31 or _kp_prod(osp) >= 2**31:
        raise RuntimeError("expert kernel _kp_{{ rid }}: one (N, C) plane of %s elements is past 32-bit indices" % (sp,))

    def strides(t, full):
        st = tuple(t.expand(full).stride())
        lead_st = (0,) * (2 - len(lead)) + st[:len(lead)]
        return list(lead_st) + [0] * (3 - r) + list(st[len(lead):])

    pro_strides = [strides(t, shape) for t in [{% for i in range(n_pro) %}p{{ i }}, {% endfor %}]]
    flat_window = {"FLAT%d" % i: all(s == 0 for s in st[2:]) for i, st in enumerate(pro_strides)}
    flat = [s for st in pro_strides for s in st]
    flat += [s for t in [{% for i in range(n_epi) %}e{{ i }}, {% endfor %}] for s in strides(t, out_shape)]
    L1 = lead[-1]
    extras = [{% if conv %}w, {% if has_bias %}b, {% endif %}{% endif %}{% for i in range(n_pro) %}p{{ i }}, {% endfor %}{% for i in range(n_epi) %}e{{ i }}, {% endfor %}]
    # a tile of ROWS output rows by BLOCK_W outputs of a row, BLOCK in all
{% if vec %}
    block_w = {{ BLOCK }}  # the vector form: BLOCK outputs of one row per program
{% else %}
    block_w = min(triton.next_power_of_2(osp[2]), {{ BLOCK }})
{% endif %}
    n_rows = n // osp[2]
    grid = (triton.cdiv(n_rows, {{ BLOCK }} // block_w) * triton.cdiv(osp[2], block_w),)
    _kp_{{ rid }}_kernel[grid](x, out, *extras, n_rows, *flat,
                             L1=L1, ID=sp[0], IH=sp[1], IW=sp[2], OD=osp[0], OH=osp[1], OW=osp[2], KD=ks[0], KH=ks[1], KW=ks[2], SD=ss[0], SH=ss[1], SW=ss[2], PD=ps[0], PH=ps[1],
                             PW=ps[2], DD=ds[0], DH=ds[1], DW=ds[2], **flat_window, INDEX64=max(x.numel(), n) >= 2**31,
                             DH_INSIDE=all(p == 0 and (o - 1) * st + (k - 1) * d < size for p, o, st, k, d, size
                                           in zip(ps[:2], osp[:2], ss[:2], ks[:2], ds[:2], sp[:2])),
                             ROWS={{ BLOCK }} // block_w, BLOCK_W=block_w, num_warps={{ num_warps }})
    return out
"""
