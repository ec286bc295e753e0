# KernelPro candidate (generator: expert): Triton gemm(matmul)[BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=3,precision=ieee]
# Parameters: {"graph": false, "lower": ["r0"], "tiles": {"r0": {"BLOCK_K": 32, "BLOCK_M": 128, "BLOCK_N": 128, "GROUP_M": 8, "num_stages": 3, "num_warps": 8, "precision": "ieee"}}}
# The problem's source follows unchanged; ModelNew builds Model (same parameters under the
# same seed), traces it with torch.fx and replaces each recognized region by a kernel call.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(128, 128))
    def forward(self, x):
        return torch.matmul(x, self.w)


def get_inputs():
    return [torch.randn(128, 128)]


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
def _kp_r0_kernel(a_ptr, b_ptr, c_ptr, M, N,
        s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn,

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
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + batch * s_cb + rm[:, None] * s_cm + rn[None, :] * s_cn,
             acc.to(c_ptr.dtype.element_ty), mask=mask)


def _kp_r0(a, b):
    if a.dtype != b.dtype or a.dtype != _kp_torch.float32:
        raise RuntimeError("expert kernel _kp_r0 was written for float32 operands, got %s and %s"
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
    extras = []
    for x in extras:
        dtype = _kp_torch.promote_types(dtype, x.dtype)
    c = _kp_torch.empty((batch, M, N), dtype=dtype, device=a.device)
    if c.numel() == 0:
        return c.reshape(out_shape)
    e3 = [x.expand(out_shape).reshape(batch, M, N) for x in extras]
    strides = [s for x in e3 for s in x.stride()]
    reach = max(1 + sum((sz - 1) * abs(st) for sz, st in zip(t.shape[1:], t.stride()[1:]))
                for t in [a3, b3, c] + e3)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128), batch)
    _kp_r0_kernel[grid](a3, b3, c, *e3, M, N, *a3.stride(), *b3.stride(), *c.stride(), *strides,
                             K=K, INDEX64=reach >= 2**31, BLOCK_M=128, BLOCK_N=128,
                             BLOCK_K=32, GROUP_M=8, num_warps=8,
                             num_stages=3)
    return c.reshape(out_shape)

_KP_REGIONS = _kp_json.loads("[{\"kind\": \"gemm\", \"op\": \"matmul\", \"nodes\": [\"matmul\"], \"output\": \"matmul\", \"inputs\": [{\"node\": \"x\"}, {\"node\": \"w\"}], \"rid\": \"r0\"}]")
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
