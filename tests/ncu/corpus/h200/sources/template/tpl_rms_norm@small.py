# KernelPro candidate (generator: expert): Triton rmsnorm(rms_norm)[BLOCK_R=1024,num_warps=4]
# Parameters: {"graph": false, "lower": ["r0"], "tiles": {"r0": {"BLOCK_R": 1024, "num_warps": 4}}}
# The problem's source follows unchanged; ModelNew builds Model (same parameters under the
# same seed), traces it with torch.fx and replaces each recognized region by a kernel call.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5)


def get_inputs():
    return [torch.randn(64, 1024)]


def get_init_inputs():
    return []


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
def _kp_r0_kernel(x_ptr, out_ptr, inner, n_iblk, eps,
        R: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    o = pid
    base = o * R
    lanes = tl.arange(0, BLOCK_R)
    if BLOCK_R >= R:
        # the whole reduced extent fits one tile: read once, keep it in registers
        r0 = 0
        r = r0 + lanes
        m = r < R
        offs = base + r
        x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)

        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / R + eps)
        y = x * rstd

        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
    else:
        acc = tl.zeros([BLOCK_R], dtype=tl.float32)
        for r0 in range(0, R, BLOCK_R):
            r = r0 + lanes
            m = r < R
            offs = base + r
            x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)

            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / R + eps)
        for r0 in range(0, R, BLOCK_R):
            r = r0 + lanes
            m = r < R
            offs = base + r
            x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)

            y = x * rstd

            tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)



def _kp_r0(x):
    x = x.contiguous()
    shape = tuple(x.shape)
    d, k = 1, 1
    outer, R, inner = _kp_prod(shape[:d]), _kp_prod(shape[d:d + k]), _kp_prod(shape[d + k:])
    if inner != 1:
        raise RuntimeError("expert kernel _kp_r0 was written for layout row, got inner=%d" % inner)
    out = _kp_torch.empty_like(x)
    n_iblk = 1
    grid = (outer,)
    if out.numel() == 0 or R == 0:
        return out
    _kp_r0_kernel[grid](x, out, inner, n_iblk, 1e-05,
                             R=R, BLOCK_R=1024, num_warps=4)
    return out

_KP_REGIONS = _kp_json.loads("[{\"kind\": \"rmsnorm\", \"op\": \"rms_norm\", \"nodes\": [\"mul\", \"mean\", \"add\", \"sqrt\", \"truediv\"], \"output\": \"truediv\", \"inputs\": [{\"node\": \"x\"}, {\"none\": true}], \"rid\": \"r0\"}]")
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
