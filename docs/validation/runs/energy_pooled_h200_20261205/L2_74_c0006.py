# KernelPro candidate (generator: expert): Triton pool(leaky_relu+mul+leaky_relu+max_pool)[BLOCK=256,num_warps=2]
# Parameters: {"graph": false, "lower": ["r1"], "tiles": {"r0": {"BLOCK_K": 32, "BLOCK_M": 128, "BLOCK_N": 32, "GROUP_M": 8, "num_stages": 3, "num_warps": 4, "precision": "ieee"}, "r1": {"BLOCK": 256, "num_warps": 2}}}
# The problem's source follows unchanged; ModelNew builds Model (same parameters under the
# same seed), traces it with torch.fx and replaces each recognized region by a kernel call.
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a 3D transposed convolution, applies LeakyReLU, multiplies by a learnable parameter, 
    applies LeakyReLU again, and performs a max pooling operation.
    """
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier_shape):
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.leaky_relu = nn.LeakyReLU(negative_slope=0.2)
        self.max_pool = nn.MaxPool3d(kernel_size=2)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = self.leaky_relu(x)
        x = x * self.multiplier
        x = self.leaky_relu(x)
        x = self.max_pool(x)
        return x

batch_size = 16
in_channels = 16
out_channels = 32
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
multiplier_shape = (out_channels, 1, 1, 1)

def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier_shape]


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
def _kp_r1_kernel(x_ptr, out_ptr, p0_ptr, n_rows,
sp0_0, sp0_1, sp0_2, sp0_3, sp0_4, 

        L1: tl.constexpr, ID: tl.constexpr, IH: tl.constexpr, IW: tl.constexpr, OD: tl.constexpr,
        OH: tl.constexpr, OW: tl.constexpr,
        KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
        SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr,
        DH: tl.constexpr, DW: tl.constexpr, FLAT0: tl.constexpr, INDEX64: tl.constexpr,
        DH_INSIDE: tl.constexpr,
        ROWS: tl.constexpr, BLOCK_W: tl.constexpr):
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
    acc = tl.full([ROWS, BLOCK_W], float('-inf'), tl.float32)
    p0_row = (l0 * sp0_0 + l1 * sp0_1)[:, None]
    if FLAT0:
        # constant over the window (per-channel or scalar): read once per row
        p0_c = tl.load(p0_ptr + p0_row, mask=row_ok[:, None], other=0.0).to(tl.float32)
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
        for kd in tl.static_range(KD):
            i_d = od * SD - PD + kd * DD
            for kh in tl.static_range(KH):
                i_h = oh * SH - PH + kh * DH
                row_off = base + (i_d * IH + i_h) * IW
                # the window's first tap of each output; the others at constant offsets from it
                x_tap0 = x_ptr + (row_off + (ow * SW - PW))
                for kw in tl.static_range(KW):
                    i_w = ow * SW - PW + kw * DW
                    x = tl.load(x_tap0 + kw * DW).to(tl.float32)
                    if FLAT0:
                        p0 = p0_c
                    else:
                        p0 = tl.load(p0_ptr + p0_row + i_d * sp0_2 + i_h * sp0_3 + i_w * sp0_4).to(tl.float32)
                    pv0 = tl.where(x >= 0.0, x, x * 0.2)
                    pv1 = (pv0 * p0)
                    pv2 = tl.where(pv1 >= 0.0, pv1, pv1 * 0.2)
                    x = pv2
                    acc = tl.maximum(acc, x)


    elif w_inside:
        cols_ok = mask
        for kd in tl.static_range(KD):
            i_d = od * SD - PD + kd * DD
            ok_d_cols = cols_ok & (i_d >= 0) & (i_d < ID)
            for kh in tl.static_range(KH):
                i_h = oh * SH - PH + kh * DH
                ok_h_cols = ok_d_cols & (i_h >= 0) & (i_h < IH)
                row_off = base + (i_d * IH + i_h) * IW
                # the window's first tap of each output; the others at constant offsets from it
                x_tap0 = x_ptr + (row_off + (ow * SW - PW))
                for kw in tl.static_range(KW):
                    i_w = ow * SW - PW + kw * DW
                    ok_cols = ok_h_cols
                    x = tl.load(x_tap0 + kw * DW, mask=ok_cols, other=0.0).to(tl.float32)
                    if FLAT0:
                        p0 = p0_c
                    else:
                        p0 = tl.load(p0_ptr + p0_row + i_d * sp0_2 + i_h * sp0_3 + i_w * sp0_4,
                                         mask=ok_cols, other=0.0).to(tl.float32)
                    pv0 = tl.where(x >= 0.0, x, x * 0.2)
                    pv1 = (pv0 * p0)
                    pv2 = tl.where(pv1 >= 0.0, pv1, pv1 * 0.2)
                    x = pv2
                    acc = tl.maximum(acc, tl.where(ok_cols, x, float('-inf')))


    else:
        for kd in tl.static_range(KD):
            i_d = od * SD - PD + kd * DD
            ok_d_edge = mask & (i_d >= 0) & (i_d < ID)
            for kh in tl.static_range(KH):
                i_h = oh * SH - PH + kh * DH
                ok_h_edge = ok_d_edge & (i_h >= 0) & (i_h < IH)
                row_off = base + (i_d * IH + i_h) * IW
                # the window's first tap of each output; the others at constant offsets from it
                x_tap0 = x_ptr + (row_off + (ow * SW - PW))
                for kw in tl.static_range(KW):
                    i_w = ow * SW - PW + kw * DW
                    ok_edge = ok_h_edge & (i_w >= 0) & (i_w < IW)
                    x = tl.load(x_tap0 + kw * DW, mask=ok_edge, other=0.0).to(tl.float32)
                    if FLAT0:
                        p0 = p0_c
                    else:
                        p0 = tl.load(p0_ptr + p0_row + i_d * sp0_2 + i_h * sp0_3 + i_w * sp0_4,
                                         mask=ok_edge, other=0.0).to(tl.float32)
                    pv0 = tl.where(x >= 0.0, x, x * 0.2)
                    pv1 = (pv0 * p0)
                    pv2 = tl.where(pv1 >= 0.0, pv1, pv1 * 0.2)
                    x = pv2
                    acc = tl.maximum(acc, tl.where(ok_edge, x, float('-inf')))


    y = acc
    tl.store(out_ptr + rows[:, None] * OW + ow, y.to(out_ptr.dtype.element_ty), mask=mask)


def _kp_r1(x, p0):
    x = x.contiguous()
    shape = tuple(x.shape)
    r = 3
    lead, spatial = shape[:-r], shape[-r:]
    if len(lead) not in (1, 2):
        raise RuntimeError("expert kernel _kp_r1: expected (N, C, *spatial) or (C, *spatial), got %s" % (shape,))
    pads = (1,) * (3 - r)
    sp = pads + tuple(spatial)
    ks, ss, ps, ds = (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1)
    osp = tuple(_kp_pool_len(n, k, s, p, d, False) for n, k, s, p, d in zip(sp, ks, ss, ps, ds))
    out_shape = lead + osp[3 - r:]
    dtype = x.dtype
    for t in [p0, ]:
        dtype = _kp_torch.promote_types(dtype, t.dtype)
    for t in []:
        dtype = _kp_torch.promote_types(dtype, t.dtype)
    out = _kp_torch.empty(out_shape, dtype=dtype, device=x.device)
    n = out.numel()
    if n == 0:
        return out
    if _kp_prod(sp) >= 2**31 or _kp_prod(osp) >= 2**31:
        raise RuntimeError("expert kernel _kp_r1: one (N, C) plane of %s elements is past 32-bit indices" % (sp,))

    def strides(t, full):
        st = tuple(t.expand(full).stride())
        lead_st = (0,) * (2 - len(lead)) + st[:len(lead)]
        return list(lead_st) + [0] * (3 - r) + list(st[len(lead):])

    pro_strides = [strides(t, shape) for t in [p0, ]]
    flat_window = {"FLAT%d" % i: all(s == 0 for s in st[2:]) for i, st in enumerate(pro_strides)}
    flat = [s for st in pro_strides for s in st]
    flat += [s for t in [] for s in strides(t, out_shape)]
    L1 = lead[-1]
    extras = [p0, ]
    # a tile of ROWS output rows by BLOCK_W outputs of a row, BLOCK in all
    block_w = min(triton.next_power_of_2(osp[2]), 256)
    n_rows = n // osp[2]
    grid = (triton.cdiv(n_rows, 256 // block_w) * triton.cdiv(osp[2], block_w),)
    _kp_r1_kernel[grid](x, out, *extras, n_rows, *flat,
                             L1=L1, ID=sp[0], IH=sp[1], IW=sp[2], OD=osp[0], OH=osp[1], OW=osp[2], KD=ks[0], KH=ks[1], KW=ks[2], SD=ss[0], SH=ss[1], SW=ss[2], PD=ps[0], PH=ps[1],
                             PW=ps[2], DD=ds[0], DH=ds[1], DW=ds[2], **flat_window, INDEX64=max(x.numel(), n) >= 2**31,
                             DH_INSIDE=all(p == 0 and (o - 1) * st + (k - 1) * d < size for p, o, st, k, d, size
                                           in zip(ps[:2], osp[:2], ss[:2], ks[:2], ds[:2], sp[:2])),
                             ROWS=256 // block_w, BLOCK_W=block_w, num_warps=2)
    return out

_KP_REGIONS = _kp_json.loads("[{\"kind\": \"pool\", \"op\": \"max_pool\", \"nodes\": [\"leaky_relu\", \"mul\", \"leaky_relu_1\", \"max_pool\"], \"output\": \"max_pool\", \"scope\": \"\", \"inputs\": [{\"node\": \"conv_transpose\"}, {\"node\": \"multiplier\"}], \"rid\": \"r1\"}]")
_KP_FUNCS = { "r1": _kp_r1,  }


def _kp_lower(module):
    """Trace ``module`` and swap each region's nodes for one call of its kernel."""
    return _kp_lower_graph(module, _KP_REGIONS)


def _kp_lower_graph(module, specs):
    """Trace ``module`` and swap each region's nodes (``specs``) for one call of its kernel."""
    gm = _kp_fx.symbolic_trace(module)
    nodes = {n.name: n for n in gm.graph.nodes}
    for spec in specs:
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
