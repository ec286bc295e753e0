# KernelPro candidate (generator: expert): Triton pointwise(add+gelu+mul)[BLOCK=1024,num_warps=4,PER_SM=0]
# Parameters: {"graph": false, "lower": ["r0"], "tiles": {"r0": {"BLOCK": 1024, "PER_SM": 0, "num_warps": 4}}}
# The problem's source follows unchanged; ModelNew builds Model (same parameters under the
# same seed), traces it with torch.fx and replaces each recognized region by a kernel call.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
    def forward(self, x):
        return F.gelu(x + self.bias) * 1.7


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096]


import json as _kp_json
import math as _kp_math
import torch as _kp_torch
import torch.fx as _kp_fx
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


def _kp_pool_len(size, kernel, stride, pad, dilation, ceil_mode):
    """Pooled length as PyTorch computes it (floor or ceil; with ceil, the last window
    must start inside the input or its left padding)."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out
@triton.jit
def _kp_r0_kernel(in0_ptr, in1_ptr, out_ptr, n_elements,
size0, size1, 
st0_0, st0_1, st1_0, st1_1, 
CONTIG0: tl.constexpr, CONTIG1: tl.constexpr, INDEX64: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX64:
        # 64-bit index math only when an offset can pass 2**31 (int64 div/mod is slow)
        pid = pid.to(tl.int64)
    start = pid * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n_elements
    rem = offs
    i1 = rem % size1
    rem = rem // size1
    i0 = rem % size0
    rem = rem // size0
    if CONTIG0:
        off0 = offs
    else:
        off0 = i0 * st0_0 + i1 * st0_1
    a0 = tl.load(in0_ptr + off0, mask=mask, other=0.0).to(tl.float32)
    if CONTIG1:
        off1 = offs
    else:
        off1 = i0 * st1_0 + i1 * st1_1
    a1 = tl.load(in1_ptr + off1, mask=mask, other=0.0).to(tl.float32)
    v0 = (a0 + a1)
    v1 = (0.5 * v0 * (1.0 + tl.math.erf(v0 * 0.7071067811865476)))
    v2 = (v1 * 1.7)
    tl.store(out_ptr + offs, v2.to(out_ptr.dtype.element_ty), mask=mask)


_kp_r0_plans = {}


def _kp_r0(*xs):
    # the launch plan (shapes, strides, grid) depends only on the inputs' layout: computed
    # once per layout, so a call costs one lookup, one allocation and the launch
    key = tuple((tuple(x.shape), x.stride(), x.dtype, x.device) for x in xs)
    plan = _kp_r0_plans.get(key)
    if plan is None:
        shape = _kp_torch.broadcast_shapes(*(x.shape for x in xs))
        dtype = xs[0].dtype
        for x in xs[1:]:
            dtype = _kp_torch.promote_types(dtype, x.dtype)
        n = _kp_prod(shape)
        sizes, strides = _kp_coalesce(tuple(shape), [x.expand(shape).stride() for x in xs], 2)
        contig = [x.is_contiguous() and tuple(x.shape) == tuple(shape) for x in xs]
        flat = [s for st in strides for s in st]
        reach = max([n] + [sum((sz - 1) * st for sz, st in zip(x.shape, x.stride())) + 1 for x in xs])
        grid = (triton.cdiv(n, 1024),)
        if len(_kp_r0_plans) >= 64:
            _kp_r0_plans.clear()
        plan = _kp_r0_plans[key] = (shape, dtype, n, (n, *sizes, *flat, *contig, reach >= 2**31), grid)
    shape, dtype, n, scalars, grid = plan
    out = _kp_torch.empty(shape, dtype=dtype, device=xs[0].device)
    if n == 0:
        return out
    _kp_r0_kernel[grid](*xs, out, *scalars, BLOCK=1024, num_warps=4)
    return out

_KP_REGIONS = _kp_json.loads("[{\"kind\": \"pointwise\", \"op\": \"add+gelu+mul\", \"nodes\": [\"add\", \"gelu\", \"mul\"], \"output\": \"mul\", \"inputs\": [{\"node\": \"x\"}, {\"node\": \"bias\"}], \"rid\": \"r0\"}]")
_KP_FUNCS = { "r0": _kp_r0,  }


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
        return self.lowered(*args)
