"""Rendering: recognized regions + tile parameters -> a complete candidate source.

Each region becomes a Triton kernel and a Python wrapper ``_kp_<rid>`` (rid = ``r0``,
``r1``, ... in graph order); the candidate's ``_kp_lower`` swaps the region's fx nodes for
one call of that wrapper. Parameters (a JSON-serialisable dict, recorded with the draft):

``{"lower": [rid, ...], "graph": bool, "tiles": {rid: {...}}}``, optionally with ``"layout":
"channels_last"`` (:func:`channels_last_paths`), where a pointwise or pool
tile is ``{"BLOCK", "num_warps"}``, a row kernel's ``{"BLOCK_R", "num_warps"}``, a split-row
kernel's ``{"BLOCK_R", "CHUNK", "num_warps"}``, a column kernel's
``{"BLOCK_R", "BLOCK_I", "num_warps"}`` and a GEMM's ``{"BLOCK_M", "BLOCK_N", "BLOCK_K",
"GROUP_M", "num_warps", "num_stages"}`` plus ``"precision"`` ("ieee" or "tf32x3") for fp32
operands; a pointwise or full-reduction tile whose region computes a log also has
``"FASTLOG"`` (0 or 1: :func:`uses_log`). GEMM regions overlap the pointwise regions they
replace: ``lower`` holds one of :meth:`Recognition.alternatives`.
"""

from __future__ import annotations

import inspect
import json
import math
from typing import Any

from kernelpro_plugins_expert import foldbias
from kernelpro_plugins_expert.ops import POINTWISE, literal
from kernelpro_plugins_expert.recognize import Recognition, Region
from kernelpro_plugins_expert.templates import (ATTENTION, CANDIDATE, CHNORM, CONV, CONVG, GEMM, GEMM_REDUCE, POOL,
                                                POINTWISE as POINTWISE_T, POOL_CL, REDUCE_ALL, ROWCOL, ROWPAIR, SCAN,
                                                SPLIT, XENT, render)

# Bounds of each tile parameter: powers of two that Triton accepts for tl.arange, and warp
# counts a CUDA block allows (32..1024 threads).
SPACE = {
    "BLOCK": (128, 16384),
    "BLOCK_R": (2, 16384),
    "BLOCK_I": (16, 512),
    "num_warps": (1, 16),
    "CHUNK": (256, 1 << 24),
    # GEMM: tl.dot needs every tile side >= 16; 256 x 256 fp32 accumulators already take
    # all 64K registers of an SM
    "BLOCK_M": (16, 256),
    "BLOCK_N": (16, 256),
    "BLOCK_K": (16, 256),
    "GROUP_M": (1, 64),
    "PER_SM": (0, 32),
    "num_stages": (1, 6),
    # 1: natural logs from the special-function unit (see ``uses_log``)
    "FASTLOG": (0, 1),
    # 1: a row kernel with no split-row form (scans, argmax/argmin, channel norms): rows are not chunked
    "NOSPLIT": (1, 1),
}
# Shared memory a GEMM's pipeline may take (H200: 227 KiB usable per block, less a margin
# for the epilogue's layout conversion)
GEMM_SMEM_BYTES = 200 * 1024
GEMM_PRECISIONS = ("ieee", "tf32x3")
# Split rows when there are fewer rows than this (about 4 per SM of a 132-SM H200) and each
# is at least SPLIT_MIN_EXTENT long: one program per row would leave most SMs idle.
SPLIT_MAX_ROWS = 512
SPLIT_MIN_EXTENT = 16384
SPLIT_TARGET_PROGRAMS = 1024  # about 8 programs per SM on the H200


def region_ids(recognition: Recognition) -> list[str]:
    return [f"r{i}" for i in range(len(recognition.regions))]


def layout(region: Region) -> str:
    """``row`` when the reduced elements are contiguous (inner == 1), else ``col``."""
    if region.kind in ("pointwise", "pool", "reduce_all"):
        return "flat"
    if region.kind in ("gemm", "conv"):
        return "gemm"
    if region.kind == "gemm_reduce":
        return "rewrite"
    if region.kind in ("chnorm", "xent", "rowpair", "attention"):
        return "row"
    if region.kind == "layernorm" or (region.kind == "rmsnorm" and region.attrs.get("normalized_ndim")):
        return "row"
    d = region.attrs["dim"] + region.attrs.get("ndims", 1)
    return "row" if math.prod(region.shape[d:]) == 1 else "col"


def reduced_extent(region: Region) -> int:
    if region.kind in ("xent", "rowpair"):  # the classes / features of one row
        return region.shape[1]
    if region.kind == "attention":  # the keys of one query
        return int(region.attrs["s"])
    if region.kind == "chnorm":  # the elements of one normalized unit
        spatial = math.prod(region.shape[2:])
        if region.op == "batch_norm":
            return region.shape[0] * spatial
        return region.shape[1] // region.attrs["groups"] * spatial
    if region.kind in ("layernorm", "rmsnorm") and region.attrs.get("normalized_ndim"):
        return math.prod(region.shape[-region.attrs["normalized_ndim"]:])
    d = region.attrs["dim"]
    return math.prod(region.shape[d:d + region.attrs.get("ndims", 1)])


def uses_log(region: Region) -> bool:
    """Whether a pointwise or full-reduction region computes a natural log (``log``,
    ``xlogy``, ``softplus``, ``mish``, the log of a fused ``kl_div``): its tile then has
    ``FASTLOG``, 0 for libdevice's logf (a polynomial of about twenty instructions), 1 for
    log2 from the special-function unit times ln 2 (one instruction, approximate). In bench
    pass 6 on the H200 L1 #98's KL divergence (two logs an element) was classed
    compute-bound (integer pipe 65 % busy) at 75 % of the bandwidth, 74 % of its loop's
    instructions fp32; with fast logs (pass 7), memory-bound at 93 %."""
    return region.kind in ("pointwise", "reduce_all") and \
        any("tl.log(" in POINTWISE[op][1] for op, _, _ in region.program)


def default_tile(region: Region) -> dict[str, int]:
    """Starting tile: 1024-element blocks of 4 warps for pointwise (8 fp32 per thread,
    16-byte accesses); 128-element blocks of 4 warps for windowed kernels; a row kernel
    covers up to 4096 elements per step; a column kernel reads 64 contiguous inner
    positions by 16 rows. Logs start exact (``FASTLOG`` 0)."""
    kind = layout(region)
    fast_log = {"FASTLOG": 0} if uses_log(region) else {}
    if region.kind == "reduce_all":
        # a persistent grid (4 programs per SM), each walking the elements with a grid stride,
        # 16 elements per thread a step: on the H200 (L1 #98, bench passes 4 and 5) 2048 per
        # step of 4 warps took 0.78-0.79 ms, 1024 took 1.19-1.20 ms
        return {"BLOCK": 2048, "num_warps": 4, "PER_SM": 4, **fast_log}
    if kind == "flat" and region.kind == "pointwise":
        # PER_SM: 0 = one program per block; k = a persistent grid of k programs per SM
        return {"BLOCK": 1024, "num_warps": 4, "PER_SM": 0, **fast_log}
    if kind == "flat":
        # windowed gathers (pooling, depthwise conv): one output per thread, so a warp's
        # load of one tap reads 32 neighbouring outputs' inputs (coalesced); with several
        # outputs per thread the lanes of a tap's load lie 4-8 elements apart (on the H200,
        # L1 #46's avg pool took 7.97 / 12.59 / 16.81 ms at BLOCK 512 / 1024 / 2048)
        return {"BLOCK": 128, "num_warps": 4}
    if kind == "gemm":
        return gemm_tile(region)
    if kind == "rewrite":
        return {}  # library calls: nothing to tune
    nosplit = {"NOSPLIT": 1} if no_split(region) else {}
    if kind == "row":
        extent = reduced_extent(region)
        rows = math.prod(region.shape) // max(1, extent)
        if region.kind == "attention":
            # BLOCK_R: keys per step (16..128: tensor-core tiles)
            return {"BLOCK_R": 64, "num_warps": 4, **nosplit}
        if region.kind in ("scan", "chnorm", "xent", "rowpair"):
            # a scan's blocks run one after another (each needs the previous carry): long
            # blocks, 8 warps past 2048 elements
            block = min(4096, max(16, 1 << (extent - 1).bit_length()))
            return {"BLOCK_R": block, "num_warps": 4 if block <= 2048 else 8, **nosplit}
        if rows < SPLIT_MAX_ROWS and extent >= SPLIT_MIN_EXTENT and not nosplit:
            chunks = -(-SPLIT_TARGET_PROGRAMS // max(1, rows))
            chunk = max(2048, 1 << (-(-extent // chunks) - 1).bit_length())
            return {"BLOCK_R": 1024, "CHUNK": chunk, "num_warps": 4}
        block = min(4096, max(16, 1 << (extent - 1).bit_length()))
        return {"BLOCK_R": block, "num_warps": 4 if block <= 2048 else 8, **nosplit}
    return {"BLOCK_R": 16, "BLOCK_I": 64, "num_warps": 4, **nosplit}


def no_split(region: Region) -> bool:
    """Scans, argmax/argmin, the channel norms, cross-entropy, the row-pair statistics,
    attention and reductions whose prologue reads a per-channel tensor have no split-row
    (two-stage) form."""
    return region.kind in ("scan", "chnorm", "xent", "rowpair", "attention") or \
        (region.kind == "reduce" and region.op in ("argmax", "argmin")) or \
        region.attrs.get("prologue_channel") is not None


def _pow2_at_least(value: int, lo: int, hi: int) -> int:
    return min(hi, max(lo, 1 << (max(1, value) - 1).bit_length()))


def gemm_tile(region: Region, precision: str = "ieee") -> dict[str, Any]:
    """Starting GEMM tile: 128 x 128 output tiles (shrunk to the next power of two of a
    small M or N) over BLOCK_K = 32 (fp32) or 64 (fp16/bf16) elements of K, groups of 8
    row-blocks, 8 warps for a full 128 x 128 tile (64 fp32 accumulators a thread), 3
    pipeline stages (3 x 32 KiB of shared memory)."""
    fp32 = region.attrs["dtype"] == "float32"
    bm = _pow2_at_least(region.attrs["m"], 16, 128)
    bn = _pow2_at_least(region.attrs["n"], 16, 128)
    bk = _pow2_at_least(region.attrs["k"], 16, 32 if fp32 else 64)
    tile: dict[str, Any] = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8,
                            "num_warps": 8 if bm * bn >= 128 * 128 else 4, "num_stages": 3}
    if fp32:
        tile["precision"] = precision
    return tile


def gemm_smem_bytes(tile: dict[str, Any]) -> int:
    """Shared memory of the A and B tiles over the pipeline's stages."""
    elem = 4 if "precision" in tile else 2
    return tile["num_stages"] * (tile["BLOCK_M"] + tile["BLOCK_N"]) * tile["BLOCK_K"] * elem


def default_params(recognition: Recognition, graph: bool = False) -> dict[str, Any]:
    """Every region but the Triton GEMMs lowered (GEMMs stay in the library), default tiles."""
    ids = region_ids(recognition)
    library, _ = recognition.alternatives()
    return {"lower": [ids[i] for i in library], "graph": graph,
            "tiles": {rid: default_tile(r) for rid, r in zip(ids, recognition.regions)}}


def gemm_params(recognition: Recognition, precision: str = "ieee") -> dict[str, Any] | None:
    """The Triton-GEMM alternative: each GEMM region (with its epilogue) instead of the
    regions it overlaps, and each dense convolution as an implicit GEMM; None without
    either."""
    ids = region_ids(recognition)
    _, triton_ = recognition.alternatives()
    if not any(recognition.regions[i].kind in ("gemm", "conv") for i in triton_):
        return None
    params = default_params(recognition)
    params["lower"] = [ids[i] for i in triton_]
    for rid, region in zip(ids, recognition.regions):
        if region.kind in ("gemm", "conv"):
            params["tiles"][rid] = gemm_tile(region, precision)
    return params


def program_lines(program: Any, inputs: list[str], prefix: str) -> tuple[list[str], str]:
    """SSA lines (fp32 Triton) of a pointwise program reading ``inputs``; the values are
    named ``<prefix>0``, ``<prefix>1``, ...; returns the lines and the result's name."""
    lines = []
    for j, (op, operands, attrs) in enumerate(program):
        arity, expr = POINTWISE[op]
        args = []
        for kind, value in operands:
            if kind == "in":
                args.append(inputs[value])
            elif kind == "v":
                args.append(f"{prefix}{value}")
            else:
                args.append(literal(value))
        if len(args) != arity:
            raise ValueError(f"{op}: expected {arity} operands, got {len(args)}")
        params = {k: literal(v) for k, v in attrs.items()}
        lines.append(f"{prefix}{j} = {expr.format(*args, p=params)}")
    return lines, f"{prefix}{len(program) - 1}"


def pointwise_body(region: Region, tile: dict[str, Any] | None = None) -> tuple[list[str], str]:
    """The SSA lines of a pointwise region, in fp32, and the name of its result; with
    ``FASTLOG`` 1 in ``tile`` its logs call the candidate's ``_kp_fast_log``."""
    lines, result = program_lines(region.program, [f"a{i}" for i in range(len(region.inputs))], "v")
    if tile and tile.get("FASTLOG"):
        lines = [line.replace("tl.log(", "_kp_fast_log(") for line in lines]
    return lines, result


def fused_bodies(region: Region) -> dict[str, Any]:
    """Template values of a reduction's prologue (reads and rewrites ``x``) and epilogue
    (reads and rewrites ``y``)."""
    channel = region.attrs.get("prologue_channel")
    names = ["x"] if channel is None else ["x", "cv"]
    # where the per-channel value comes from: one per program (the channel an outer dim),
    # the reduced index (the channel the one reduced dim), or each element's flat index
    d, k = region.attrs.get("dim"), region.attrs.get("ndims", 1)
    cmode = None if channel is None else "outer" if isinstance(d, int) and 0 <= channel < d else \
        "reduced" if k == 1 and channel == d else "flat"
    pro, pro_result = program_lines(region.prologue, names, "p") if region.prologue else ([], "")
    epi, epi_result = program_lines(region.epilogue, ["y"], "e") if region.epilogue else ([], "")
    if epi:
        epi.append(f"y = {epi_result}")
    return {"prologue": pro, "prologue_result": pro_result, "epilogue": epi, "channel": channel, "cmode": cmode}


def render_gemm(rid: str, region: Region, tile: dict[str, Any]) -> str:
    n_extra = region.attrs["n_extra"]
    names = ["acc"] + [f"e{i}" for i in range(n_extra)]
    body, result = program_lines(region.epilogue, names, "v") if region.epilogue else ([], "acc")
    fp32 = region.attrs["dtype"] == "float32"
    precision = tile.get("precision", "ieee")
    if fp32 and precision not in GEMM_PRECISIONS:
        raise ValueError(f"GEMM precision {precision!r}: expected one of {GEMM_PRECISIONS}")
    return render(GEMM, rid=rid, n_extra=n_extra, body=body, result=result, trans_b=region.attrs["trans_b"],
                  dtype=region.attrs["dtype"], dot_args=f', input_precision="{precision}"' if fp32 else "",
                  **{k: tile[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")})


def render_conv(rid: str, region: Region, tile: dict[str, Any]) -> str:
    a = region.attrs
    fp32 = a["dtype"] == "float32"
    precision = tile.get("precision", "ieee")
    if fp32 and precision not in GEMM_PRECISIONS:
        raise ValueError(f"GEMM precision {precision!r}: expected one of {GEMM_PRECISIONS}")
    if a.get("general"):
        def three(values: tuple[int, ...], fill: int) -> str:
            return repr((fill,) * (3 - a["rank"]) + tuple(int(v) for v in values))

        return render(CONVG, rid=rid, rank=a["rank"], has_bias=a["has_bias"], dtype=a["dtype"],
                      dot_args=f', input_precision="{precision}"' if fp32 else "", groups=a["groups"],
                      transposed=a["transposed"], stride3=three(a["stride"], 1), padding3=three(a["padding"], 0),
                      dilation3=three(a["dilation"], 1), output_padding3=three(a["output_padding"], 0),
                      **{k: tile[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")})
    pad = 2 - a["rank"]

    def two(values: tuple[int, ...], fill: int) -> str:
        return repr((fill,) * pad + tuple(int(v) for v in values))

    return render(CONV, rid=rid, rank=a["rank"], has_bias=a["has_bias"], dtype=a["dtype"],
                  dot_args=f', input_precision="{precision}"' if fp32 else "",
                  stride2=two(a["stride"], 1), padding2=two(a["padding"], 0), dilation2=two(a["dilation"], 1),
                  **{k: tile[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")})


def vec_eligible(region: Region) -> bool:
    """Whether a windowed region has the vector form (see the POOL template): stride and
    dilation 1 along W, a window of at most 16 there, no prologue."""
    if region.kind != "pool" or region.op not in ("avg_pool", "max_pool", "depthwise_conv"):
        return False
    a = region.attrs
    return (a["stride"][-1] == 1 and a["dilation"][-1] == 1 and a["kernel"][-1] <= 16
            and not a["n_pro"] and not region.prologue)


def vec_tile(num_warps: int = 4) -> dict[str, int]:
    """512 outputs of a row per program: 4 per thread at 4 warps."""
    return {"BLOCK": 512, "num_warps": num_warps, "VEC": 1}


def render_pool(rid: str, region: Region, tile: dict[str, Any], dense_out: bool = False) -> str:
    """A pool's kernel and wrapper; ``dense_out`` (a channels-last candidate): max and avg
    pools of 2-D and 3-D inputs also carry the channels-last form (``POOL_CL``), which the
    wrapper takes for a channels-last input."""
    a = region.attrs
    n_pro, n_epi = a["n_pro"], a["n_epi"]
    pro, pro_result = program_lines(region.prologue, ["x"] + [f"p{i}" for i in range(n_pro)], "pv") \
        if region.prologue else ([], "x")
    epi, epi_result = program_lines(region.epilogue, ["y"] + [f"e{i}" for i in range(n_epi)], "ev") \
        if region.epilogue else ([], "y")
    pad = 3 - a["rank"]

    def three(values: tuple[int, ...], fill: int) -> str:
        return repr((fill,) * pad + tuple(int(v) for v in values))

    values = dict(rid=rid, op=region.op, rank=a["rank"], n_pro=n_pro, n_epi=n_epi, prologue=pro,
                  prologue_result=pro_result, epilogue=epi, epilogue_result=epi_result,
                  kernel3=three(a["kernel"], 1), stride3=three(a["stride"], 1), padding3=three(a["padding"], 0),
                  dilation3=three(a["dilation"], 1), ceil_mode=bool(a["ceil_mode"]),
                  count_include_pad=bool(a["count_include_pad"]), divisor_override=a["divisor_override"])
    cl = dense_out and pool_reads_channels_last(region)
    text = render(POOL, conv=region.op == "depthwise_conv", has_bias=bool(a.get("has_bias")), cl=cl,
                  BLOCK=tile["BLOCK"], num_warps=tile["num_warps"], **values, **vec_args(region, tile))
    return render(POOL_CL, **values).rstrip("\n") + "\n\n\n" + text.lstrip("\n") if cl else text


def pool_reads_channels_last(region: Region) -> bool:
    """Whether a pool region has the channels-last form: max or avg pooling over the last 2
    or 3 dims of an (N, C, *spatial) input."""
    return region.kind == "pool" and region.op in ("max_pool", "avg_pool") and region.attrs["rank"] in (2, 3) \
        and len(region.shape) == region.attrs["rank"] + 2


def vec_args(region: Region, tile: dict[str, Any]) -> dict[str, Any]:
    """The vector form's layout constants: output j's tap k is column a_off + j + k of the
    nb aligned 4-wide blocks loaded from each output group's first output + w_al."""
    if not tile.get("VEC"):
        return {"vec": False}
    if not vec_eligible(region):
        raise ValueError(f"the vector form does not apply to this {region.op} region")
    pw, kw = int(region.attrs["padding"][-1]), int(region.attrs["kernel"][-1])
    w_al = -((pw + 3) // 4) * 4  # -PW rounded down to a multiple of 4
    a_off = -pw - w_al
    return {"vec": True, "w_al": w_al, "a_off": a_off, "nb": (a_off + 3 + kw + 3) // 4, "kw_size": kw}


def render_kernel(rid: str, region: Region, tile: dict[str, Any], dense_out: bool = False) -> str:
    """The kernel and wrapper of one region. ``dense_out`` (a channels-last candidate): a
    pointwise region reading a channels-last input writes its output in the default layout,
    and a reduction, softmax or norm reads such an input in its own order (no copy)."""
    if region.kind == "gemm":
        return render_gemm(rid, region, tile)
    if region.kind == "gemm_reduce":
        a = region.attrs
        # the prologue acts on the reduced value here (it commutes with the sum), so both
        # programs read ``y``
        pro, pro_result = program_lines(region.prologue, ["y"], "p") if region.prologue else ([], "")
        epi, epi_result = program_lines(region.epilogue, ["y"], "e") if region.epilogue else ([], "")
        return render(GEMM_REDUCE, rid=rid, op=region.op, trans_b=a["trans_b"], has_bias=a["has_bias"],
                      keepdim=a["keepdim"], n=a["n"], prologue=pro, prologue_result=pro_result,
                      epilogue=epi + ([f"y = {epi_result}"] if epi else []))
    if region.kind == "pool":
        return render_pool(rid, region, tile, dense_out)
    if region.kind == "conv":
        return render_conv(rid, region, tile)
    if region.kind == "reduce_all":
        body, result = pointwise_body(region, tile)
        return render(REDUCE_ALL, rid=rid, n_in=len(region.inputs), body=body, result=result,
                      dtype=region.attrs["dtype"],
                      reduction=region.attrs["reduction"], BLOCK=tile["BLOCK"], num_warps=tile["num_warps"],
                      PER_SM=tile["PER_SM"])
    if region.kind == "attention":
        fp32 = region.attrs["dtype"] == "float32"
        return render(ATTENTION, rid=rid, causal=bool(region.attrs["causal"]), scale=repr(region.attrs["scale"]),
                      dot_args=', input_precision="ieee"' if fp32 else "", BLOCK_M=64,
                      BLOCK_N=min(128, max(16, tile["BLOCK_R"])), num_warps=tile["num_warps"])
    if region.kind == "rowpair":
        return render(ROWPAIR, rid=rid, op=region.op, n_in=len(region.inputs), eps=repr(region.attrs["eps"]),
                      margin=repr(region.attrs["margin"]), reduction=region.attrs.get("reduction", ""),
                      BLOCK_R=tile["BLOCK_R"], num_warps=tile["num_warps"])
    if region.kind == "xent":
        return render(XENT, rid=rid, reduction=region.attrs["reduction"], ignore_index=int(region.attrs["ignore_index"]),
                      BLOCK_R=tile["BLOCK_R"], num_warps=tile["num_warps"])
    if region.kind == "chnorm":
        has_w = len(region.inputs) > 1 and region.inputs[1] is not None
        has_b = len(region.inputs) > 2 and region.inputs[2] is not None
        return render(CHNORM, rid=rid, op=region.op, groups=region.attrs.get("groups", 1), has_w=has_w, has_b=has_b,
                      eps=repr(float(region.attrs["eps"])), BLOCK_R=tile["BLOCK_R"], num_warps=tile["num_warps"],
                      # eval-mode batch norm: the pointwise kernels' starting block (8 fp32 a thread)
                      BLOCK_E=1024, affine_warps=4, **fused_bodies(region))
    if region.kind == "scan":
        body, result = program_lines(region.program, [f"a{i}" for i in range(len(region.inputs))], "v") \
            if region.program else ([], "a0")
        return render(SCAN, rid=rid, op=region.op, layout=layout(region), n_in=len(region.inputs), body=body,
                      result=result, neutral="0.0" if region.op == "cumsum" else "1.0",
                      reverse=bool(region.attrs["reverse"]), exclusive=bool(region.attrs["exclusive"]),
                      dim=region.attrs["dim"], BLOCK_R=tile["BLOCK_R"], BLOCK_I=tile.get("BLOCK_I", 0),
                      num_warps=tile["num_warps"])
    if region.kind == "pointwise":
        body, result = pointwise_body(region, tile)
        return render(POINTWISE_T, rid=rid, n_in=len(region.inputs), rank=max(1, len(region.shape)),
                      body=body, result=result, BLOCK=tile["BLOCK"], num_warps=tile["num_warps"],
                      persistent=int(tile.get("PER_SM", 0)), dense_out=dense_out)
    lay = layout(region)
    has_w = len(region.inputs) > 1 and region.inputs[1] is not None
    has_b = len(region.inputs) > 2 and region.inputs[2] is not None
    eps = region.attrs.get("eps")
    if eps is None:  # RMSNorm(eps=None) uses the dtype's machine epsilon (fp32 here)
        eps = 1.1920928955078125e-07
    if "CHUNK" in tile:
        if region.attrs.get("prologue_channel") is not None:
            raise ValueError(f"{rid}: a prologue with a per-channel tensor has no split-row form")
        return render(SPLIT, rid=rid, op=region.op, has_w=has_w, has_b=has_b, dim=region.attrs.get("dim"),
                      ndims=region.attrs.get("ndims", 1), keepdim=region.attrs.get("keepdim", False),
                      normalized_ndim=region.attrs.get("normalized_ndim"), eps=repr(float(eps)),
                      BLOCK_R=tile["BLOCK_R"], CHUNK=tile["CHUNK"], num_warps=tile["num_warps"],
                      **fused_bodies(region))
    values = dict(rid=rid, op=region.op, has_w=has_w, has_b=has_b,
                  dim=region.attrs.get("dim"), ndims=region.attrs.get("ndims", 1), keepdim=region.attrs.get("keepdim", False),
                  normalized_ndim=region.attrs.get("normalized_ndim"), eps=repr(float(eps)),
                  BLOCK_R=tile["BLOCK_R"], BLOCK_I=tile.get("BLOCK_I", 0), num_warps=tile["num_warps"],
                  **fused_bodies(region))
    text = render(ROWCOL, layout=lay, strided=False, ksuffix="", cl=dense_out, **values)
    if not dense_out:
        return text
    # a channels-last candidate: the same kernel with runtime strides, for an input read in
    # its own memory order (the per-channel tensor then by each element's offset)
    cmode = values["cmode"] if values["cmode"] in (None, "reduced") else "flat"
    strided = render(ROWCOL, layout="col", strided=True, ksuffix="_cl", cl=False, **{**values, "cmode": cmode})
    return strided.rstrip("\n") + "\n\n\n" + text.lstrip("\n")


def describe(recognition: Recognition, params: dict[str, Any]) -> str:
    ids = region_ids(recognition)
    parts, rewrites = [], []
    for rid, region in zip(ids, recognition.regions):
        if rid not in params["lower"]:
            continue
        tile = ",".join(f"{k}={v}" for k, v in params["tiles"][rid].items())
        op = "+".join(x for x in ("+".join(p[0] for p in region.prologue), region.op,
                                  "+".join(e[0] for e in region.epilogue)) if x)
        if region.kind == "gemm_reduce":
            rewrites.append(f"{region.op} of a GEMM as a matrix-vector product ({op})")
        else:
            parts.append(f"{region.kind}({op})[{tile}]")
    text = "; ".join(rewrites + (["Triton " + "; ".join(parts)] if parts else [])) or "reference ops"
    if params.get("layout") == "channels_last":
        text += " + channels-last convolutions"
    if params.get("fold"):
        text += " + convolution biases added by the next kernel"
    return text + (" + CUDA graph" if params.get("graph") else "")


def rewrite_params(recognition: Recognition) -> dict[str, Any] | None:
    """Every algebraic rewrite lowered, with the library-path regions it does not overlap;
    None without a rewrite."""
    chosen = recognition.rewrites()
    if not chosen:
        return None
    params = default_params(recognition)
    ids = region_ids(recognition)
    params["lower"] = [ids[i] for i in chosen]
    return params


def channels_last_paths(recognition: Recognition, params: dict[str, Any]) -> list[str]:
    """Module paths of the convolutions ``params`` leaves in the library that run on
    channels-last tensors under ``"layout": "channels_last"``: 2-D and 3-D, transposed or
    not, groups 1. cuDNN's NCHW path converts input and output to NHWC around its kernels
    (the tuning sample's bench pass 4: on L2 #2 and #44 ``nhwcToNchwKernel`` moved as many
    bytes as the convolution itself); PyTorch's compiler lays convolutions out channels-last
    for the same reason, and its own measurements have grouped convolutions slower that way
    (``torch/_inductor/graph.py``, ``decide_layout_opt``), so they stay as they are."""
    if "conv_paths" in params:  # a fold candidate: its recognition sees the convolutions as calls
        return list(params["conv_paths"])
    ids = region_ids(recognition)
    paths = []
    for rid, region in zip(ids, recognition.regions):
        if region.kind != "conv" or rid in params["lower"]:
            continue
        rank, groups = region.attrs.get("rank"), region.attrs.get("groups", 1)
        weight = str(getattr(region.inputs[1], "path", "")) if len(region.inputs) > 1 else ""
        if rank not in (2, 3) or groups != 1 or not weight.endswith(".weight"):
            continue
        path = weight[:-len(".weight")]
        paths.append(f"{region.scope}.{path}" if region.scope else path)
    return list(dict.fromkeys(paths))


def layout_params(recognition: Recognition, params: dict[str, Any]) -> dict[str, Any] | None:
    """``params`` with its library convolutions channels-last (:func:`channels_last_paths`);
    None when it has none."""
    if params.get("layout") == "channels_last" or not channels_last_paths(recognition, params):
        return None
    return {**params, "layout": "channels_last"}


def fold_layout_params(recognition: Recognition, fold: dict[str, Any]) -> dict[str, Any] | None:
    """A fold candidate's ``fold`` params with the library's convolutions channels-last:
    the folded graph calls them as functions of their weights, which the folded
    recognition does not count as convolution regions, so their module paths come from
    ``recognition`` (the regions as written) and travel in the params."""
    paths = channels_last_paths(recognition, default_params(recognition))
    if not paths or fold.get("layout"):
        return None
    return {**fold, "layout": "channels_last", "conv_paths": paths}


def is_triton(recognition: Recognition, params: dict[str, Any]) -> bool:
    """Whether the candidate for ``params`` holds a Triton kernel (rewrites are library calls)."""
    ids = region_ids(recognition)
    return any(recognition.regions[ids.index(r)].kind != "gemm_reduce" for r in params["lower"] if r in ids)


def render_candidate(problem_source: str, recognition: Recognition, params: dict[str, Any]) -> str:
    """A complete candidate file for ``params``. Without a GPU its Triton kernels run only
    under Triton's interpreter: ``TRITON_INTERPRET=1`` in the environment before triton is
    first imported, which the evaluator sets for a Triton candidate on a CPU (setting it
    inside the candidate is too late once the evaluator's process has imported triton,
    whose reductions are then compiled-only functions)."""
    ids = region_ids(recognition)
    layout = params.get("layout")
    if layout not in (None, "channels_last"):
        raise ValueError(f"layout {layout!r}: expected 'channels_last' or none")
    channels_last = channels_last_paths(recognition, params) if layout else []
    kernels, specs, lowered, fast_log = [], [], [], False
    for rid, region in zip(ids, recognition.regions):
        if rid not in params["lower"]:
            continue
        kernels.append(render_kernel(rid, region, params["tiles"][rid], dense_out=bool(channels_last)).strip("\n"))
        specs.append({**region.spec(), "rid": rid})
        lowered.append(rid)
        fast_log = fast_log or bool(params["tiles"][rid].get("FASTLOG"))
    fold_source = inspect.getsource(foldbias._kp_split_conv_bias) if params.get("fold") else ""
    if fold_source and recognition.scoped:
        raise ValueError("fold: the bias pass applies to a whole-model trace")
    return render(CANDIDATE, description=describe(recognition, params), channels_last=channels_last,
                  fold_source=fold_source.rstrip(),
                  params_json=json.dumps(params, sort_keys=True), problem_source=problem_source.rstrip(),
                  kernels=kernels,
                  regions_json=json.dumps(specs), region_ids=lowered, graph=bool(params.get("graph")),
                  scoped=recognition.scoped,
                  fast_log=fast_log)
