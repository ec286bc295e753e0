"""Rendering: recognized regions + tile parameters -> a complete candidate source.

Each region becomes a Triton kernel and a Python wrapper ``_kp_<rid>`` (rid = ``r0``,
``r1``, ... in graph order); the candidate's ``_kp_lower`` swaps the region's fx nodes for
one call of that wrapper. Parameters (a JSON-serialisable dict, recorded with the draft):

``{"lower": [rid, ...], "graph": bool, "tiles": {rid: {...}}}`` where a pointwise tile is
``{"BLOCK", "num_warps"}``, a row kernel's ``{"BLOCK_R", "num_warps"}``, a split-row
kernel's ``{"BLOCK_R", "CHUNK", "num_warps"}`` and a column kernel's
``{"BLOCK_R", "BLOCK_I", "num_warps"}``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from kernelpro.generate.expert.ops import POINTWISE, literal
from kernelpro.generate.expert.recognize import Recognition, Region
from kernelpro.generate.expert.templates import CANDIDATE, POINTWISE as POINTWISE_T, ROWCOL, SPLIT, render

# Bounds of each tile parameter: powers of two that Triton accepts for tl.arange, and warp
# counts a CUDA block allows (32..1024 threads).
SPACE = {
    "BLOCK": (128, 16384),
    "BLOCK_R": (2, 16384),
    "BLOCK_I": (16, 512),
    "num_warps": (1, 16),
    "CHUNK": (256, 1 << 24),
}
# Split rows when there are fewer rows than this (about 4 per SM of a 132-SM H200) and each
# is at least SPLIT_MIN_EXTENT long: one program per row would leave most SMs idle.
SPLIT_MAX_ROWS = 512
SPLIT_MIN_EXTENT = 16384
SPLIT_TARGET_PROGRAMS = 1024  # about 8 programs per SM on the H200


def region_ids(recognition: Recognition) -> list[str]:
    return [f"r{i}" for i in range(len(recognition.regions))]


def layout(region: Region) -> str:
    """``row`` when the reduced elements are contiguous (inner == 1), else ``col``."""
    if region.kind == "pointwise":
        return "flat"
    if region.kind == "layernorm" or (region.kind == "rmsnorm" and region.attrs.get("normalized_ndim")):
        return "row"
    d = region.attrs["dim"] + region.attrs.get("ndims", 1)
    return "row" if math.prod(region.shape[d:]) == 1 else "col"


def reduced_extent(region: Region) -> int:
    if region.kind in ("layernorm", "rmsnorm") and region.attrs.get("normalized_ndim"):
        return math.prod(region.shape[-region.attrs["normalized_ndim"]:])
    d = region.attrs["dim"]
    return math.prod(region.shape[d:d + region.attrs.get("ndims", 1)])


def default_tile(region: Region) -> dict[str, int]:
    """Starting tile: 1024-element blocks of 4 warps for pointwise (4 fp32 per thread,
    16-byte accesses); a row kernel covers up to 4096 elements per step; a column kernel
    reads 64 contiguous inner positions by 16 rows."""
    kind = layout(region)
    if kind == "flat":
        return {"BLOCK": 1024, "num_warps": 4}
    if kind == "row":
        extent = reduced_extent(region)
        rows = math.prod(region.shape) // max(1, extent)
        if rows < SPLIT_MAX_ROWS and extent >= SPLIT_MIN_EXTENT:
            chunks = -(-SPLIT_TARGET_PROGRAMS // max(1, rows))
            chunk = max(2048, 1 << (-(-extent // chunks) - 1).bit_length())
            return {"BLOCK_R": 1024, "CHUNK": chunk, "num_warps": 4}
        block = min(4096, max(16, 1 << (extent - 1).bit_length()))
        return {"BLOCK_R": block, "num_warps": 4 if block <= 2048 else 8}
    return {"BLOCK_R": 16, "BLOCK_I": 64, "num_warps": 4}


def default_params(recognition: Recognition, graph: bool = False) -> dict[str, Any]:
    ids = region_ids(recognition)
    return {"lower": ids, "graph": graph,
            "tiles": {rid: default_tile(r) for rid, r in zip(ids, recognition.regions)}}


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


def pointwise_body(region: Region) -> tuple[list[str], str]:
    """The SSA lines of a pointwise region, in fp32, and the name of its result."""
    return program_lines(region.program, [f"a{i}" for i in range(len(region.inputs))], "v")


def fused_bodies(region: Region) -> dict[str, Any]:
    """Template values of a reduction's prologue (reads and rewrites ``x``) and epilogue
    (reads and rewrites ``y``)."""
    pro, pro_result = program_lines(region.prologue, ["x"], "p") if region.prologue else ([], "")
    epi, epi_result = program_lines(region.epilogue, ["y"], "e") if region.epilogue else ([], "")
    if epi:
        epi.append(f"y = {epi_result}")
    return {"prologue": pro, "prologue_result": pro_result, "epilogue": epi}


def render_kernel(rid: str, region: Region, tile: dict[str, int]) -> str:
    if region.kind == "pointwise":
        body, result = pointwise_body(region)
        return render(POINTWISE_T, rid=rid, n_in=len(region.inputs), rank=max(1, len(region.shape)),
                      body=body, result=result, BLOCK=tile["BLOCK"], num_warps=tile["num_warps"])
    lay = layout(region)
    has_w = len(region.inputs) > 1 and region.inputs[1] is not None
    has_b = len(region.inputs) > 2 and region.inputs[2] is not None
    eps = region.attrs.get("eps")
    if eps is None:  # RMSNorm(eps=None) uses the dtype's machine epsilon (fp32 here)
        eps = 1.1920928955078125e-07
    if "CHUNK" in tile:
        return render(SPLIT, rid=rid, op=region.op, has_w=has_w, has_b=has_b, dim=region.attrs.get("dim"),
                      ndims=region.attrs.get("ndims", 1), keepdim=region.attrs.get("keepdim", False),
                      normalized_ndim=region.attrs.get("normalized_ndim"), eps=repr(float(eps)),
                      BLOCK_R=tile["BLOCK_R"], CHUNK=tile["CHUNK"], num_warps=tile["num_warps"],
                      **fused_bodies(region))
    return render(ROWCOL, rid=rid, op=region.op, layout=lay, has_w=has_w, has_b=has_b,
                  dim=region.attrs.get("dim"), ndims=region.attrs.get("ndims", 1), keepdim=region.attrs.get("keepdim", False),
                  normalized_ndim=region.attrs.get("normalized_ndim"), eps=repr(float(eps)),
                  BLOCK_R=tile["BLOCK_R"], BLOCK_I=tile.get("BLOCK_I", 0), num_warps=tile["num_warps"],
                  **fused_bodies(region))


def describe(recognition: Recognition, params: dict[str, Any]) -> str:
    ids = region_ids(recognition)
    parts = []
    for rid, region in zip(ids, recognition.regions):
        if rid not in params["lower"]:
            continue
        tile = ",".join(f"{k}={v}" for k, v in params["tiles"][rid].items())
        op = "+".join(x for x in ("+".join(p[0] for p in region.prologue), region.op,
                                  "+".join(e[0] for e in region.epilogue)) if x)
        parts.append(f"{region.kind}({op})[{tile}]")
    text = "Triton " + "; ".join(parts) if parts else "reference ops"
    return text + (" + CUDA graph" if params.get("graph") else "")


def render_candidate(problem_source: str, recognition: Recognition, params: dict[str, Any]) -> str:
    """A complete candidate file for ``params``. Without a GPU its Triton kernels run only
    under Triton's interpreter: ``TRITON_INTERPRET=1`` in the environment before triton is
    first imported (setting it inside the candidate is too late once the evaluator's
    process has imported triton, whose reductions are then compiled-only functions)."""
    ids = region_ids(recognition)
    kernels, specs, lowered = [], [], []
    for rid, region in zip(ids, recognition.regions):
        if rid not in params["lower"]:
            continue
        kernels.append(render_kernel(rid, region, params["tiles"][rid]).strip("\n"))
        specs.append({**region.spec(), "rid": rid})
        lowered.append(rid)
    return render(CANDIDATE, description=describe(recognition, params),
                  params_json=json.dumps(params, sort_keys=True), problem_source=problem_source.rstrip(),
                  kernels=kernels,
                  regions_json=json.dumps(specs), region_ids=lowered, graph=bool(params.get("graph")))
