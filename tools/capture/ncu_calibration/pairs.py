#!/usr/bin/env python3
"""Kernel pairs that calibrate the micro-profilers' estimated gains against real rewrites.

Each pair is a "before" kernel with a flaw one of our findings names, and an "after" that
carries out that finding's action and computes the same result (``acts_on``: the
micro-profilers whose action the rewrite is). Most pairs are the CUDA kernels of
``pairs.cu`` (built into a shared library, launched through ctypes on PyTorch's stream);
four are real rewrites of operations: cuBLAS in TF32 for a scalar FP32 GEMM, and, for three
PyTorch kernels, the Triton kernel that torch.compile or the expert generator writes for the
same operation.

    python3 pairs.py list
    python3 pairs.py time --lib libkpc_pairs.so --out timings.json   # no profiler
    python3 pairs.py run --lib libkpc_pairs.so                       # under ncu (capture.py)
    python3 pairs.py time --set corpus --out timings.json            # the rewrites of corpus kernels

``--set corpus`` takes the rewrites of corpus kernels instead (``corpus_rewrites/``: PyTorch's
kernel of a corpus workload against a Triton kernel carrying out one of our findings' action);
``--set corpus2`` the second round of them (modules with ``ROUND = 2``), ``--set corpus3`` the third
(``ROUND = 3``), ``--set corpus4`` the fourth (``ROUND = 4``).

``time`` checks that before and after agree, then times them alternately (CUDA events
around single calls, the L2 flushed and the GPU kept busy for about 1 ms before each, so
that no launch time falls between the events; median); ``run`` calls each variant once
inside an NVTX range ``<pair>:<before|after>`` between ``cudaProfilerStart`` and
``cudaProfilerStop``, after warm-up calls.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import attrs

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
M = 1 << 20


@attrs.frozen
class Pair:
    name: str
    acts_on: tuple[str, ...]  # micro-profilers whose action the "after" carries out
    action: str
    inputs: Callable[..., list]  # (torch, device="cuda") -> the inputs
    before: Callable[..., Any]  # (lib, torch, *inputs) -> output
    after: Callable[..., Any]
    rtol: float = 1e-5
    atol: float = 1e-5
    #: elements of the output, from the inputs (default: as many as the first input)
    output_numel: Callable[[list], int] = lambda xs: xs[0].numel()


def _stream(torch) -> ctypes.c_void_p:
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _ptr(t) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def _call(lib, fn: str, torch, *args) -> None:
    """``fn(*args, stream)``; every argument is already a ctypes value of the C type."""
    rc = getattr(lib, fn)(*args, _stream(torch))
    if rc != 0:
        raise RuntimeError(f"{fn}: CUDA error {rc}")


def _sms(torch) -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def _unary(fn: str, *extra: Callable[[Any], int]):
    """A launcher ``fn(x, y, n, *extra, stream)`` on a new output like x; ``extra`` are
    functions of torch (constants or the SM count)."""
    def go(lib, torch, x):
        y = torch.empty_like(x)
        _call(lib, fn, torch, _ptr(x), _ptr(y), ctypes.c_long(x.numel()), *[ctypes.c_int(e(torch)) for e in extra])
        return y
    return go


def _const(v: int) -> Callable[[Any], int]:
    return lambda torch: v


def _transpose_walk(lib, torch, x):
    y = torch.empty_like(x)
    _call(lib, "kpc_transpose_walk_run", torch, _ptr(x), _ptr(y), ctypes.c_int(x.shape[0]))
    return y


def _transpose_tile(padded: int):
    def go(lib, torch, x):
        y = torch.empty_like(x)
        _call(lib, "kpc_transpose_tile_run", torch, _ptr(x), _ptr(y), ctypes.c_int(x.shape[0]), ctypes.c_int(padded))
        return y
    return go


def _gemm_ffma(lib, torch, a, b):
    c = torch.empty(a.shape[0], b.shape[1], device=a.device)
    _call(lib, "kpc_gemm_ffma_run", torch, _ptr(a), _ptr(b), _ptr(c), ctypes.c_int(a.shape[0]),
          ctypes.c_int(b.shape[1]), ctypes.c_int(a.shape[1]))
    return c


def _gemm_tf32(lib, torch, a, b):
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


UNIT_STEPS = 2000


def _units(dealt: int):
    """1024-element units, each a long FMA chain per element. Before: two blocks per SM make
    a wave; the grid is one wave plus 8 blocks, each block a fixed run of 8 units. After: the
    same units dealt round-robin over exactly one wave."""
    def go(lib, torch, x):
        y = torch.empty_like(x)
        units = x.numel() // 1024
        wave = 2 * _sms(torch)
        blocks = wave if dealt else units // 8
        _call(lib, "kpc_units_run", torch, _ptr(x), _ptr(y), ctypes.c_int(units), ctypes.c_int(blocks),
              ctypes.c_int(8), ctypes.c_int(UNIT_STEPS), ctypes.c_int(dealt))
        return y
    return go


def _units_inputs(torch, device="cuda", sms=None):
    wave = 2 * (sms or _sms(torch))
    return [torch.randn((wave + 8) * 8 * 1024, device=device)]


def _staged(smem_bytes: int):
    def go(lib, torch, x):
        y = torch.empty_like(x)
        _call(lib, "kpc_staged_run", torch, _ptr(x), _ptr(y), ctypes.c_long(x.numel()),
              ctypes.c_int(4 * _sms(torch)), ctypes.c_int(smem_bytes))
        return y
    return go


def _eager_softmax(lib, torch, x):
    return torch.softmax(x, dim=-1)


def _layer_norm(lib, torch, x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)


def _broadcast_add(lib, torch, x, b):
    return x + b[None, :]


_COMPILED: dict[str, Any] = {}


def _compiled(name: str, fn: Callable[..., Any]):
    """torch.compile (default mode) of ``fn``; compiled once per process."""
    def go(lib, torch, *xs):
        if name not in _COMPILED:
            _COMPILED[name] = torch.compile(lambda *a: fn(None, torch, *a))
        return _COMPILED[name](*xs)
    return go


_TEMPLATE: dict[str, Any] = {}
SOFTMAX_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4096, 16384)]


def get_init_inputs():
    return []
'''


def _template_softmax(lib, torch, x):
    """The expert generator's row-softmax kernel (its default tile) for the same problem."""
    if "softmax" not in _TEMPLATE:
        import tempfile

        from kernelpro.evaluate.loader import load_module
        from kernelpro_plugins_expert.recognize import recognize
        from kernelpro_plugins_expert.render import default_params, render_candidate

        rec = recognize(SOFTMAX_PROBLEM)
        params = default_params(rec)
        if not params.get("lower"):
            raise RuntimeError("the expert generator recognizes no kernel region in the softmax problem")
        text = render_candidate(SOFTMAX_PROBLEM, rec, params)
        path = Path(tempfile.mkdtemp(prefix="kpc_tpl_")) / "softmax_candidate.py"
        path.write_text(text)
        _TEMPLATE["softmax"] = load_module(path, "kpc_tpl_softmax").ModelNew().cuda()
    return _TEMPLATE["softmax"](x)


def _randn(*shape):
    return lambda torch, device="cuda": [torch.randn(*shape, device=device)]


PAIRS: dict[str, Pair] = {p.name: p for p in (
    Pair("transpose_uncoalesced", ("uncoalesced_global",),
         "read rows into a padded shared tile so that loads and stores both walk rows",
         _randn(8192, 8192), _transpose_walk, _transpose_tile(1), 0.0, 0.0),
    Pair("transpose_bank_conflicts", ("shared_bank_conflicts",),
         "pad the shared tile by one column so a column read hits 32 banks",
         _randn(8192, 8192), _transpose_tile(0), _transpose_tile(1), 0.0, 0.0),
    Pair("fma", ("unfused_fp32",), "fuse each multiply and add into one FFMA",
         _randn(4 * M), _unary("kpc_decay_run", _const(256), _const(0)),
         _unary("kpc_decay_run", _const(256), _const(1)), 1e-4, 1e-5),
    Pair("gemm_tensor_cores", ("tensor_cores_idle",), "run the GEMM on tensor cores (cuBLAS, TF32)",
         lambda torch, device="cuda": [torch.randn(4096, 4096, device=device),
                                       torch.randn(4096, 4096, device=device)],
         _gemm_ffma, _gemm_tf32, 2e-2, 0.5, lambda xs: xs[0].shape[0] * xs[1].shape[1]),
    Pair("grid_too_small", ("small_grid",), "launch enough blocks to fill every SM",
         _randn(16 * M), _unary("kpc_affine_run", _const(4), _const(128)),
         _unary("kpc_affine_run", lambda torch: 8 * _sms(torch), _const(256)), 0.0, 0.0),
    Pair("tail_wave", ("tail_effect",), "deal the work units over exactly one wave of blocks",
         _units_inputs, _units(0), _units(1), 0.0, 0.0),
    Pair("shared_memory_occupancy", ("occupancy_limiter",),
         "shrink the dynamic shared memory so that more blocks fit on an SM",
         _randn(64 * M), _staged(200 * 1024), _staged(128 * 4), 0.0, 0.0),
    Pair("local_memory", ("local_memory",),
         "index the per-thread array with compile-time constants and lift the register cap",
         _randn(4 * M), _unary("kpc_mix_run", _const(0)), _unary("kpc_mix_run", _const(1)), 1e-5, 1e-5),
    Pair("idle_warps", ("occupancy_gap", "issue_slots", "warp_stalls"),
         "give every warp of the block work (a grid of 256-thread blocks that all compute)",
         _randn(4 * M), _unary("kpc_chain_run", _const(512), _const(0)),
         _unary("kpc_chain_run", _const(512), _const(1)), 0.0, 0.0),
    Pair("reuse_far_apart", ("cache_hit_rate", "dram_excess"),
         "compute the outputs that share their inputs together, so each input is read once",
         _randn(64 * M), _unary("kpc_ring_run", _const(0)), _unary("kpc_ring_run", _const(1)), 1e-5, 1e-5),
    Pair("bytes_in_flight", ("warp_stalls", "issue_slots"),
         "load float4, two per thread per loop iteration, over a grid of 8 blocks per SM",
         _randn(64 * M), _unary("kpc_bias_relu_run", _const(0)),
         _unary("kpc_bias_relu_run", lambda torch: 8 * _sms(torch)), 0.0, 0.0),
    Pair("broadcast_add_eager", ("warp_stalls", "issue_slots", "uncoalesced_global"),
         "torch.compile's Triton kernel for the same broadcast add (vectorized, more bytes in flight)",
         lambda torch, device="cuda": [torch.randn(8192, 4096, device=device), torch.randn(4096, device=device)],
         _broadcast_add, _compiled("broadcast_add", _broadcast_add), 1e-6, 1e-6),
    Pair("layer_norm_eager", ("warp_stalls", "issue_slots", "uncoalesced_global"),
         "torch.compile's Triton kernel for the same layer norm",
         lambda torch, device="cuda": [torch.randn(16384, 4096, device=device), torch.randn(4096, device=device),
                                       torch.randn(4096, device=device)],
         _layer_norm, _compiled("layer_norm", _layer_norm), 1e-4, 1e-4),
    Pair("softmax_eager", ("warp_stalls", "issue_slots"),
         "the expert generator's row-softmax kernel for the same softmax",
         _randn(4096, 16384), _eager_softmax, _template_softmax, 1e-4, 1e-6),
)}


def corpus_pairs(round_: int = 1) -> dict[str, Pair]:
    """The rewrites of corpus kernels (``corpus_rewrites/``) of one round (a module's ``ROUND``,
    1 where it has none), one pair each at the corpus workload's size: before is the PyTorch
    operation, after the Triton rewrite."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import corpus_rewrites

    out: dict[str, Pair] = {}
    for name in corpus_rewrites.names():
        mod = corpus_rewrites.load(name)
        if getattr(mod, "ROUND", 1) != round_:
            continue

        def inputs(torch, device="cuda", mod=mod):
            return mod.inputs(torch, device, *mod.SIZES["large"])

        def output_numel(xs, mod=mod) -> int:
            import torch

            try:  # the operation on the meta device: its output's size without computing it
                out = mod.before(torch, *[torch.empty_like(x, device="meta") for x in xs])
                out = out[0] if isinstance(out, (tuple, list)) else out
                return int(out.numel() * out.element_size() // 4)
            except (NotImplementedError, RuntimeError):
                return xs[0].numel()

        out[name] = Pair(name, tuple(mod.ACTS_ON), mod.ACTION, inputs,
                         lambda lib, torch, *xs, mod=mod: mod.before(torch, *xs),
                         lambda lib, torch, *xs, mod=mod: mod.after(torch, *xs),
                         float(mod.RTOL), float(mod.ATOL), output_numel)
    return out


#: the sets ``--set`` picks: the calibration pairs above, or the rewrites of corpus kernels of
#: the first round (measured in session 30), the second (written after the first was scored
#: and the estimators adjusted to it: their out-of-sample check), the third (other operator
#: families: normalization, log-softmax, gathers, fold, search, grid sampling) or the fourth
#: (pairwise distances, replication padding, nearest and trilinear upsampling of corpus v7, and the
#: k-th value selection of v4)
SETS: dict[str, Callable[[], dict[str, Pair]]] = {"calibration": lambda: PAIRS, "corpus": corpus_pairs,
                                                   "corpus2": lambda: corpus_pairs(2),
                                                   "corpus3": lambda: corpus_pairs(3),
                                                   "corpus4": lambda: corpus_pairs(4)}


def io_bytes(pair: Pair, sms: int) -> dict[str, float]:
    """The pair's input and output bytes (fp32), as the evaluator records a forward's, worked
    out on the meta device (``sms``: the GPU's SM count, which sizes ``tail_wave``)."""
    import torch

    xs = _units_inputs(torch, "meta", sms) if pair.inputs is _units_inputs else pair.inputs(torch, "meta")
    return {"input_bytes": float(sum(x.numel() * x.element_size() for x in xs)), "param_bytes": 0.0,
            "output_bytes": float(pair.output_numel(xs) * 4)}


def load_lib(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    for name in ("kpc_transpose_walk_run", "kpc_transpose_tile_run", "kpc_decay_run", "kpc_gemm_ffma_run",
                 "kpc_affine_run", "kpc_units_run", "kpc_staged_run", "kpc_mix_run", "kpc_chain_run",
                 "kpc_ring_run", "kpc_bias_relu_run"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _flusher(torch) -> Callable[[], None]:
    junk = torch.empty(256 * M // 4, device="cuda")

    def flush() -> None:
        junk.zero_()
    return flush


#: about 1 ms of GPU spinning before each timed call (more than any launch's CPU time here)
SLEEP_CYCLES = 2_000_000


def time_pairs(lib, names: list[str], reps: int, pairs: dict[str, Pair] | None = None,
               on_pair: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Each pair's times (see the module's docstring); ``on_pair`` gets the results so far
    after each pair."""
    import torch

    torch.manual_seed(0)
    flush = _flusher(torch)
    out: dict[str, Any] = {}
    for name in names:
        pair = (pairs or PAIRS)[name]
        try:
            with torch.no_grad():
                xs = pair.inputs(torch)
                ref, new = pair.before(lib, torch, *xs), pair.after(lib, torch, *xs)
                torch.cuda.synchronize()
                err, agree = _compare(torch, ref, new, pair.rtol, pair.atol)
                for _ in range(3):
                    pair.before(lib, torch, *xs)
                    pair.after(lib, torch, *xs)
                times: dict[str, list[float]] = {"before": [], "after": []}
                for _ in range(reps):  # alternate, so that drift falls on both alike
                    for side in ("before", "after"):
                        fn = pair.before if side == "before" else pair.after
                        flush()
                        # keep the GPU busy while the start event and the call are enqueued, so
                        # that the launch's CPU time (large for torch.compile's wrapper) is not timed
                        torch.cuda._sleep(SLEEP_CYCLES)
                        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        start.record()
                        fn(lib, torch, *xs)
                        end.record()
                        end.synchronize()
                        times[side].append(start.elapsed_time(end))
            b, a = statistics.median(times["before"]), statistics.median(times["after"])
            out[name] = {"before_ms": b, "after_ms": a, "realized_gain": 1.0 - a / b, "agree": agree,
                         "max_abs_err": err, "before_ms_iqr": _iqr(times["before"]),
                         "after_ms_iqr": _iqr(times["after"]), "reps": reps}
        except Exception as exc:  # recorded; the next pair still runs
            traceback.print_exc(limit=3)
            out[name] = {"error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
        print(json.dumps({name: out[name]}), flush=True)
        if on_pair is not None:
            on_pair(out)
        torch.cuda.empty_cache()
    return out


def _compare(torch, ref, new, rtol: float, atol: float) -> tuple[float, bool]:
    """Largest absolute difference and agreement of two outputs, by the evaluator's own
    comparison (``kernelpro.evaluate.compare``): several outputs (``torch.cummax``'s values and
    indices) output by output, shapes and dtypes matching, integers exactly, NaN where the
    reference has NaN. The difference is ``inf`` where a disagreement has none to give (a
    missing output, another dtype, integers that differ)."""
    from kernelpro.evaluate.compare import compare

    c = compare(new, ref, {"float32": (atol, rtol)})  # every floating dtype falls back to it
    return (c.max_abs_err if c.ok or c.max_abs_err > 0 else math.inf), c.ok


def _iqr(xs: list[float]) -> float:
    q = statistics.quantiles(xs, n=4)
    return q[2] - q[0]


def profile_pairs(lib, names: list[str], pairs: dict[str, Pair] | None = None) -> int:
    import torch

    torch.manual_seed(0)
    ok = 0
    for name in names:
        pair = (pairs or PAIRS)[name]
        for side in ("before", "after"):
            fn = pair.before if side == "before" else pair.after
            try:
                with torch.no_grad():
                    xs = pair.inputs(torch)
                    for _ in range(3):
                        fn(lib, torch, *xs)
                    torch.cuda.synchronize()
                    torch.cuda.nvtx.range_push(f"{name}:{side}")
                    torch.cuda.profiler.start()
                    fn(lib, torch, *xs)
                    torch.cuda.synchronize()
                    torch.cuda.profiler.stop()
                    torch.cuda.nvtx.range_pop()
                ok += 1
                print(json.dumps({"pair": name, "side": side, "ok": True}), flush=True)
            except Exception as exc:
                traceback.print_exc(limit=3)
                print(json.dumps({"pair": name, "side": side, "ok": False, "error": str(exc)[:300]}), flush=True)
            torch.cuda.empty_cache()
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list")
    ls.add_argument("--set", dest="pair_set", choices=sorted(SETS), default="calibration")
    for cmd in ("time", "run"):
        p = sub.add_parser(cmd)
        p.add_argument("--set", dest="pair_set", choices=sorted(SETS), default="calibration",
                       help="the calibration pairs, or the rewrites of corpus kernels")
        p.add_argument("--lib", help="the shared library built from pairs.cu (the calibration set needs it)")
        p.add_argument("--only", help="comma-separated pair names")
        if cmd == "time":
            p.add_argument("--out", type=Path, required=True)
            p.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    for p in (REPO / "kernelpro_core" / "src", REPO / "kernelpro_plugins_expert" / "src"):
        if p.exists() and str(p) not in sys.path:
            sys.path.append(str(p))
    pairs = SETS[args.pair_set]()
    if args.cmd == "list":
        for pair in pairs.values():
            print(f"{pair.name}: acts on {', '.join(pair.acts_on)}: {pair.action}")
        return 0
    names = args.only.split(",") if args.only else list(pairs)
    unknown = [n for n in names if n not in pairs]
    if unknown:
        print(f"error: unknown pair(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.pair_set == "calibration" and not args.lib:
        print("error: the calibration pairs need --lib (the library built from pairs.cu)", file=sys.stderr)
        return 2
    lib = load_lib(args.lib) if args.lib else None
    if args.cmd == "run":
        return profile_pairs(lib, names, pairs)
    t0 = time.monotonic()

    def write(done: dict[str, Any], complete: bool = False) -> None:
        # after each pair: a run stopped at a time limit keeps the pairs it finished
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps({"pairs": done, "seconds": time.monotonic() - t0, "complete": complete}, indent=1))
        tmp.replace(args.out)

    result = time_pairs(lib, names, args.reps, pairs, on_pair=write)
    write(result, complete=True)
    return 0 if any("error" not in v for v in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
