"""Recognition: what the reference computes, as an operator graph with fusible regions.

Method: the problem's source is executed in a fresh namespace, ``Model`` is built on the
``meta`` device (no memory, no kernels) from ``get_init_inputs()``, traced with
``torch.fx.symbolic_trace`` and its shapes propagated with meta inputs from
``get_inputs()`` (``ShapeProp``). Each node is classified (:mod:`.ops`), then regions are
formed:

* ``pointwise``: a connected set of pointwise nodes with one escaping value, whose
  tensor inputs all broadcast to its output shape. When its main producer is a GEMM or a
  convolution, the region is reported as that node's epilogue (``epilogue_of``).
* ``chnorm``: batch norm (the module's mode decides at run time: batch statistics in
  training mode, with the running-statistics update, running ones in eval mode), group
  norm (module or ``F.group_norm``) and instance norm with affine parameters (one group
  per channel).
* ``reduce`` (sum/mean/max/min over one dim; argmax/argmin, int64 indices), ``scan``
  (cumsum/cumprod along one dim: inclusive, reversed through ``flip``, exclusive as
  ``cat((zeros, scan(narrow(x, d, 0, L - 1))), d)``, with a full-shape pointwise prologue
  such as ``x * mask``), ``softmax`` (softmax, log_softmax,
  logsumexp over one dim), ``layernorm`` (over the last dims), ``rmsnorm`` (module,
  functional, or the pattern ``x / sqrt(mean(x*x, dim, keepdim) + eps)`` and its rsqrt
  form).
* ``gemm``: a matmul/mm/bmm/addmm/linear over float operands of one dtype (2-D B, or
  batched operands with equal batch dims) with the pointwise region that consumes it, if
  any, as its epilogue (``epilogue``; inputs ``acc`` then the region's other tensors).
  It overlaps that pointwise region: a candidate lowers either the Triton GEMM or the
  pointwise kernel after the library's GEMM (:func:`alternatives`).
* ``pool``: max/avg pooling 1d/2d/3d, and depthwise convolution 1d/2d/3d (op
  ``depthwise_conv``: one filter per channel), with a pointwise prologue (applied to each
  loaded element) and epilogue, each with any number of broadcast tensor inputs.
* ``rowpair``: cosine similarity over the last dim of two (N, D) inputs, and the triplet
  margin loss (p = 2, mean or sum) of three.
* ``attention``: ``F.scaled_dot_product_attention`` (causal or not; no mask tensor or
  dropout), one kernel with an online softmax.
* ``xent``: cross-entropy of logits (N, C) against class indices (mean or sum, an
  ignore_index; no class weights or label smoothing).
* ``reduce_all``: ``x.sum()`` / ``x.mean()`` over every element with the pointwise region
  feeding it, or a loss that reduces every element to one value (``F.kl_div`` with
  reduction sum, mean or batchmean; ``F.mse_loss``, ``F.l1_loss``, ``F.smooth_l1_loss``
  and ``F.huber_loss`` with reduction mean or sum), with the pointwise region that only
  feeds it folded in.
* ``conv``: a dense 1-D or 2-D convolution (``nn.Conv1d``/``nn.Conv2d``, groups 1, zero
  padding) with its bias, as an implicit GEMM; like a GEMM region it is lowered only in
  the Triton alternative. Other convolutions (grouped, transposed, 3-D, functional) and
  adaptive pools are recognized and left to the vendor library.

Anything that fails (trace, shape propagation, a data-dependent forward) yields a
:class:`Recognition` with ``ok=False`` and a one-line ``reason``.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from kernelpro_plugins_expert.foldbias import _kp_split_conv_bias
from kernelpro_plugins_expert.ops import OpInfo, Param, classify

KERNEL_KINDS = ("pointwise", "reduce", "softmax", "layernorm", "rmsnorm")


@attrs.frozen
class OpNode:
    name: str
    kind: str
    op: str
    shape: tuple[int, ...] | None
    dtype: str | None


#: One step of a pointwise program: ``(op, operands, attrs)``.
Step = tuple[str, tuple[tuple[str, Any], ...], dict[str, Any]]


@attrs.frozen
class Region:
    """Nodes to be replaced by one kernel call.

    ``inputs`` are fx node names or ``Param`` paths (``{"param": path}`` once serialised);
    ``program`` is the pointwise SSA body: ``(op, operands, attrs)`` with operands
    ``("in", i)``, ``("v", j)`` or ``("const", value)``.
    """

    kind: str
    op: str
    nodes: tuple[str, ...]
    output: str
    inputs: tuple[Any, ...]
    shape: tuple[int, ...]
    attrs: dict[str, Any] = attrs.field(factory=dict)
    program: tuple[Step, ...] = ()
    epilogue_of: str | None = None  # gemm/conv node whose output this pointwise region consumes
    # gemm: the library's GEMM + pointwise region this Triton GEMM replaces (its output)
    # pointwise bodies fused into a reduction/softmax/norm kernel: applied to each loaded
    # element (prologue) and to each value before it is stored (epilogue); one tensor input,
    # and for reductions and softmax a second one that varies along one dim of the input
    # (its last input; the dim in ``attrs["prologue_channel"]``)
    prologue: tuple[tuple[str, tuple[tuple[str, Any], ...], dict[str, Any]], ...] = ()
    epilogue: tuple[tuple[str, tuple[tuple[str, Any], ...], dict[str, Any]], ...] = ()
    #: the submodule (dotted path) whose own traced graph holds ``nodes``; "" for the model's
    scope: str = ""

    @property
    def id(self) -> str:
        return self.output

    def keys(self) -> set[tuple[str, str]]:
        """The region's nodes as (scope, name): names are unique within one traced graph."""
        return {(self.scope, n) for n in self.nodes}

    def spec(self) -> dict[str, Any]:
        """JSON form written into candidates."""
        return {
            "kind": self.kind, "op": self.op, "nodes": list(self.nodes), "output": self.output, "scope": self.scope,
            "inputs": [{"param": i.path} if isinstance(i, Param) else ({"none": True} if i is None else
                                                                       {"node": i}) for i in self.inputs],
        }


@attrs.frozen
class Recognition:
    ok: bool
    reason: str = ""
    nodes: tuple[OpNode, ...] = ()
    regions: tuple[Region, ...] = ()
    input_count: int = 0
    #: bytes of the forward's tensor inputs and outputs (from the traced shapes): the
    #: least memory traffic of one call, which tells launch-bound forwards from large ones
    io_bytes: int = 0
    #: the model did not trace as a whole: its regions lie in submodules that did (each
    #: region's ``scope``); the rest of the forward stays as written
    scoped: bool = False

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(n.kind for n in self.nodes)

    def alternatives(self) -> tuple[list[int], list[int]]:
        """Indices of the regions lowered with the library's GEMMs and convolutions (every
        region but the Triton GEMMs and convolutions) and with Triton ones (each GEMM or
        convolution region instead of the regions it overlaps)."""
        gemms = [i for i, r in enumerate(self.regions) if r.kind in ("gemm", "conv")]
        library = [i for i, r in enumerate(self.regions) if r.kind not in ("gemm", "gemm_reduce", "conv")]
        taken = {k for i in gemms for k in self.regions[i].keys()}
        triton = sorted(gemms + [i for i in library if not taken & self.regions[i].keys()])
        return library, triton

    def rewrites(self) -> list[int]:
        """Indices of the regions lowered with each algebraic rewrite (``gemm_reduce``)
        instead of the regions it overlaps; empty without one."""
        rewrites = [i for i, r in enumerate(self.regions) if r.kind == "gemm_reduce"]
        if not rewrites:
            return []
        taken = {k for i in rewrites for k in self.regions[i].keys()}
        library, _ = self.alternatives()
        return sorted(rewrites + [i for i in library if not taken & self.regions[i].keys()])

    def summary(self) -> str:
        if not self.ok:
            return f"not recognized: {self.reason}"
        counts: dict[str, int] = {}
        for n in self.nodes:
            if n.op not in ("placeholder", "output", "get_attr"):  # operators only
                counts[n.kind] = counts.get(n.kind, 0) + 1
        parts = [f"{k}={v}" for k, v in sorted(counts.items())]
        regs = ", ".join((f"{r.scope}/" if r.scope else "") + f"{r.kind}:{r.op}" +
                         (f"(epilogue of {r.epilogue_of})" if r.epilogue_of else "") for r in self.regions)
        return f"ops {' '.join(parts)}; regions [{regs}]"


def trace(source: str) -> tuple[Any, tuple[Any, ...]]:
    """Execute a problem source and return (traced GraphModule with shapes, meta inputs)."""
    gm, inputs, _ = _trace(source, fold_conv_bias=False)
    return gm, inputs


def _trace(source: str, fold_conv_bias: bool) -> tuple[Any, tuple[Any, ...], list[str]]:
    """:func:`trace`; with ``fold_conv_bias``, the graph after
    :func:`.foldbias._kp_split_conv_bias`, and the module paths it split."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    namespace: dict[str, Any] = {"__name__": "kernelpro_expert_problem"}
    exec(compile(source, "<problem>", "exec"), namespace)  # noqa: S102 - the user's own problem
    model_cls = namespace["Model"]
    with torch.device("meta"):
        init = list(namespace["get_init_inputs"]())
        model = model_cls(*init)
        inputs = tuple(namespace["get_inputs"]())
    gm = torch.fx.symbolic_trace(model)
    split = _kp_split_conv_bias(gm) if fold_conv_bias else []
    # shapes in eval mode (the graph is the one traced above): a batch norm with momentum
    # None reads its batch counter in training mode, which meta tensors cannot
    ShapeProp(gm.eval()).propagate(*inputs)
    return gm, inputs, split


def recognize(source: str) -> Recognition:
    """Trace ``source`` (a KernelBench problem) and find its fusible regions; a model that
    does not trace as a whole gets the regions of its submodules that do
    (:func:`recognize_submodules`)."""
    try:
        gm, inputs = trace(source)
    except Exception as exc:  # any failure means: not recognized, with the reason
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        reason = f"cannot trace the reference ({type(exc).__name__}: {msg[:160]})"
        try:
            scoped = recognize_submodules(source)
        except Exception:  # the problem itself fails to build or run: the first reason stands
            scoped = None
        return scoped if scoped is not None else Recognition(ok=False, reason=reason)
    return _recognize_traced(gm, inputs)


def _recognize_traced(gm: Any, inputs: tuple[Any, ...]) -> Recognition:
    """The regions of a traced model, ``inputs`` its meta inputs."""
    try:
        # forward arguments that are Python numbers (``A * s``): read by pointwise kernels
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        scalars = {p.name for p, v in zip(placeholders, inputs)
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        return _recognize_graph(gm, len(inputs), scalars)
    except Exception as exc:
        return Recognition(ok=False, reason=f"cannot analyse the traced graph ({type(exc).__name__}: {exc})")


def recognize_folded(source: str) -> Recognition | None:
    """The regions of ``source`` once its convolutions' biases are split off into add nodes
    (:mod:`.foldbias`), for the ``fold`` candidates; None when the model does not trace as a
    whole or has no convolution bias to split."""
    try:
        gm, inputs, split = _trace(source, fold_conv_bias=True)
    except Exception:
        return None
    if not split:
        return None
    rec = _recognize_traced(gm, inputs)
    return rec if rec.ok else None


def _signature(args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Shapes and dtypes of a call's positional tensor arguments; None when one is not a
    tensor (a submodule is traced with tensors as its only inputs)."""
    import torch

    if not args or not all(isinstance(a, torch.Tensor) for a in args):
        return None
    return tuple((tuple(a.shape), a.dtype) for a in args)


def recognize_submodules(source: str) -> Recognition | None:
    """Regions of a model that does not trace as a whole (data-dependent slicing, Python
    loops over a traced size, ``.item()``): the model runs once on meta tensors with a
    pre-hook on every submodule recording its inputs; then, from the top, each submodule
    called with tensors only, with the same shapes on every call, is traced on its own
    and recognized. One that traces and has regions becomes their ``scope``; one that
    does not trace is searched in its children. None when no submodule has a region."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    namespace: dict[str, Any] = {"__name__": "kernelpro_expert_problem"}
    exec(compile(source, "<problem>", "exec"), namespace)  # noqa: S102 - the user's own problem
    init = list(namespace["get_init_inputs"]())
    try:
        with torch.device("meta"):
            model = namespace["Model"](*init)
    except Exception:
        # a constructor that reads values (``.item()``): built on the CPU, then moved to meta
        with torch.no_grad():
            model = namespace["Model"](*init)
        model = model.to("meta")
    with torch.device("meta"):
        inputs = tuple(namespace["get_inputs"]())
    calls: dict[str, list[Any]] = {}

    def hook(path: str) -> Any:
        def record(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            calls.setdefault(path, []).append(None if kwargs else _signature(args))
        return record

    handles = [m.register_forward_pre_hook(hook(path), with_kwargs=True)
               for path, m in model.named_modules() if path]
    try:
        with torch.no_grad():
            model(*inputs)
    except Exception:
        pass  # the submodules called before the failure are still recorded
    finally:
        for h in handles:
            h.remove()
    regions: list[Region] = []
    nodes: list[OpNode] = []

    def visit(prefix: str, module: Any) -> None:
        for name, child in module.named_children():
            path = f"{prefix}.{name}" if prefix else name
            seen = calls.get(path, [])
            if seen and seen[0] is not None and all(sig == seen[0] for sig in seen):
                try:
                    gm = torch.fx.symbolic_trace(child)
                    with torch.device("meta"):
                        args = [torch.empty(shape, dtype=dtype) for shape, dtype in seen[0]]
                    ShapeProp(gm.eval()).propagate(*args)
                    rec = _recognize_graph(gm, len(args))
                except Exception:
                    rec = None
                if rec is not None:  # traced: its regions (if any) are the child's
                    regions.extend(attrs.evolve(r, scope=path) for r in rec.regions)
                    nodes.extend(rec.nodes)
                    continue
            visit(path, child)

    visit("", model)
    if not regions:
        return None
    io = sum(math.prod(t.shape) * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    return Recognition(ok=True, nodes=tuple(nodes), regions=tuple(regions), input_count=len(inputs),
                       io_bytes=int(io), scoped=True)


def _meta(node: Any) -> tuple[tuple[int, ...] | None, str | None]:
    return _meta_of(node.meta.get("tensor_meta"))


def _meta_of(tm: Any) -> tuple[tuple[int, ...] | None, str | None]:
    if tm is None or not hasattr(tm, "shape"):
        return None, None
    return tuple(int(s) for s in tm.shape), str(tm.dtype).replace("torch.", "")


def _recognize_graph(gm: Any, input_count: int, scalars: set[str] | frozenset[str] = frozenset()) -> Recognition:
    modules = dict(gm.named_modules())
    info: dict[str, OpInfo] = {}
    nodes: list[OpNode] = []
    order = list(gm.graph.nodes)
    by_name = {n.name: n for n in order}
    for n in order:
        oi = classify(n, modules) if n.op in ("call_module", "call_function", "call_method") else \
            OpInfo("other", n.op)
        shape, dtype = _meta(n)
        if oi.attrs.get("returns_pair") and n.meta.get("tensor_meta") is not None:
            shape, dtype = _meta_of(n.meta["tensor_meta"][0])  # (values, indices): the values
        if oi.kind != "other" and oi.kind != "view" and (shape is None or dtype is None):
            oi = OpInfo("other", oi.op)
        if oi.attrs.get("index") and hasattr(oi.inputs[0], "meta"):
            # argmax/argmin: an int64 result of a float input; the input's dtype decides
            dtype = _meta(oi.inputs[0])[1]
        if oi.kind in KERNEL_KINDS + ("scan", "chnorm") and dtype not in ("float32", "float16", "bfloat16", "float64"):
            oi = OpInfo("other", oi.op)
        if oi.kind in ("gemm", "pool") and dtype not in ("float32", "float16", "bfloat16", "float64"):
            oi = OpInfo(oi.kind, oi.op, oi.inputs, {"opaque": True})
        info[n.name] = oi
        nodes.append(OpNode(name=n.name, kind=oi.kind, op=oi.op, shape=shape, dtype=dtype))
    claimed: set[str] = set()
    regions: list[Region] = []
    for r in _rmsnorm_patterns(order, info):
        regions.append(r)
        claimed.update(r.nodes)
    for n in order:
        oi = info[n.name]
        if n.name in claimed or oi.kind not in ("reduce", "softmax", "layernorm", "rmsnorm") or oi.attrs.get("all"):
            continue
        single = _single_region(n, oi, by_name)
        if single is not None:
            regions.append(single)
            claimed.add(n.name)
            claimed.update(single.nodes)
    for n in order:
        norm = _chnorm_region(n, info[n.name])
        if norm is not None:
            regions.append(norm)
            claimed.add(n.name)
    regions.extend(_pointwise_regions(order, info, claimed, scalars))
    regions = _fuse_into_reductions(regions, by_name)
    regions = _scan_regions(order, info, regions, by_name)
    regions = _full_reduction_regions(order, regions, by_name)
    regions = _whole_tensor_reductions(order, info, regions, by_name)
    regions += _cross_entropy_regions(gm, order)
    regions += _row_pair_regions(gm, order)
    regions += _attention_regions(order)
    regions = _pool_regions(order, info, regions, by_name)
    regions += _gemm_regions(gm, order, info, regions, by_name)
    regions += _gemm_reduce_regions(gm, info, regions, by_name)
    regions += _conv_regions(gm, order, info)
    position = {n.name: i for i, n in enumerate(order)}
    # graph order of outputs; a Triton GEMM after the pointwise region it replaces
    regions.sort(key=lambda r: (position[r.output], r.kind == "gemm"))
    return Recognition(ok=True, nodes=tuple(nodes), regions=tuple(regions), input_count=input_count,
                       io_bytes=_io_bytes(order))


def _io_bytes(order: list[Any]) -> int:
    """Bytes of the placeholders' tensors and of every tensor the output node returns."""
    import torch

    def nbytes(tm: Any) -> int:
        if tm is None:
            return 0
        if hasattr(tm, "shape") and hasattr(tm, "dtype"):  # TensorMetadata (itself a tuple)
            count = 1
            for s in tm.shape:
                count *= int(s)
            return count * torch.empty((), dtype=tm.dtype).element_size()
        if isinstance(tm, (tuple, list)):
            return sum(nbytes(t) for t in tm)
        if isinstance(tm, dict):
            return sum(nbytes(t) for t in tm.values())
        return 0

    def returned(arg: Any) -> int:
        if hasattr(arg, "meta"):
            return nbytes(arg.meta.get("tensor_meta"))
        if isinstance(arg, (tuple, list)):
            return sum(returned(a) for a in arg)
        if isinstance(arg, dict):
            return sum(returned(a) for a in arg.values())
        return 0

    total = sum(nbytes(n.meta.get("tensor_meta")) for n in order if n.op == "placeholder")
    return total + sum(returned(n.args) for n in order if n.op == "output")


def _input_ref(value: Any) -> Any:
    """A region input: an fx node's name, a Param, or None (an absent optional tensor)."""
    if value is None or isinstance(value, Param):
        return value
    return value.name


def _single_region(n: Any, oi: OpInfo, by_name: dict[str, Any]) -> Region | None:
    shape, _ = _meta(oi.inputs[0]) if hasattr(oi.inputs[0], "meta") else (None, None)
    if shape is None:
        return None
    nodes: tuple[str, ...] = (n.name,)
    output = n.name
    attrs_ = dict(oi.attrs)
    if oi.kind == "reduce" and attrs_.pop("returns_pair", False):
        users = list(n.users)
        if not users or any(u.op != "call_function" or u.args[1] != 0 for u in users if u.target) or \
                any(getattr(u.target, "__name__", "") != "getitem" for u in users) or len(users) != 1:
            return None
        output = users[0].name
        nodes = (n.name, output)
    if not all(isinstance(i, (Param, type(None))) or hasattr(i, "meta") for i in oi.inputs):
        return None
    dim = attrs_.get("dim")
    if dim is not None:
        if not shape:
            return None
        dims = sorted({d % len(shape) for d in (dim if isinstance(dim, tuple) else (dim,))})
        if dims != list(range(dims[0], dims[0] + len(dims))):
            return None  # reduced dims must be adjacent to view the tensor as (outer, R, inner)
        attrs_["dim"], attrs_["ndims"] = dims[0], len(dims)
    return Region(kind=oi.kind, op=oi.op, nodes=nodes, output=output,
                  inputs=tuple(_input_ref(i) for i in oi.inputs), shape=shape, attrs=attrs_)


def _is(node: Any, info: dict[str, OpInfo], kind: str, *ops: str) -> bool:
    name = getattr(node, "name", None)
    oi = info.get(name) if isinstance(name, str) else None
    return oi is not None and oi.kind == kind and (not ops or oi.op in ops)


def _rmsnorm_patterns(order: list[Any], info: dict[str, OpInfo]) -> list[Region]:
    """x / sqrt(mean(x*x, dim, keepdim=True) + eps), or x * rsqrt(...)."""
    found = []
    for n in order:
        if not _is(n, info, "reduce", "mean") or not info[n.name].attrs.get("keepdim") or \
                not isinstance(info[n.name].attrs.get("dim"), int):
            continue
        sq = info[n.name].inputs[0]
        if not _is(sq, info, "pointwise", "square") and not (
                _is(sq, info, "pointwise", "mul") and info[sq.name].inputs[0] is info[sq.name].inputs[1]):
            continue
        x = info[sq.name].inputs[0]
        chain = [sq.name, n.name]
        cur, eps = n, 0.0
        users = list(cur.users)
        if len(users) == 1 and _is(users[0], info, "pointwise", "add"):
            a, b = info[users[0].name].inputs
            other = b if a is cur else a
            if isinstance(other, (int, float)):
                eps, cur = float(other), users[0]
                chain.append(cur.name)
        users = list(cur.users)
        if len(users) != 1:
            continue
        u = users[0]
        final = None
        if _is(u, info, "pointwise", "sqrt") and len(u.users) == 1:
            d = next(iter(u.users))
            if _is(d, info, "pointwise", "div") and info[d.name].inputs == (x, u):
                chain += [u.name, d.name]
                final = d
        elif _is(u, info, "pointwise", "rsqrt") and len(u.users) == 1:
            m = next(iter(u.users))
            if _is(m, info, "pointwise", "mul") and set(map(id, info[m.name].inputs)) == {id(x), id(u)}:
                chain += [u.name, m.name]
                final = m
        if final is None or any(len(by.users) != 1 for by in (sq,)) or len(sq.users) != 1:
            continue
        shape, _ = _meta(x)
        if shape is None:
            continue
        found.append(Region(kind="rmsnorm", op="rms_norm", nodes=tuple(chain), output=final.name,
                            inputs=(x.name, None), shape=shape,
                            attrs={"dim": info[n.name].attrs["dim"] % len(shape), "eps": eps,
                                   "normalized_ndim": None}))
    return found


def _pointwise_regions(order: list[Any], info: dict[str, OpInfo], claimed: set[str],
                       scalars: set[str] | frozenset[str] = frozenset()) -> list[Region]:
    pw = [n for n in order if info[n.name].kind == "pointwise" and n.name not in claimed]
    pw_names = {n.name for n in pw}
    # connected components over producer -> consumer edges between pointwise nodes
    parent = {n.name: n.name for n in pw}

    def find(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for n in pw:
        for src in info[n.name].inputs:
            if getattr(src, "name", None) in pw_names:
                parent[find(src.name)] = find(n.name)
    comps: dict[str, list[Any]] = {}
    for n in pw:
        comps.setdefault(find(n.name), []).append(n)
    regions = []
    for members in comps.values():
        r = _pointwise_region(members, info, scalars)
        if r is not None:
            regions.append(r)
    return regions


def _pointwise_region(members: list[Any], info: dict[str, OpInfo],
                      scalars: set[str] | frozenset[str] = frozenset()) -> Region | None:
    """A pointwise region over ``members``; a forward argument named in ``scalars`` (a
    Python number) is an input too (the region's ``attrs["scalars"]`` counts them): only a
    standalone pointwise kernel reads it, other kernels do not fuse such a region."""
    names = {m.name for m in members}
    escaping = [m for m in members if any(u.name not in names for u in m.users)]
    if len(escaping) != 1 or escaping[0] is not members[-1]:
        return None  # several values leave the region: left to PyTorch
    out = members[-1]
    out_shape, out_dtype = _meta(out)
    if out_shape is None:
        return None
    inputs: list[Any] = []
    program = []
    index = {m.name: j for j, m in enumerate(members)}
    for m in members:
        oi = info[m.name]
        operands = []
        for src in oi.inputs:
            if isinstance(src, (int, float)) and not isinstance(src, bool):
                operands.append(("const", float(src)))
            elif getattr(src, "name", None) in index:
                operands.append(("v", index[src.name]))
            elif getattr(src, "op", None) == "placeholder" and src.name in scalars:
                if src.name not in inputs:
                    inputs.append(src.name)
                operands.append(("in", inputs.index(src.name)))
            elif hasattr(src, "meta"):
                shape, dtype = _meta(src)
                # a bool tensor (a mask) reads as 0.0 / 1.0, an integer one as its value, into a
                # float result
                if shape is None or dtype not in ("float32", "float16", "bfloat16", "float64") and \
                        not (dtype in ("bool", "int8", "int16", "int32", "int64") and
                             out_dtype in ("float32", "float16", "bfloat16", "float64")):
                    return None
                if not _broadcasts_to(shape, out_shape):
                    return None
                if src.name not in inputs:
                    inputs.append(src.name)
                operands.append(("in", inputs.index(src.name)))
            else:
                return None
        program.append((oi.op, tuple(operands), dict(oi.attrs)))
    n_scalars = sum(1 for i in inputs if i in scalars)
    if len(inputs) == n_scalars:
        return None
    return Region(kind="pointwise", op="+".join(p[0] for p in program), nodes=tuple(m.name for m in members),
                  output=out.name, inputs=tuple(inputs), shape=out_shape, program=tuple(program),
                  epilogue_of=_epilogue_anchor(members, info), attrs={"scalars": n_scalars} if n_scalars else {})


def _epilogue_anchor(members: list[Any], info: dict[str, OpInfo]) -> str | None:
    first = info[members[0].name]
    for src in first.inputs:
        if hasattr(src, "name") and src.name in info and info[src.name].kind in ("gemm", "conv"):
            return src.name
    return None


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    if len(shape) > len(target):
        return False
    for a, b in zip(reversed(shape), reversed(target)):
        if a != b and a != 1:
            return False
    return True


def _chnorm_region(n: Any, oi: OpInfo) -> Region | None:
    """Batch, group or (affine) instance norm of an input (N, C, *spatial): a ``chnorm``
    region (inputs: x and the batch-norm module, or x, weight, bias for a group norm)."""
    if oi.kind != "chnorm" or not hasattr(oi.inputs[0], "meta"):
        return None
    shape, _ = _meta(oi.inputs[0])
    if shape is None or len(shape) < 2 or (oi.attrs.get("rank") is not None and len(shape) != oi.attrs["rank"] + 2):
        return None  # unbatched inputs stay in PyTorch
    if oi.op == "group_norm" and (shape[1] % oi.attrs["groups"] or
                                  not all(i is None or isinstance(i, Param) or hasattr(i, "meta")
                                          for i in oi.inputs[1:])):
        return None
    return Region(kind="chnorm", op=oi.op, nodes=(n.name,), output=n.name,
                  inputs=tuple(_input_ref(i) for i in oi.inputs), shape=shape,
                  attrs={k: v for k, v in oi.attrs.items() if k != "rank"})


def _target_name(node: Any) -> str:
    """The called function's or method's name of an fx node ("" for anything else)."""
    if node is None or not hasattr(node, "op") or node.op not in ("call_function", "call_method"):
        return ""
    return node.target if node.op == "call_method" else getattr(node.target, "__name__", "")


def _flip_dims(node: Any, rank: int) -> tuple[int, ...] | None:
    """The dims a ``torch.flip`` / ``x.flip`` node reverses (normalised), or None."""
    if _target_name(node) != "flip":
        return None
    dims = _call_arg(node, 1, "dims", None)
    if node.op == "call_method" and len(node.args) > 2:
        dims = node.args[1:]
    if isinstance(dims, int):
        dims = (dims,)
    if not isinstance(dims, (tuple, list)) or not all(isinstance(d, int) for d in dims) or not rank:
        return None
    return tuple(sorted({d % rank for d in dims}))


def _exclusive_form(n: Any, d: int, shape: tuple[int, ...], op: str) -> tuple[Any, tuple[str, ...], Any, str] | None:
    """``cat((zeros, scan(narrow(x, d, 0, L - 1))), d)`` (ones for a product): the exclusive
    scan of ``x`` (its value at i combines the elements before i). Returns (x, the extra
    nodes before the scan, the cat node, the fill's node) or None."""
    src: Any = n.args[0] if n.args else None
    if _target_name(src) != "narrow" or len(src.users) != 1 or len(n.users) != 1:
        return None
    x = src.args[0]
    x_shape = _meta(x)[0] if hasattr(x, "meta") else None
    start = _call_arg(src, 2, "start", None)
    ndim = _call_arg(src, 1, "dim", None)
    if x_shape is None or len(x_shape) != len(shape) or start != 0 or not isinstance(ndim, int) or \
            ndim % len(shape) != d or x_shape[d] != shape[d] + 1:
        return None
    cat = next(iter(n.users))
    if _target_name(cat) not in ("cat", "concat", "concatenate"):
        return None
    parts, cdim = _call_arg(cat, 0, "tensors", None), _call_arg(cat, 1, "dim", 0)
    if not isinstance(parts, (tuple, list)) or len(parts) != 2 or parts[1] is not n or \
            not isinstance(cdim, int) or cdim % len(shape) != d:
        return None
    fill: Any = parts[0]
    want = ("zeros_like", "zeros") if op == "cumsum" else ("ones_like", "ones")
    f_shape = _meta(fill)[0] if hasattr(fill, "meta") else None
    if _target_name(fill) not in want or f_shape is None or len(fill.users) != 1 or \
            f_shape != x_shape[:d] + (1,) + x_shape[d + 1:]:
        return None
    return x, (src.name,), cat, fill.name


def _scan_regions(order: list[Any], info: dict[str, OpInfo], regions: list[Region],
                  by_name: dict[str, Any]) -> list[Region]:
    """Cumulative sums and products along one dim: inclusive, reversed (the scan of
    ``x.flip(d)`` flipped back along ``d``) or exclusive (see :func:`_exclusive_form`),
    with the pointwise region that only feeds the scan and reads tensors of its full shape
    (e.g. ``x * mask``) as a prologue."""
    out = list(regions)
    for n in order:
        oi = info[n.name]
        if oi.kind != "scan" or not hasattr(oi.inputs[0], "meta"):
            continue
        shape, dtype = _meta(n)
        if not shape or dtype not in ("float32", "float16", "bfloat16", "float64"):
            continue
        d = oi.attrs["dim"] % len(shape)
        src, before, after, output = oi.inputs[0], [n.name], [], n.name
        reverse = exclusive = False
        excl = _exclusive_form(n, d, shape, oi.op)
        if excl is not None:
            src, pre, cat, fill = excl
            shape = _meta(src)[0] or shape
            before = list(pre) + before
            after = [fill, cat.name]
            output, exclusive = cat.name, True
        elif _flip_dims(src, len(shape)) == (d,) and len(src.users) == 1 and len(n.users) == 1 and \
                _flip_dims(next(iter(n.users)), len(shape)) == (d,):
            back = next(iter(n.users))
            before = [src.name] + before
            src = src.args[0]
            after, output, reverse = [back.name], back.name, True
        if not hasattr(src, "meta") or _meta(src) != (shape, dtype):
            continue
        inputs: tuple[Any, ...] = (src.name,)
        program: tuple[Any, ...] = ()
        pro = next((p for p in out if p.kind == "pointwise" and p.output == src.name and not p.epilogue_of and
                    len(src.users) == 1 and all(_meta(by_name[i])[0] == shape for i in p.inputs)), None)
        if pro is not None:
            inputs, program = pro.inputs, pro.program
            before = list(pro.nodes) + before
            out.remove(pro)
        out.append(Region(kind="scan", op=oi.op, nodes=tuple(before + after), output=output, inputs=inputs,
                          shape=shape, attrs={"dim": d, "reverse": reverse, "exclusive": exclusive},
                          program=program))
    return out


def _fuse_into_reductions(regions: list[Region], by_name: dict[str, Any]) -> list[Region]:
    """Merge a one-input pointwise region that feeds only a reduction/softmax/norm region
    into it as a prologue (into a reduction or softmax also one with a second input that
    varies along one dim, such as a per-channel bias), and a one-input pointwise region that
    only reads its result as an epilogue: each saves a full pass over the tensor in memory."""
    fused = list(regions)
    for r in [r for r in regions if r.kind in ("reduce", "softmax", "layernorm", "rmsnorm", "chnorm")]:
        current = r
        pro = next((p for p in fused if p.kind == "pointwise" and len(p.inputs) in (1, 2) and
                    p.output == current.inputs[0] and len(by_name[p.output].users) == 1 and
                    next(iter(by_name[p.output].users)).name == current.nodes[0]), None)
        channel = None
        if pro is not None and len(pro.inputs) == 2:
            # a second tensor that varies along one dim only (a per-channel bias or scale):
            # the reduction and softmax kernels load it by each element's index along that dim
            channel = _channel_dim(by_name, pro.inputs[1], pro.shape)
            if current.kind not in ("reduce", "softmax") or len(current.inputs) != 1 or channel is None:
                pro = None
        if pro is not None and _meta(by_name[pro.inputs[0]])[0] == pro.shape:
            extra: tuple[Any, ...] = () if channel is None else (None, None, pro.inputs[1])
            merged = attrs.evolve(current, nodes=pro.nodes + current.nodes,
                                  inputs=(pro.inputs[0],) + current.inputs[1:] + extra, prologue=pro.program,
                                  attrs=current.attrs if channel is None else {**current.attrs,
                                                                               "prologue_channel": channel})
            fused = [merged if x is current else x for x in fused if x is not pro]
            current = merged
        users = by_name[current.output].users
        epi = next((e for e in fused if e.kind == "pointwise" and e.inputs == (current.output,) and
                    len(users) == 1 and next(iter(users)).name in e.nodes), None)
        if epi is not None:
            merged = attrs.evolve(current, nodes=current.nodes + epi.nodes, output=epi.output, epilogue=epi.program)
            fused = [merged if x is current else x for x in fused if x is not epi]
    return fused


def _channel_dim(by_name: dict[str, Any], name: Any, shape: tuple[int, ...]) -> int | None:
    """The dim of ``shape`` along which the tensor ``name`` (broadcast to ``shape``) varies,
    where it varies along one dim only and holds exactly that dim's values; else None."""
    if not isinstance(name, str) or name not in by_name:
        return None
    own, _ = _meta(by_name[name])
    if own is None or len(own) > len(shape) or not _broadcasts_to(own, shape):
        return None
    offset = len(shape) - len(own)
    varying = [offset + i for i, size in enumerate(own) if size != 1]
    if len(varying) != 1 or shape[varying[0]] == 1:
        return None
    return varying[0]


#: F.kl_div's term per element, over ("in", 0) = input (log-probabilities) and ("in", 1) =
#: target: target * (log(target) - input), as xlogy so a zero target adds 0; with
#: log_target, exp(target) * (target - input) (the formulas of torch.nn.KLDivLoss's docs)
_KL_TERMS: dict[bool, tuple[Step, ...]] = {
    False: (("xlogy", (("in", 1), ("in", 1)), {}), ("mul", (("in", 1), ("in", 0)), {}),
            ("sub", (("v", 0), ("v", 1)), {})),
    True: (("exp", (("in", 1),), {}), ("sub", (("in", 1), ("in", 0)), {}), ("mul", (("v", 0), ("v", 1)), {})),
}


def _elementwise_loss(n: Any) -> tuple[Any, Any, str, tuple[Step, ...], str] | None:
    """``F.mse_loss``, ``F.l1_loss``, ``F.smooth_l1_loss`` and ``F.huber_loss`` reduced by
    mean or sum: (input, target, reduction, the per-element term over ("in", 0) = input and
    ("in", 1) = target, the loss's name); None for anything else (reduction "none" is a
    pointwise result, the legacy size_average/reduce arguments override reduction)."""
    import torch.nn.functional as F

    diff: Step = ("sub", (("in", 0), ("in", 1)), {})
    if n.target in (F.mse_loss, F.l1_loss, F.smooth_l1_loss):
        if _call_arg(n, 2, "size_average", None) is not None or _call_arg(n, 3, "reduce", None) is not None:
            return None
        reduction = _call_arg(n, 4, "reduction", "mean")
        if n.target is F.mse_loss:
            terms: tuple[Step, ...] = (diff, ("mul", (("v", 0), ("v", 0)), {}))
        elif n.target is F.l1_loss:
            terms = (diff, ("abs", (("v", 0),), {}))
        else:
            beta = _call_arg(n, 5, "beta", 1.0)
            if not isinstance(beta, (int, float)) or beta < 0:
                return None
            # beta 0 is the L1 loss (torch's own special case), without a division by zero
            terms = (diff, ("smooth_l1", (("v", 0),), {"beta": float(beta)}) if beta > 0 else ("abs", (("v", 0),), {}))
    elif n.target is F.huber_loss:
        reduction = _call_arg(n, 2, "reduction", "mean")
        delta = _call_arg(n, 3, "delta", 1.0)
        if not isinstance(delta, (int, float)) or delta <= 0:
            return None
        terms = (diff, ("huber", (("v", 0),), {"delta": float(delta)}))
    else:
        return None
    if reduction not in ("mean", "sum"):
        return None
    name = getattr(n.target, "__name__", "loss")
    return _call_arg(n, 0, "input", None), _call_arg(n, 1, "target", None), reduction, terms, name


def _call_arg(node: Any, index: int, name: str, default: Any) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _whole_tensor_reductions(order: list[Any], info: dict[str, OpInfo], regions: list[Region],
                             by_name: dict[str, Any]) -> list[Region]:
    """``x.sum()`` / ``x.mean()`` over every element as a ``reduce_all`` region, with the
    pointwise region that only feeds it folded in (its tensors broadcast to its shape):
    e.g. a hinge loss ``mean(clamp(1 - p * t, min=0))`` is one pass over p and t."""
    out = list(regions)
    for n in order:
        oi = info[n.name]
        if oi.kind != "reduce" or not oi.attrs.get("all") or not hasattr(oi.inputs[0], "meta"):
            continue
        x = oi.inputs[0]
        (shape, dtype), (_, out_dtype) = _meta(x), _meta(n)
        if not shape or dtype not in ("float32", "float16", "bfloat16") or out_dtype != dtype:
            continue
        inputs: tuple[Any, ...] = (x.name,)
        program: tuple[Any, ...] = (("identity", (("in", 0),), {}),)
        nodes: tuple[str, ...] = (n.name,)
        pro = next((p for p in out if p.kind == "pointwise" and p.output == x.name and not p.epilogue_of and
                    len(x.users) == 1 and all(_meta(by_name[i])[0] is not None and
                                              _broadcasts_to(_meta(by_name[i])[0] or (), shape) for i in p.inputs)),
                   None)
        if pro is not None:
            inputs, program, nodes = pro.inputs, pro.program, pro.nodes + nodes
            out.remove(pro)
        out.append(Region(kind="reduce_all", op=oi.op, nodes=nodes, output=n.name, inputs=inputs, shape=shape,
                          attrs={"reduction": oi.op, "dtype": dtype}, program=program))
    return out


def _cross_entropy_regions(gm: Any, order: list[Any]) -> list[Region]:
    """Cross-entropy (``F.cross_entropy`` or ``nn.CrossEntropyLoss``) of float logits
    (N, C) against int64 class indices (N,), without class weights or label smoothing,
    reduced by mean or sum: an ``xent`` region (inputs: logits, targets)."""
    import torch.nn as nn
    import torch.nn.functional as F

    found = []
    modules = dict(gm.named_modules())
    for n in order:
        if n.op == "call_function" and n.target is F.cross_entropy:
            x, t = _call_arg(n, 0, "input", None), _call_arg(n, 1, "target", None)
            weight, ignore = _call_arg(n, 2, "weight", None), _call_arg(n, 4, "ignore_index", -100)
            legacy = _call_arg(n, 3, "size_average", None) is not None or _call_arg(n, 5, "reduce", None) is not None
            reduction, smoothing = _call_arg(n, 6, "reduction", "mean"), _call_arg(n, 7, "label_smoothing", 0.0)
        elif n.op == "call_module" and isinstance(modules.get(n.target), nn.CrossEntropyLoss):
            mod = modules[n.target]
            x, t = _call_arg(n, 0, "input", None), _call_arg(n, 1, "target", None)
            weight, ignore, legacy = mod.weight, mod.ignore_index, False
            reduction, smoothing = mod.reduction, mod.label_smoothing
        else:
            continue
        if weight is not None or legacy or smoothing != 0.0 or reduction not in ("mean", "sum") or \
                not isinstance(ignore, int) or not all(hasattr(v, "meta") for v in (x, t)):
            continue
        (shape, dtype), (tshape, tdtype) = _meta(x), _meta(t)
        if shape is None or len(shape) != 2 or tshape != shape[:1] or tdtype != "int64" or \
                dtype not in ("float32", "float16", "bfloat16"):
            continue
        found.append(Region(kind="xent", op="cross_entropy", nodes=(n.name,), output=n.name, inputs=(x.name, t.name),
                            shape=shape, attrs={"reduction": reduction, "ignore_index": ignore, "dtype": dtype}))
    return found


def _row_pair_regions(gm: Any, order: list[Any]) -> list[Region]:
    """``F.cosine_similarity`` over the last dim of two (N, D) inputs of one shape, and the
    triplet margin loss (``nn.TripletMarginLoss`` / ``F.triplet_margin_loss``, p = 2, no
    swap, reduction mean or sum) of three: ``rowpair`` regions."""
    import torch.nn as nn
    import torch.nn.functional as F

    found = []
    modules = dict(gm.named_modules())
    for n in order:
        if n.op == "call_function" and n.target is F.cosine_similarity:
            xs: tuple[Any, ...] = (_call_arg(n, 0, "x1", None), _call_arg(n, 1, "x2", None))
            dim, eps = _call_arg(n, 2, "dim", 1), _call_arg(n, 3, "eps", 1e-8)
            op, attrs_ = "cosine_similarity", {"eps": eps, "margin": 0.0, "dim": dim}
        elif (n.op == "call_function" and n.target is F.triplet_margin_loss) or \
                (n.op == "call_module" and type(modules.get(n.target)) is nn.TripletMarginLoss):
            xs = (_call_arg(n, 0, "anchor", None), _call_arg(n, 1, "positive", None), _call_arg(n, 2, "negative", None))
            if n.op == "call_module":
                mod = modules[n.target]
                margin, p, eps, swap, reduction = mod.margin, mod.p, mod.eps, mod.swap, mod.reduction
                legacy = False
            else:
                margin, p, eps = _call_arg(n, 3, "margin", 1.0), _call_arg(n, 4, "p", 2), _call_arg(n, 5, "eps", 1e-6)
                swap, reduction = _call_arg(n, 6, "swap", False), _call_arg(n, 9, "reduction", "mean")
                legacy = _call_arg(n, 7, "size_average", None) is not None or \
                    _call_arg(n, 8, "reduce", None) is not None
            if p != 2 or swap or legacy or reduction not in ("mean", "sum"):
                continue
            op, attrs_ = "triplet_margin", {"eps": eps, "margin": margin, "reduction": reduction, "dim": 1}
        else:
            continue
        if not all(hasattr(v, "meta") for v in xs) or not all(isinstance(attrs_[k], (int, float))
                                                             for k in ("eps", "margin")):
            continue
        metas = [_meta(v) for v in xs]
        shape, dtype = metas[0]
        if shape is None or len(shape) != 2 or any(m != metas[0] for m in metas) or \
                dtype not in ("float32", "float16", "bfloat16") or not isinstance(attrs_["dim"], int) or \
                attrs_["dim"] % 2 != 1:
            continue
        attrs_.update(eps=float(attrs_["eps"]), margin=float(attrs_["margin"]), dim=1)
        found.append(Region(kind="rowpair", op=op, nodes=(n.name,), output=n.name, inputs=tuple(v.name for v in xs),
                            shape=shape, attrs=attrs_))
    return found


def _attention_regions(order: list[Any]) -> list[Region]:
    """``F.scaled_dot_product_attention`` without a mask tensor, dropout or grouped-query
    heads (causal or not, any scale) over query (*B, L, E), key (*B, S, E), value
    (*B, S, Ev) of one float dtype: an ``attention`` region."""
    import torch.nn.functional as F

    found = []
    for n in order:
        if n.op != "call_function" or n.target is not F.scaled_dot_product_attention:
            continue
        q, k, v = (_call_arg(n, i, name, None) for i, name in enumerate(("query", "key", "value")))
        mask, dropout = _call_arg(n, 3, "attn_mask", None), _call_arg(n, 4, "dropout_p", 0.0)
        causal, scale = _call_arg(n, 5, "is_causal", False), _call_arg(n, 6, "scale", None)
        gqa = _call_arg(n, 7, "enable_gqa", False)
        if mask is not None or dropout != 0.0 or gqa is not False or not isinstance(causal, bool) or \
                not (scale is None or isinstance(scale, (int, float))) or \
                not all(hasattr(t, "meta") for t in (q, k, v)):
            continue
        (qs, qd), (ks, kd), (vs, vd) = _meta(q), _meta(k), _meta(v)
        if qs is None or ks is None or vs is None or not (len(qs) == len(ks) == len(vs) >= 3) or \
                qs[:-2] != ks[:-2] or ks[:-2] != vs[:-2] or ks[-2] != vs[-2] or qs[-1] != ks[-1] or \
                not (qd == kd == vd) or qd not in ("float32", "float16", "bfloat16") or \
                math.prod(qs[:-2]) > 65535 or max(qs[-1], vs[-1]) > 256:
            continue  # the batch x heads is the grid's second axis; head dims past 256 stay in the library
        found.append(Region(kind="attention", op="sdpa", nodes=(n.name,), output=n.name,
                            inputs=(q.name, k.name, v.name), shape=qs,
                            attrs={"causal": causal, "scale": None if scale is None else float(scale), "dtype": qd,
                                   "s": ks[-2]}))
    return found


def _full_reduction_regions(order: list[Any], regions: list[Region], by_name: dict[str, Any]) -> list[Region]:
    """Losses that reduce every element to one value: ``F.kl_div`` (reduction sum, mean or
    batchmean) becomes a ``reduce_all`` region, and a pointwise region that only feeds it
    and reads tensors of its full shape (the ``log`` of ``kl_div(log(p), q)``) is folded
    in, so the whole loss is one pass over its inputs."""
    import torch.nn.functional as F

    out = list(regions)
    for n in order:
        if n.op != "call_function":
            continue
        if n.target is F.kl_div:
            inp, tgt = _call_arg(n, 0, "input", None), _call_arg(n, 1, "target", None)
            reduction = _call_arg(n, 4, "reduction", "mean")
            log_target = _call_arg(n, 5, "log_target", False)
            if _call_arg(n, 2, "size_average", None) is not None or _call_arg(n, 3, "reduce", None) is not None:
                continue  # the legacy arguments override reduction
            if reduction not in ("sum", "mean", "batchmean") or not isinstance(log_target, bool):
                continue
            terms, op = _KL_TERMS[log_target], "kl_div"
        else:
            loss = _elementwise_loss(n)
            if loss is None:
                continue
            inp, tgt, reduction, terms, op = loss
        if not all(hasattr(v, "meta") for v in (inp, tgt)):
            continue
        (shape, dtype), (tshape, tdtype) = _meta(inp), _meta(tgt)
        if shape is None or shape != tshape or dtype != tdtype or \
                dtype not in ("float32", "float16", "bfloat16") or not shape:
            continue
        inputs: list[Any] = []
        steps: list[Any] = []
        operand_of: dict[Any, tuple[str, int]] = {}
        nodes: list[str] = []

        def slot(value: Any) -> tuple[str, int]:
            if value not in inputs:
                inputs.append(value)
            return ("in", inputs.index(value))

        for value in dict.fromkeys((inp.name, tgt.name)):
            pro = next((r for r in out if r.kind == "pointwise" and r.output == value and not r.epilogue_of and
                        len(by_name[value].users) == 1 and
                        all(not isinstance(i, Param) and _meta(by_name[i])[0] == shape for i in r.inputs)), None)
            if pro is None:
                operand_of[value] = slot(value)
                continue
            steps.extend(_remap(pro.program, pro.inputs, {i: slot(i) for i in pro.inputs}, shift=len(steps)))
            operand_of[value] = ("v", len(steps) - 1)
            nodes.extend(pro.nodes)
            out.remove(pro)
        steps.extend(_remap(terms, (inp.name, tgt.name), operand_of, shift=len(steps)))
        out.append(Region(kind="reduce_all", op=op, nodes=tuple(nodes) + (n.name,), output=n.name,
                          inputs=tuple(inputs), shape=shape, attrs={"reduction": reduction, "dtype": dtype},
                          program=tuple(steps)))
    return out


def _remap(program: Any, inputs: tuple[Any, ...], operand_of: dict[Any, tuple[str, int]],
           shift: int = 0) -> tuple[Any, ...]:
    """A pointwise program moved into another kernel: operand ("in", i) reading
    ``inputs[i]`` becomes ``operand_of[inputs[i]]`` (that kernel's input or an earlier
    value); ("v", j) becomes ("v", j + shift) behind ``shift`` steps placed before it."""
    out = []
    for op, operands, attrs_ in program:
        ops = []
        for kind, value in operands:
            if kind == "in":
                ops.append(operand_of[inputs[value]])
            elif kind == "v":
                ops.append(("v", value + shift))
            else:
                ops.append((kind, value))
        out.append((op, tuple(ops), attrs_))
    return tuple(out)


def _only_user_region(node: Any, region: Region) -> bool:
    return bool(node.users) and all(u.name in region.nodes for u in node.users)


def _pool_regions(order: list[Any], info: dict[str, OpInfo], regions: list[Region],
                  by_name: dict[str, Any]) -> list[Region]:
    """Max/avg pooling regions, each fusing the pointwise region that only feeds it
    (prologue: applied to every loaded element; its other tensor inputs broadcast to the
    pool's input) and the one that only reads its result (epilogue)."""
    out = list(regions)
    for n in order:
        oi = info[n.name]
        if oi.kind != "pool" or "kernel" not in oi.attrs or not hasattr(oi.inputs[0], "meta"):
            continue
        if oi.op == "depthwise_conv" and len(_meta(oi.inputs[0])[0] or ()) != oi.attrs["rank"] + 2:
            continue  # an unbatched input (C, *spatial): left to the library
        x = oi.inputs[0]
        in_shape, in_dtype = _meta(x)
        out_shape, _ = _meta(n)
        rank = oi.attrs["rank"]
        if in_shape is None or out_shape is None or len(in_shape) not in (rank + 1, rank + 2) or \
                in_dtype not in ("float32", "float16", "bfloat16", "float64"):
            continue
        main, pro_extra, prologue, nodes = x.name, [], (), (n.name,)
        pro = next((p for p in out if p.kind == "pointwise" and p.output == x.name and len(x.users) == 1
                    and p.shape == in_shape and not p.attrs.get("scalars")), None)
        if pro is not None:
            full = [i for i in pro.inputs if _meta(by_name[i])[0] == in_shape]
            if full:
                main = full[0]
                pro_extra = [i for i in pro.inputs if i != main]
                prologue = _remap(pro.program, pro.inputs, {r: ("in", k) for k, r in enumerate([main] + pro_extra)})
                nodes = pro.nodes + nodes
                out.remove(pro)
        epi = next((e for e in out if e.kind == "pointwise" and n.name in e.inputs and e.shape == out_shape
                    and _only_user_region(n, e) and not e.attrs.get("scalars")), None)
        epi_extra, epilogue, output = [], (), n.name
        if epi is not None:
            epi_extra = [i for i in epi.inputs if i != n.name]
            epilogue = _remap(epi.program, epi.inputs, {r: ("in", k) for k, r in enumerate([n.name] + epi_extra)})
            nodes, output = nodes + epi.nodes, epi.output
            out.remove(epi)
        attrs_ = {k: v for k, v in oi.attrs.items()}
        # a depthwise convolution's weight (and bias) come right after the input
        params = tuple(i for i in oi.inputs[1:] if i is not None)
        attrs_.update(n_pro=len(pro_extra), n_epi=len(epi_extra), out_shape=out_shape, n_par=len(params))
        out.append(Region(kind="pool", op=oi.op, nodes=nodes, output=output,
                          inputs=(main, *params, *pro_extra, *epi_extra), shape=in_shape, attrs=attrs_,
                          prologue=prologue, epilogue=epilogue))
    return out


# pointwise steps that commute with a sum: multiplying or dividing by a constant, negating
_HOMOGENEOUS = {"mul": ("const", 0), "div": ("const", 1), "neg": None}
# pointwise steps a rewritten region applies to its reduced value with Python arithmetic
_ARITHMETIC = {"add", "sub", "rsub", "mul", "div", "rdiv", "neg", "square", "identity"}


def _linear_chain(program: Any, homogeneous: bool) -> bool:
    """True when ``program`` is a chain on its one input (step j reads step j - 1) whose
    other operands are constants: homogeneous linear steps only (``homogeneous``), or
    plain arithmetic."""
    for j, (op, operands, _attrs) in enumerate(program):
        prev = ("in", 0) if j == 0 else ("v", j - 1)
        if homogeneous:
            if op not in _HOMOGENEOUS:
                return False
            want = _HOMOGENEOUS[op]
            if want is None:
                if tuple(operands) != (prev,):
                    return False
            elif len(operands) != 2 or operands[want[1]][0] != "const" or operands[1 - want[1]] != prev:
                return False
        else:
            if op not in _ARITHMETIC or not any(tuple(o) == prev for o in operands) or \
                    any(tuple(o) != prev and o[0] != "const" for o in operands):
                return False
    return True


def _gemm_reduce_regions(gm: Any, info: dict[str, OpInfo], regions: list[Region],
                         by_name: dict[str, Any]) -> list[Region]:
    """A sum or mean over the last dim (N) of a library GEMM's fp32 output C = A B (+ bias),
    with only constant scalings between: sum_n C[.., n] = A (sum_n B[:, n]) (+ sum(bias)).
    The region computes the right-hand side, a matrix-vector product, instead of the GEMM
    (an algebraic rewrite: the same value, summed in another order)."""
    found = []
    for r in regions:
        if r.kind != "reduce" or r.op not in ("sum", "mean") or len(r.inputs) != 1 or r.inputs[0] not in info:
            continue
        n = by_name[r.inputs[0]]
        oi = info[n.name]
        if oi.kind != "gemm" or oi.attrs.get("opaque") or len(oi.inputs) != 3:
            continue
        a, b, bias = oi.inputs
        out_shape, out_dtype = _meta(n)
        b_shape, b_dtype = _operand_meta(gm, b)
        if out_shape is None or b_shape is None or out_dtype != "float32" or b_dtype != "float32" or \
                len(b_shape) != 2 or not hasattr(a, "meta"):
            continue
        if r.attrs.get("dim") != len(out_shape) - 1 or r.attrs.get("ndims", 1) != 1:
            continue  # only the sum over N becomes a sum over B's columns
        if not _only_user_region(n, r) or not _linear_chain(r.prologue, True) or \
                not _linear_chain(r.epilogue, False):
            continue
        if bias is not None:
            bias_shape, bias_dtype = _operand_meta(gm, bias)
            if bias_shape != (out_shape[-1],) or bias_dtype != "float32":
                continue
        found.append(Region(kind="gemm_reduce", op=r.op, nodes=(n.name,) + r.nodes, output=r.output,
                            inputs=(_input_ref(a), _input_ref(b), *([_input_ref(bias)] if bias is not None else [])),
                            shape=out_shape,
                            attrs={"trans_b": oi.attrs["trans_b"], "has_bias": bias is not None,
                                   "keepdim": bool(r.attrs.get("keepdim", False)), "n": out_shape[-1],
                                   "dtype": out_dtype},
                            prologue=r.prologue, epilogue=r.epilogue))
    return found


def _operand_meta(gm: Any, value: Any) -> tuple[tuple[int, ...] | None, str | None]:
    if isinstance(value, Param):
        t = gm.get_parameter(value.path) if value.path in dict(gm.named_parameters()) else \
            gm.get_buffer(value.path)
        return tuple(int(s) for s in t.shape), str(t.dtype).replace("torch.", "")
    if hasattr(value, "meta"):
        return _meta(value)
    return None, None


def _gemm_regions(gm: Any, order: list[Any], info: dict[str, OpInfo], regions: list[Region],
                  by_name: dict[str, Any]) -> list[Region]:
    """Triton-GEMM regions: A (.., M, K) times B (K, N), or batched A (*b, M, K) times
    B (*b, K, N) with equal batch dims; float operands of one dtype (fp64 has no tensor-core
    dot); a bias (linear, addmm) and the pointwise region that only reads the product
    become its epilogue."""
    found = []
    absorbed: set[str] = set()  # pointwise regions (by output) already a GEMM's epilogue
    for n in order:
        oi = info[n.name]
        if oi.kind != "gemm" or oi.attrs.get("opaque") or len(oi.inputs) != 3:
            continue
        a, b, bias = oi.inputs
        if not hasattr(a, "meta") or not (isinstance(b, Param) or hasattr(b, "meta")):
            continue
        a_shape, a_dtype = _meta(a)
        b_shape, b_dtype = _operand_meta(gm, b)
        out_shape, out_dtype = _meta(n)
        if a_shape is None or b_shape is None or out_shape is None or a_dtype != b_dtype or a_dtype != out_dtype or \
                a_dtype not in ("float32", "float16", "bfloat16"):
            continue
        if oi.attrs["trans_b"] and len(b_shape) == 2:
            b_shape = (b_shape[1], b_shape[0])
        if len(a_shape) < 2 or len(b_shape) < 2 or a_shape[-1] != b_shape[-2]:
            continue
        if oi.op in ("mm", "addmm") and (len(a_shape), len(b_shape)) != (2, 2):
            continue
        if len(b_shape) > 2 and (len(a_shape) != len(b_shape) or a_shape[:-2] != b_shape[:-2]):
            continue  # broadcast batch dims: left to the library
        if len(b_shape) > 2 and math.prod(a_shape[:-2]) > 65535:
            continue  # the batch is the grid's second axis (at most 65535 programs)
        program: tuple[Any, ...] = ()  # over the operands acc ("in", 0), then the extra inputs
        if bias is not None:
            b_sh, b_dt = _operand_meta(gm, bias)
            if b_sh is None or b_dt not in ("float32", "float16", "bfloat16") or not _broadcasts_to(b_sh, out_shape):
                continue
            program = (("add", (("in", 0), ("in", 1)), {}),)
        extra_refs = [_input_ref(bias)] if bias is not None else []
        nodes, output = (n.name,), n.name
        epi = next((e for e in regions if e.kind == "pointwise" and n.name in e.inputs and e.shape == out_shape
                    and _only_user_region(n, e) and e.output not in absorbed and not e.attrs.get("scalars")), None)
        if epi is not None:
            absorbed.add(epi.output)  # relu(a @ w1 + a @ w2): the second product is an input of the first's epilogue
            others = [i for i in epi.inputs if i != n.name]
            # the epilogue reads the product (with a bias: the bias step's value v0)
            operand_of = {n.name: ("v", 0) if program else ("in", 0)}
            operand_of.update({r: ("in", len(extra_refs) + 1 + k) for k, r in enumerate(others)})
            program = program + _remap(epi.program, epi.inputs, operand_of, shift=len(program))
            extra_refs += others
            nodes, output = nodes + epi.nodes, epi.output
        found.append(Region(kind="gemm", op=oi.op, nodes=nodes, output=output,
                            inputs=(_input_ref(a), _input_ref(b), *extra_refs), shape=out_shape,
                            attrs={"trans_b": oi.attrs["trans_b"], "dtype": a_dtype, "has_bias": bias is not None,
                                   "n_extra": len(extra_refs), "m": math.prod(a_shape[:-1]) if len(b_shape) == 2
                                   else a_shape[-2], "n": b_shape[-1], "k": a_shape[-1],
                                   "batch": 1 if len(b_shape) == 2 else math.prod(a_shape[:-2])},
                            epilogue=program))
    return found


def _conv_regions(gm: Any, order: list[Any], info: dict[str, OpInfo]) -> list[Region]:
    """Dense 1-D/2-D convolutions as implicit GEMMs (rows: the output positions of every
    image, columns: the output channels, K: in-channels x kernel taps); batched float input
    and weight of one dtype. Only the convolution and its bias: the pointwise regions after
    it keep their own kernels."""
    found = []
    for n in order:
        oi = info[n.name]
        if oi.kind != "conv" or not oi.attrs.get("dense") or not hasattr(oi.inputs[0], "meta"):
            continue
        x, w, bias = oi.inputs
        rank = oi.attrs["rank"]
        x_shape, x_dtype = _meta(x)
        w_shape, w_dtype = _operand_meta(gm, w)
        out_shape, out_dtype = _meta(n)
        if x_shape is None or w_shape is None or out_shape is None or len(x_shape) != rank + 2 or len(out_shape) != rank + 2 or \
                x_dtype not in ("float32", "float16", "bfloat16") or w_dtype != x_dtype or out_dtype != x_dtype:
            continue
        if bias is not None and _operand_meta(gm, bias)[1] != x_dtype:
            continue
        attrs = {k: v for k, v in oi.attrs.items() if k != "dense"}
        groups = oi.attrs.get("groups", 1)  # the GEMM of one group: its channels
        attrs.update(dtype=x_dtype, m=out_shape[0] * math.prod(out_shape[2:]), n=out_shape[1] // groups,
                     k=x_shape[1] // groups * math.prod(oi.attrs["kernel"]))
        found.append(Region(kind="conv", op=oi.op, nodes=(n.name,), output=n.name,
                            inputs=(_input_ref(x), _input_ref(w), *([_input_ref(bias)] if bias is not None else [])),
                            shape=out_shape, attrs=attrs))
    return found
