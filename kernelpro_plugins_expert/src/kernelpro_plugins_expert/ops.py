"""What each traced operator means to the expert generator.

:func:`classify` maps one torch.fx node to an :class:`OpInfo`: its kind (``pointwise``,
``reduce`` (sum/mean/max/min and argmax/argmin), ``scan`` (cumsum/cumprod), ``chnorm``
(batch, group and affine instance norm), ``softmax``,
``layernorm``, ``rmsnorm``, ``gemm``, ``conv``, ``pool``,
``view`` or ``other``), a canonical operator name, the graph inputs it reads (fx nodes,
parameter paths or Python scalars) and its scalar attributes. Pointwise operators also
carry a Triton expression (:data:`POINTWISE`) so a chain of them can be written as one
fused kernel body. Anything not listed here is ``other``: it stays in PyTorch.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import attrs
import torch
import torch.nn as nn
import torch.nn.functional as F

# Triton expression of each supported pointwise operator, in fp32. ``{0}``, ``{1}`` are
# the operands; ``{p[...]}`` the operator's scalar attributes. Each is the textbook
# definition of the PyTorch operator (documented formulas in torch.nn's docs).
POINTWISE: dict[str, tuple[int, str]] = {
    "add": (2, "({0} + {1})"),
    "sub": (2, "({0} - {1})"),
    "rsub": (2, "({1} - {0})"),
    "mul": (2, "({0} * {1})"),
    "div": (2, "({0} / {1})"),
    "rdiv": (2, "({1} / {0})"),
    "maximum": (2, "tl.maximum({0}, {1})"),
    # xlogy(x, y) = x * log(y), and 0 where x == 0 (torch.xlogy)
    "xlogy": (2, "tl.where({0} == 0.0, 0.0, {0} * tl.log({1}))"),
    "minimum": (2, "tl.minimum({0}, {1})"),
    "neg": (1, "(-{0})"),
    "relu": (1, "tl.maximum({0}, 0.0)"),
    "sigmoid": (1, "(1.0 / (1.0 + tl.exp(-{0})))"),
    # tanh(x) = 2*sigmoid(2x) - 1 (tl has no tanh in every Triton release)
    "tanh": (1, "(2.0 / (1.0 + tl.exp(-2.0 * {0})) - 1.0)"),
    "gelu": (1, "(0.5 * {0} * (1.0 + tl.math.erf({0} * 0.7071067811865476)))"),
    "gelu_tanh": (1, "(0.5 * {0} * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * (0.7978845608028654 * "
                     "({0} + 0.044715 * {0} * {0} * {0})))) - 1.0)))"),
    "silu": (1, "({0} / (1.0 + tl.exp(-{0})))"),
    "leaky_relu": (1, "tl.where({0} >= 0.0, {0}, {0} * {p[negative_slope]})"),
    "clamp": (1, "tl.minimum(tl.maximum({0}, {p[min]}), {p[max]})"),
    "clamp_min": (1, "tl.maximum({0}, {p[min]})"),
    "clamp_max": (1, "tl.minimum({0}, {p[max]})"),
    "softplus": (1, "tl.where({0} * {p[beta]} > {p[threshold]}, {0}, "
                    "tl.log(1.0 + tl.exp({0} * {p[beta]})) / {p[beta]})"),
    "elu": (1, "tl.where({0} > 0.0, {0}, {p[alpha]} * (tl.exp({0}) - 1.0))"),
    "selu": (1, "1.0507009873554805 * tl.where({0} > 0.0, {0}, 1.6732632423543772 * (tl.exp({0}) - 1.0))"),
    "mish": (1, "({0} * (2.0 / (1.0 + tl.exp(-2.0 * tl.where({0} > 20.0, {0}, tl.log(1.0 + tl.exp({0}))))) - 1.0))"),
    "hardswish": (1, "({0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)"),
    "hardsigmoid": (1, "(tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)"),
    "exp": (1, "tl.exp({0})"),
    "log": (1, "tl.log({0})"),
    "sqrt": (1, "tl.sqrt({0})"),
    "rsqrt": (1, "tl.rsqrt({0})"),
    "abs": (1, "tl.abs({0})"),
    "square": (1, "({0} * {0})"),
    "identity": (1, "{0}"),
    # the per-element terms of torch.nn.SmoothL1Loss (beta) and HuberLoss (delta), as their
    # docs define them; a beta of 0 selects |d| (the other branch is not taken)
    "smooth_l1": (1, "tl.where(tl.abs({0}) < {p[beta]}, 0.5 * {0} * {0} / {p[beta]}, tl.abs({0}) - 0.5 * {p[beta]})"),
    "huber": (1, "tl.where(tl.abs({0}) < {p[delta]}, 0.5 * {0} * {0}, {p[delta]} * (tl.abs({0}) - 0.5 * {p[delta]}))"),
}

_BINARY_FUNCS = {
    operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub",
    operator.mul: "mul", torch.mul: "mul", operator.truediv: "div", torch.div: "div",
    torch.true_divide: "div", torch.maximum: "maximum", torch.minimum: "minimum", torch.xlogy: "xlogy",
    torch.special.xlogy: "xlogy",
}
_BINARY_METHODS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "true_divide": "div",
                   "__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div",
                   "maximum": "maximum", "minimum": "minimum"}
_UNARY_FUNCS = {
    operator.neg: "neg", torch.neg: "neg", torch.relu: "relu", F.relu: "relu", torch.sigmoid: "sigmoid",
    F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh", F.silu: "silu", F.mish: "mish",
    F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid", torch.exp: "exp", torch.log: "log",
    torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.abs: "abs", torch.square: "square", F.selu: "selu",
    torch.selu: "selu", F.relu6: "relu6",
}
_UNARY_METHODS = {"neg": "neg", "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp",
                  "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "square": "square",
                  "__neg__": "neg",
                  # a copy in an inference forward: the kernel's output is already a new tensor
                  "clone": "identity", "detach": "identity"}
_REDUCE = {torch.sum: "sum", torch.mean: "mean", torch.amax: "max", torch.amin: "min"}
_REDUCE_METHODS = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min"}
_GEMM_FUNCS = {torch.matmul, torch.mm, torch.bmm, operator.matmul, F.linear, torch.addmm}
_GEMM_METHODS = {"matmul": "matmul", "mm": "mm", "bmm": "bmm", "__matmul__": "matmul"}
# pooling operators a Triton template covers (max with dilation; avg with padding counted
# or not, divisor override); the adaptive ones stay in the library
_POOL_TEMPLATE_FUNCS = {F.max_pool1d: ("max_pool", 1), F.max_pool2d: ("max_pool", 2), F.max_pool3d: ("max_pool", 3),
                        F.avg_pool1d: ("avg_pool", 1), F.avg_pool2d: ("avg_pool", 2), F.avg_pool3d: ("avg_pool", 3)}
_POOL_TEMPLATE_MODULES = {nn.MaxPool1d: ("max_pool", 1), nn.MaxPool2d: ("max_pool", 2), nn.MaxPool3d: ("max_pool", 3),
                          nn.AvgPool1d: ("avg_pool", 1), nn.AvgPool2d: ("avg_pool", 2), nn.AvgPool3d: ("avg_pool", 3)}
_CONV_FUNCS = {F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d}
_POOL_FUNCS = {F.max_pool1d, F.max_pool2d, F.max_pool3d, F.avg_pool1d, F.avg_pool2d, F.avg_pool3d,
               F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d,
               F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d}
_VIEW_METHODS = {"view", "reshape", "flatten", "permute", "transpose", "contiguous", "unsqueeze", "squeeze",
                 "size", "dim", "expand"}
_POOL_MODULES = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
                 nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
                 nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)
_CONV_MODULES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


@attrs.frozen
class Param:
    """A graph input that is a module's parameter or buffer, by dotted path."""

    path: str


@attrs.frozen
class OpInfo:
    kind: str  # pointwise | reduce | scan | chnorm | softmax | layernorm | rmsnorm | gemm | conv | pool | view | other
    op: str  # canonical name: "add", "gelu", "sum", "softmax", "linear", ...
    inputs: tuple[Any, ...] = ()  # fx.Node | Param | python scalar, in operator order
    attrs: dict[str, Any] = attrs.field(factory=dict)


def _arg(node: Any, i: int, name: str, default: Any = None) -> Any:
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[i] if len(node.args) > i else default


def _dim(value: Any) -> int | tuple[int, ...] | None:
    """The reduction dim(s): an int, a tuple of several ints, or None when absent (a full
    reduction, not handled) or not plain integers."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, int) for v in value):
        return value[0] if len(value) == 1 else tuple(value)
    return None


def classify(node: Any, modules: dict[str, nn.Module]) -> OpInfo:
    """Classify one fx node (``modules``: the traced module's ``named_modules()``)."""
    if node.op == "call_module":
        return _classify_module(node, modules[node.target])
    if node.op == "call_function":
        return _classify_call(node, node.target, node.args, method=False)
    if node.op == "call_method":
        return _classify_call(node, node.target, node.args, method=True)
    return OpInfo(kind="other", op=node.op)


def _pointwise(op: str, inputs: tuple[Any, ...], **attrs_: Any) -> OpInfo:
    return OpInfo(kind="pointwise", op=op, inputs=inputs, attrs=dict(attrs_))


def _classify_module(node: Any, mod: nn.Module) -> OpInfo:
    x = node.args[0] if node.args else None
    t = node.target
    if isinstance(mod, nn.ReLU6):
        return _pointwise("clamp", (x,), min=0.0, max=6.0)
    if isinstance(mod, nn.Hardtanh):
        return _pointwise("clamp", (x,), min=float(mod.min_val), max=float(mod.max_val))
    simple = {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu", nn.Mish: "mish",
              nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid", nn.Identity: "identity", nn.SELU: "selu"}
    for cls, op in simple.items():
        if type(mod) is cls:
            return _pointwise(op, (x,))
    if isinstance(mod, nn.GELU):
        return _pointwise("gelu_tanh" if mod.approximate == "tanh" else "gelu", (x,))
    if isinstance(mod, nn.LeakyReLU):
        return _pointwise("leaky_relu", (x,), negative_slope=float(mod.negative_slope))
    if isinstance(mod, nn.ELU):
        return _pointwise("elu", (x,), alpha=float(mod.alpha))
    if isinstance(mod, nn.Softplus):
        return _pointwise("softplus", (x,), beta=float(mod.beta), threshold=float(mod.threshold))
    if isinstance(mod, nn.Softmax):
        return OpInfo("softmax", "softmax", (x,), {"dim": mod.dim})
    if isinstance(mod, nn.LogSoftmax):
        return OpInfo("softmax", "log_softmax", (x,), {"dim": mod.dim})
    if isinstance(mod, nn.LayerNorm):
        params = (Param(f"{t}.weight"), Param(f"{t}.bias") if mod.bias is not None else None) \
            if mod.elementwise_affine else (None, None)
        return OpInfo("layernorm", "layer_norm", (x, *params),
                      {"normalized_ndim": len(mod.normalized_shape), "eps": float(mod.eps)})
    if hasattr(nn, "RMSNorm") and isinstance(mod, nn.RMSNorm):
        weight = Param(f"{t}.weight") if mod.elementwise_affine else None
        eps = mod.eps if mod.eps is not None else None
        return OpInfo("rmsnorm", "rms_norm", (x, weight),
                      {"dim": -1, "normalized_ndim": len(mod.normalized_shape), "eps": eps})
    if isinstance(mod, nn.Linear):
        return OpInfo("gemm", "linear", (x, Param(f"{t}.weight"), Param(f"{t}.bias") if mod.bias is not None else None),
                      {"trans_b": True})
    if isinstance(mod, _CONV_MODULES):
        depthwise = _depthwise(mod, x, t)
        if depthwise is not None:
            return depthwise
        dense = _dense_conv(mod, x, t)
        if dense is None:
            dense = _general_conv(mod, x, t)
        return dense if dense is not None else OpInfo("conv", type(mod).__name__.lower(), (x,))
    if type(mod) in _POOL_TEMPLATE_MODULES:
        op, rank = _POOL_TEMPLATE_MODULES[type(mod)]
        return _pool(op, rank, x, mod.kernel_size, mod.stride, mod.padding, getattr(mod, "dilation", 1),
                     mod.ceil_mode, getattr(mod, "return_indices", False), getattr(mod, "count_include_pad", True),
                     getattr(mod, "divisor_override", None), type(mod).__name__.lower())
    if isinstance(mod, _POOL_MODULES):
        return OpInfo("pool", type(mod).__name__.lower(), (x,))
    ranks: dict[type, int] = {nn.InstanceNorm1d: 1, nn.InstanceNorm2d: 2, nn.InstanceNorm3d: 3}
    instance_rank = ranks.get(type(mod))
    if instance_rank is not None and isinstance(mod, nn.modules.instancenorm._InstanceNorm) \
            and not mod.affine and not mod.track_running_stats:
        # each (sample, channel) normalized over its spatial dims with the biased variance:
        # a layer norm over the last ``instance_rank`` dims, without weight or bias
        return OpInfo("layernorm", "layer_norm", (x, None, None),
                      {"normalized_ndim": instance_rank, "eps": float(mod.eps)})
    if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
        # the module itself is the second input: its kernel reads ``training`` and the
        # running statistics when it runs (eval: running statistics; training: batch ones)
        return OpInfo("chnorm", "batch_norm", (x, Param(t)), {"eps": float(mod.eps)})
    if isinstance(mod, nn.GroupNorm):
        params = (Param(f"{t}.weight"), Param(f"{t}.bias")) if mod.affine else (None, None)
        return OpInfo("chnorm", "group_norm", (x, *params), {"groups": int(mod.num_groups), "eps": float(mod.eps)})
    if instance_rank is not None and isinstance(mod, nn.modules.instancenorm._InstanceNorm) \
            and not mod.track_running_stats:
        # with affine parameters: a group norm with one group per channel
        params = (Param(f"{t}.weight"), Param(f"{t}.bias")) if mod.affine else (None, None)
        return OpInfo("chnorm", "group_norm", (x, *params),
                      {"groups": int(mod.num_features), "eps": float(mod.eps), "rank": instance_rank})
    if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.GroupNorm, nn.InstanceNorm1d,
                        nn.InstanceNorm2d, nn.InstanceNorm3d)):
        return OpInfo("other", type(mod).__name__.lower(), (x,))
    return OpInfo("other", type(mod).__name__)


def _classify_call(node: Any, target: Any, args: tuple[Any, ...], method: bool) -> OpInfo:
    kw = node.kwargs
    if method:
        name = target
        binary, unary, reduce = _BINARY_METHODS.get(name), _UNARY_METHODS.get(name), _REDUCE_METHODS.get(name)
    else:
        name = getattr(target, "__name__", str(target))
        binary, unary, reduce = _BINARY_FUNCS.get(target), _UNARY_FUNCS.get(target), _REDUCE.get(target)
    if binary is not None:
        if len(args) < 2 and "other" not in kw:
            return OpInfo("other", name)
        other = args[1] if len(args) > 1 else kw["other"]
        if kw.get("alpha", 1) != 1 or kw.get("rounding_mode") is not None or kw.get("out") is not None:
            return OpInfo("other", name)
        return _pointwise(binary, (args[0], other))
    if unary == "relu6":
        return _pointwise("clamp", (args[0],), min=0.0, max=6.0)
    # F.hardsigmoid(x, inplace=False) and the like: an out-of-place call spelled out
    plain_kw = {k: v for k, v in kw.items() if not (k == "inplace" and v is False)}
    if unary is not None and len(args) == 1 and not plain_kw:
        return _pointwise(unary, (args[0],))
    if not method:
        if target is F.gelu:
            approx = _arg(node, 1, "approximate", "none")
            return _pointwise("gelu_tanh" if approx == "tanh" else "gelu", (args[0],))
        if target is F.leaky_relu:
            return _pointwise("leaky_relu", (args[0],), negative_slope=float(_arg(node, 1, "negative_slope", 0.01)))
        if target is F.elu:
            return _pointwise("elu", (args[0],), alpha=float(_arg(node, 1, "alpha", 1.0)))
        if target is F.softplus:
            return _pointwise("softplus", (args[0],), beta=float(_arg(node, 1, "beta", 1.0)),
                              threshold=float(_arg(node, 2, "threshold", 20.0)))
        if target is F.hardtanh:
            return _pointwise("clamp", (args[0],), min=float(_arg(node, 1, "min_val", -1.0)),
                              max=float(_arg(node, 2, "max_val", 1.0)))
        if target in (F.layer_norm,):
            shape = _arg(node, 1, "normalized_shape")
            ndim = len(shape) if isinstance(shape, (tuple, list)) else 1
            return OpInfo("layernorm", "layer_norm", (args[0], _arg(node, 2, "weight"), _arg(node, 3, "bias")),
                          {"normalized_ndim": ndim, "eps": float(_arg(node, 4, "eps", 1e-5))})
        if hasattr(F, "rms_norm") and target is F.rms_norm:
            shape = _arg(node, 1, "normalized_shape")
            ndim = len(shape) if isinstance(shape, (tuple, list)) else 1
            return OpInfo("rmsnorm", "rms_norm", (args[0], _arg(node, 2, "weight")),
                          {"dim": -1, "normalized_ndim": ndim, "eps": _arg(node, 3, "eps")})
        if target is F.group_norm:
            groups = _arg(node, 1, "num_groups")
            if not isinstance(groups, int) or isinstance(groups, bool) or groups <= 0:
                return OpInfo("other", name)
            return OpInfo("chnorm", "group_norm", (args[0], _arg(node, 2, "weight"), _arg(node, 3, "bias")),
                          {"groups": groups, "eps": float(_arg(node, 4, "eps", 1e-5))})
        if target in _GEMM_FUNCS:
            return _gemm(node, target, name, args)
        if target is torch.einsum:
            return _einsum(args)
        if target in _CONV_FUNCS:
            return OpInfo("conv", name, (args[0],))
        if target in _POOL_TEMPLATE_FUNCS:
            op, rank = _POOL_TEMPLATE_FUNCS[target]
            avg = op == "avg_pool"
            return _pool(op, rank, args[0], _arg(node, 1, "kernel_size"), _arg(node, 2, "stride"),
                         _arg(node, 3, "padding", 0), 1 if avg else _arg(node, 4, "dilation", 1),
                         _arg(node, 4 if avg else 5, "ceil_mode", False),
                         False if avg else _arg(node, 6, "return_indices", False),
                         _arg(node, 5, "count_include_pad", True) if avg else True,
                         _arg(node, 6, "divisor_override") if avg and rank > 1 else None, name)
        if target in _POOL_FUNCS:
            return OpInfo("pool", name, (args[0],))
        if target is operator.pow or target is torch.pow:
            return _pow(args[0], args[1] if len(args) > 1 else kw.get("exponent"))
        if target is torch.clamp or target is torch.clip:
            return _clamp(args[0], _arg(node, 1, "min"), _arg(node, 2, "max"))
        if target is operator.getitem:
            return OpInfo("view", "getitem", (args[0],))
    else:
        if name == "pow":
            return _pow(args[0], args[1] if len(args) > 1 else kw.get("exponent"))
        if name in ("clamp", "clip"):
            return _clamp(args[0], _arg(node, 1, "min"), _arg(node, 2, "max"))
        if name in _VIEW_METHODS:
            return OpInfo("view", name, (args[0],))
        if name in _GEMM_METHODS and len(args) == 2 and not kw:
            return OpInfo("gemm", _GEMM_METHODS[name], (args[0], args[1], None), {"trans_b": False})
    # softmax family and reductions: x.softmax(dim) / torch.softmax(x, dim)
    if name in ("softmax", "log_softmax") and not method and target not in (F.softmax, F.log_softmax,
                                                                             torch.softmax, torch.log_softmax):
        return OpInfo("other", name)
    if name in ("softmax", "log_softmax"):
        dim = _arg(node, 1, "dim")
        if _arg(node, 3 if not method else 2, "dtype") is not None or not isinstance(dim, int):
            return OpInfo("other", name)
        return OpInfo("softmax", name, (args[0],), {"dim": dim})
    if name == "logsumexp":
        dim, keepdim = _dim(_arg(node, 1, "dim")), bool(_arg(node, 2, "keepdim", False))
        if dim is None:
            return OpInfo("other", name)
        return OpInfo("softmax", "logsumexp", (args[0],), {"dim": dim, "keepdim": keepdim})
    if name in ("argmax", "argmin") and (method or target in (torch.argmax, torch.argmin)):
        # the index of the first largest / smallest element along one dim (NaN counts as
        # the extreme, as in PyTorch); without a dim (the flat index) it stays in PyTorch
        dim = _arg(node, 1, "dim")
        if not isinstance(dim, int) or isinstance(dim, bool):
            return OpInfo("other", name)
        return OpInfo("reduce", name, (args[0],), {"dim": dim, "keepdim": bool(_arg(node, 2, "keepdim", False)),
                                                  "index": True})
    if name in ("cumsum", "cumprod") and (method or target in (torch.cumsum, torch.cumprod)):
        # an inclusive scan along one dim, in the input's dtype (no dtype= conversion)
        dim = _arg(node, 1, "dim")
        if not isinstance(dim, int) or isinstance(dim, bool) or _arg(node, 2, "dtype") is not None or \
                kw.get("out") is not None:
            return OpInfo("other", name)
        return OpInfo("scan", name, (args[0],), {"dim": dim})
    if reduce is not None or (name in ("max", "min") and len(args) + len(kw) >= 2):
        op = reduce or name
        dim = _dim(_arg(node, 1, "dim"))
        keepdim = bool(_arg(node, 2, "keepdim", False))
        if dim is None and op in ("sum", "mean") and _arg(node, 1, "dim") is None and len(args) == 1 and \
                not kw:
            # every element reduced to one value (``x.mean()``, ``torch.sum(x)``)
            return OpInfo("reduce", op, (args[0],), {"all": True})
        if dim is None or _arg(node, 3, "dtype") is not None:
            return OpInfo("other", name)
        # torch.max(x, dim) returns (values, indices): usable when only values are read
        returns_pair = name in ("max", "min")
        return OpInfo("reduce", op, (args[0],), {"dim": dim, "keepdim": keepdim, "returns_pair": returns_pair})
    return OpInfo("other", name)


def _gemm(node: Any, target: Any, name: str, args: tuple[Any, ...]) -> OpInfo:
    """A GEMM as (A, B, bias or None) with ``trans_b`` when B is stored as (N, K)
    (a linear layer's weight). ``addmm`` with beta or alpha other than 1 stays opaque."""
    kw = node.kwargs
    if target is F.linear:
        return OpInfo("gemm", "linear", (args[0], _arg(node, 1, "weight"), _arg(node, 2, "bias")), {"trans_b": True})
    if target is torch.addmm:
        if kw.get("beta", 1) != 1 or kw.get("alpha", 1) != 1 or len(args) != 3:
            return OpInfo("gemm", name, tuple(args), {"opaque": True})
        return OpInfo("gemm", "addmm", (args[1], args[2], args[0]), {"trans_b": False})
    if len(args) != 2 or kw:
        return OpInfo("gemm", name, tuple(args), {"opaque": True})
    return OpInfo("gemm", "matmul" if target is operator.matmul else name, (args[0], args[1], None),
                  {"trans_b": False})


def _einsum(args: tuple[Any, ...]) -> OpInfo:
    """``torch.einsum`` of two operands that is a matrix product: A ``...l`` times a 2-D B
    ``lk`` (or ``kl``, read transposed) giving ``...k``, or batched ``P il, P lk -> P ik``
    with the same batch letters P in the same order: a ``gemm`` (A, B) like ``matmul``;
    any other contraction stays in PyTorch."""
    operands = args[1:]
    if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
        operands = tuple(operands[0])
    eq = args[0] if args else None
    if not isinstance(eq, str) or len(operands) != 2 or "..." in eq or eq.count("->") != 1:
        return OpInfo("other", "einsum")
    lhs, out = eq.replace(" ", "").split("->")
    parts = lhs.split(",")
    if len(parts) != 2 or any(len(set(p)) != len(p) or not p.isalpha() for p in parts + [out]):
        return OpInfo("other", "einsum")
    a, b = parts
    if len(a) >= 2 and len(b) == 2:
        l = a[-1]  # noqa: E741 - the contracted letter
        if b[0] == l and out == a[:-1] + b[1] and b[1] not in a:
            return OpInfo("gemm", "einsum", (operands[0], operands[1], None), {"trans_b": False})
        if b[1] == l and out == a[:-1] + b[0] and b[0] not in a:
            return OpInfo("gemm", "einsum", (operands[0], operands[1], None), {"trans_b": True})
    if len(a) == len(b) >= 3 and a[:-2] == b[:-2] and a[-1] == b[-2] and out == a[:-1] + b[-1] and \
            len(set(a) | set(b)) == len(a) + 1:
        return OpInfo("gemm", "einsum", (operands[0], operands[1], None), {"trans_b": False})
    return OpInfo("other", "einsum")


def _ints(value: Any, rank: int) -> tuple[int, ...] | None:
    """A pooling size argument as ``rank`` ints (an int repeats), or None if not plain ints."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * rank
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(value) == 1:
            return (int(value[0]),) * rank
        if len(value) == rank:
            return tuple(int(v) for v in value)
    return None


_DEPTHWISE_RANK = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3}


def _depthwise(mod: Any, x: Any, path: str) -> OpInfo | None:
    """A depthwise convolution (one filter per channel: groups = in = out channels, zero
    padding given as ints) as a windowed kernel like pooling: ``pool`` kind, op
    ``depthwise_conv``, inputs (x, weight, bias or None); other convolutions: None."""
    rank = _DEPTHWISE_RANK.get(type(mod))
    if rank is None or not (mod.groups == mod.in_channels == mod.out_channels) or mod.padding_mode != "zeros":
        return None
    padding = (0,) * rank if mod.padding == "valid" else _ints(mod.padding, rank)
    k, s, d = _ints(mod.kernel_size, rank), _ints(mod.stride, rank), _ints(mod.dilation, rank)
    if None in (k, s, d, padding):
        return None
    return OpInfo("pool", "depthwise_conv", (x, Param(f"{path}.weight"),
                                             Param(f"{path}.bias") if mod.bias is not None else None),
                  {"rank": rank, "kernel": k, "stride": s, "padding": padding, "dilation": d, "ceil_mode": False,
                   "count_include_pad": True, "divisor_override": None, "has_bias": mod.bias is not None})


def _dense_conv(mod: Any, x: Any, path: str) -> OpInfo | None:
    """A dense 1-D or 2-D convolution (groups 1, zero padding given as ints): ``conv`` kind
    with inputs (x, weight, bias or None) and its geometry, for the implicit-GEMM kernel;
    other convolutions (grouped, transposed, 3-D, other padding): None."""
    rank = {nn.Conv1d: 1, nn.Conv2d: 2}.get(type(mod))
    if rank is None or mod.groups != 1 or mod.padding_mode != "zeros":
        return None
    padding = (0,) * rank if mod.padding == "valid" else _ints(mod.padding, rank)
    k, s, d = _ints(mod.kernel_size, rank), _ints(mod.stride, rank), _ints(mod.dilation, rank)
    if None in (k, s, d, padding):
        return None
    return OpInfo("conv", f"conv{rank}d", (x, Param(f"{path}.weight"),
                                           Param(f"{path}.bias") if mod.bias is not None else None),
                  {"dense": True, "rank": rank, "kernel": k, "stride": s, "padding": padding, "dilation": d,
                   "has_bias": mod.bias is not None})


_GENERAL_CONV_RANK = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3, nn.ConvTranspose1d: 1, nn.ConvTranspose2d: 2,
                      nn.ConvTranspose3d: 3}


def _general_conv(mod: Any, x: Any, path: str) -> OpInfo | None:
    """A convolution the dense 1-D/2-D kernel does not take (3-D, grouped, or transposed
    1-D/2-D/3-D), zero padding given as ints: ``conv`` kind with ``general`` set, inputs
    (x, weight, bias or None), for the grouped implicit-GEMM kernel; None otherwise."""
    rank = _GENERAL_CONV_RANK.get(type(mod))
    if rank is None or mod.padding_mode != "zeros" or isinstance(mod.padding, str) and mod.padding != "valid":
        return None
    padding = (0,) * rank if mod.padding == "valid" else _ints(mod.padding, rank)
    k, s, d = _ints(mod.kernel_size, rank), _ints(mod.stride, rank), _ints(mod.dilation, rank)
    transposed = isinstance(mod, nn.modules.conv._ConvTransposeNd)
    out_pad = _ints(mod.output_padding, rank) if transposed else (0,) * rank
    if None in (k, s, d, padding, out_pad):
        return None
    name = f"conv_transpose{rank}d" if transposed else f"conv{rank}d"
    return OpInfo("conv", name, (x, Param(f"{path}.weight"), Param(f"{path}.bias") if mod.bias is not None else None),
                  {"dense": True, "general": True, "rank": rank, "kernel": k, "stride": s, "padding": padding,
                   "dilation": d, "groups": int(mod.groups), "transposed": transposed, "output_padding": out_pad,
                   "has_bias": mod.bias is not None})


def _pool(op: str, rank: int, x: Any, kernel: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: Any,
          return_indices: Any, count_include_pad: Any, divisor_override: Any, name: str) -> OpInfo:
    """Max/avg pooling with its window as ``rank``-tuples; anything the template does not
    cover (indices returned, non-int sizes) stays a library ``pool`` without attrs."""
    k = _ints(kernel, rank)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _ints(stride, rank)
    p, d = _ints(padding, rank), _ints(dilation, rank)
    ok = (None not in (k, s, p, d) and return_indices is False and isinstance(ceil_mode, bool)
          and isinstance(count_include_pad, bool)
          and (divisor_override is None or (isinstance(divisor_override, int) and divisor_override > 0)))
    if not ok:
        return OpInfo("pool", name, (x,))
    return OpInfo("pool", op, (x,), {"rank": rank, "kernel": k, "stride": s, "padding": p, "dilation": d,
                                     "ceil_mode": ceil_mode, "count_include_pad": count_include_pad,
                                     "divisor_override": divisor_override})


def _pow(x: Any, exponent: Any) -> OpInfo:
    if exponent == 2 or exponent == 2.0:
        return _pointwise("square", (x,))
    if exponent == 0.5:
        return _pointwise("sqrt", (x,))
    if exponent == -0.5:
        return _pointwise("rsqrt", (x,))
    if exponent == 1 or exponent == 1.0:
        return _pointwise("identity", (x,))
    return OpInfo("other", "pow")


def _clamp(x: Any, lo: Any, hi: Any) -> OpInfo:
    if not all(v is None or isinstance(v, (int, float)) for v in (lo, hi)):
        return OpInfo("other", "clamp")
    if lo is not None and hi is not None:
        return _pointwise("clamp", (x,), min=float(lo), max=float(hi))
    if lo is not None:
        return _pointwise("clamp_min", (x,), min=float(lo))
    if hi is not None:
        return _pointwise("clamp_max", (x,), max=float(hi))
    return OpInfo("other", "clamp")


def literal(value: Any) -> str:
    """A Python scalar as a Triton fp32 literal."""
    if isinstance(value, bool):
        return "1.0" if value else "0.0"
    v = float(value)
    if math.isinf(v):
        return "float('inf')" if v > 0 else "float('-inf')"
    if math.isnan(v):
        raise ValueError("NaN constant in a pointwise chain")
    return repr(v)
