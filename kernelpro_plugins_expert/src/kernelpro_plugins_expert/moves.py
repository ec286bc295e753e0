"""Moves: how the expert generator changes a parent's parameters, chosen from findings.

Move table (finding tool or bottleneck kind -> moves, tried in this order):

=====================================================  ==================================
uncoalesced_global, sass_narrow_global_access           wider (more contiguous elements per
                                                        thread; column kernels: wider inner tile;
                                                        GEMM: deeper_k; windowed kernels: fewer
                                                        outputs per thread, down to one)
occupancy_limiter, occupancy_gap, local_memory,         smaller (halve the tile), fewer_warps,
sass_local_memory                                       fewer_stages
occupancy_gap with a grid under one wave                more_programs, more_warps
tail_effect, small_grid                                 more_programs (smaller blocks: more,
                                                        shorter programs over the same data; row
                                                        kernels: split rows into chunks; GEMM:
                                                        halve the longer tile side; a persistent
                                                        grid: twice the programs per SM); tail_effect
                                                        also persistent (pointwise: a grid of 4
                                                        programs per SM walking the blocks)
launch_bound, launch_overhead, cpu_overhead,            graph (capture the whole forward)
kernel_time_share, idle_gaps
warp_stalls                                             more_warps, more_stages
issue_slots                                             more_warps
energy_traffic (energy plugin: DRAM bytes over the      larger_tile (neighbouring outputs share
minimum)                                                loads; GEMM: more reuse per loaded
                                                        element), wider (row kernels: one pass
                                                        over a row instead of chunks re-read)
energy_narrow_access (bytes per global instruction      wider, fewer_warps (more contiguous
under 8-byte accesses)                                  elements per thread: 16-byte accesses)
energy_idle_issue (memory bound, SMs idle-issuing)      fewer_warps, persistent
energy_precision (fp32 FMA pipe busy, tensor idle)      precision
bottleneck too_little_work / latency                    graph, more_programs, more_stages
bottleneck memory                                       deeper_k, more_stages, wider, more_warps,
                                                        persistent
bottleneck compute                                      precision (GEMM: tf32x3; a tile computing
                                                        logs: log2 from the special-function
                                                        unit), larger_tile (windowed kernels:
                                                        twice the outputs per program), smaller,
                                                        fewer_warps
no analysis (profiling off, CPU)                        wider, smaller, more_warps, fewer_warps, graph,
                                                        precision, deeper_k, more_stages, larger_tile,
                                                        fewer_stages, persistent
at_roofline finding, or roofline_fraction >= the        stop: no children for this node; where
generator's ``stop_at_roofline_fraction``, or the       the run's reward ranks energy (the
evaluator's least time over the call's (minimum         request's ``goal``), only the energy
traffic at the GPU's ceilings) >= that fraction         findings' moves, then larger_tile, wider,
                                                        fewer_warps, persistent (``energy_plan``)
=====================================================  ==================================

GEMM tiles read the moves as: smaller / more_programs = halve the longer of BLOCK_M and
BLOCK_N (more programs, fewer accumulator registers); larger_tile = double the shorter
(more reuse of each loaded element per FMA/MMA); deeper_k = double BLOCK_K (fewer,
larger loads per K step); wider = deeper_k; more_stages / fewer_stages = one pipeline
stage more / less (more loads in flight / less shared memory); more_warps / fewer_warps
between 2 and 8 warps; precision = fp32 products on tensor cores in three tf32 parts
(tf32x3) instead of full-precision FMAs (ieee); for a parent whose GEMMs are still in
the library the generator turns ``precision`` into the Triton-GEMM alternative with
tf32x3. Moves that name only GEMM parameters
(deeper_k, more_stages, fewer_stages, larger_tile) leave other tiles alone; ``precision``
on a pointwise or full-reduction tile with ``FASTLOG`` 0 sets it to 1 (logs from the
special-function unit: approximate, so the evaluator's tolerance decides), and on any
other non-GEMM tile means nothing.

Findings that name a kernel (``Finding.kernel``) steer the move to the region whose kernel
it is (``_kp_<rid>_kernel``); otherwise every lowered region gets the move in turn.
"""

from __future__ import annotations

import copy
from typing import Any

from kernelpro.api import Analysis, least_time_fraction
from kernelpro_plugins_expert.render import GEMM_SMEM_BYTES, SPACE, gemm_smem_bytes

FINDING_MOVES: dict[str, tuple[str, ...]] = {
    "uncoalesced_global": ("wider",),
    "sass_narrow_global_access": ("wider",),
    "occupancy_limiter": ("smaller", "fewer_warps", "fewer_stages"),
    "occupancy_gap": ("smaller", "fewer_warps", "fewer_stages"),
    "local_memory": ("smaller", "fewer_warps", "fewer_stages"),
    "sass_local_memory": ("smaller", "fewer_warps", "fewer_stages"),
    "tail_effect": ("more_programs", "persistent"),
    "small_grid": ("more_programs",),
    "launch_bound": ("graph",),
    "launch_overhead": ("graph",),
    "cpu_overhead": ("graph",),
    "kernel_time_share": ("graph",),
    "idle_gaps": ("graph",),
    "warp_stalls": ("more_warps", "more_stages"),
    "issue_slots": ("more_warps",),
    # energy levers (kernelpro_plugins_energy, reported only when the run measures energy)
    "energy_traffic": ("larger_tile", "wider"),
    "energy_narrow_access": ("wider", "fewer_warps"),
    "energy_idle_issue": ("fewer_warps", "persistent"),
    "energy_precision": ("precision",),
}
BOTTLENECK_MOVES: dict[str, tuple[str, ...]] = {
    "too_little_work": ("graph", "more_programs", "more_stages"),
    "latency": ("graph", "more_programs", "more_stages"),
    # GEMM-only moves first: on other tiles they give nothing, so their order is unchanged
    "memory": ("deeper_k", "more_stages", "wider", "more_warps", "persistent"),
    "compute": ("precision", "larger_tile", "smaller", "fewer_warps"),
}
DEFAULT_MOVES = ("wider", "smaller", "more_warps", "fewer_warps", "graph",
                 "precision", "deeper_k", "more_stages", "larger_tile", "fewer_stages", "persistent")
#: every move a plan can hold, whatever the analysis (the expert's ``expandable``)
ALL_MOVES = tuple(dict.fromkeys(
    [m for ms in FINDING_MOVES.values() for m in ms] + [m for ms in BOTTLENECK_MOVES.values() for m in ms]
    + ["more_programs", "more_warps", "larger_tile", "precision"] + list(DEFAULT_MOVES)))
#: the energy plugin's findings (their moves: FINDING_MOVES)
ENERGY_TOOLS = ("energy_traffic", "energy_narrow_access", "energy_idle_issue", "energy_precision")
#: at the roofline, for a reward that ranks energy: every energy finding's move but
#: ``precision`` (its numbers change: proposed where ``energy_precision`` says the FMA pipe is busy)
ENERGY_MOVES = ("larger_tile", "wider", "fewer_warps", "persistent")
GEMM_ONLY = ("deeper_k", "more_stages", "fewer_stages", "larger_tile", "precision")
STOP_TOOLS = ("at_roofline",)


def at_roofline(analysis: Analysis | None, threshold: float) -> bool:
    if analysis is None:
        return False
    if any(f.tool in STOP_TOOLS for f in analysis.findings):
        return True
    b = analysis.bottleneck
    return b is not None and b.roofline_fraction is not None and b.roofline_fraction >= threshold


def near_least_time(result: Any, threshold: float) -> bool:
    """Whether a candidate's call (its evaluation ``result``) takes at most ``1 / threshold``
    of the problem's least time by the evaluator's minimum-traffic bound: no profile needed.
    Against the same ceilings a profile would put its kernels at least as close to their
    roofline: the bytes they move are at least the minimum, their time at most the call's."""
    if result is None or getattr(result, "timing", None) is None:
        return False
    notes = (getattr(result, "measurements", None) or {}).get("evaluator") or {}
    got = least_time_fraction(notes, result.timing.median_ms)
    return got is not None and got[0] >= threshold


def energy_plan(analysis: Analysis | None, region_ids: list[str]) -> list[tuple[str, str | None]]:
    """Ordered (move, rid) pairs for a parent at its roofline when the run's reward ranks
    energy: the moves of the parent's energy findings first (largest estimated gain first),
    then :data:`ENERGY_MOVES` on every region. No move that only buys time (a captured
    graph, more programs or stages): at the roofline there is none to buy."""
    out: list[tuple[str, str | None]] = []
    if analysis is not None:
        for f in sorted(analysis.findings, key=lambda f: -(f.estimated_gain or 0.0)):
            if f.tool in ENERGY_TOOLS:
                rid = next((r for r in region_ids if f.kernel and f"_kp_{r}_kernel" in f.kernel), None)
                out += [(m, rid) for m in FINDING_MOVES[f.tool]]
    out += [(m, None) for m in ENERGY_MOVES]
    return list(dict.fromkeys(out))


def plan(analysis: Analysis | None, region_ids: list[str],
         first: tuple[str, ...] = ()) -> list[tuple[str, str | None]]:
    """Ordered (move, rid or None for every region) pairs for a parent's analysis; moves
    in ``first`` lead the default ones (the root's children: see ``root_first``)."""
    out: list[tuple[str, str | None]] = []
    if analysis is not None:
        ranked = sorted(analysis.findings, key=lambda f: -(f.estimated_gain or 0.0))
        for f in ranked:
            rid = next((r for r in region_ids if f.kernel and f"_kp_{r}_kernel" in f.kernel), None)
            for move in _finding_moves(f):
                out.append((move, rid))
        if analysis.bottleneck is not None:
            out += [(m, None) for m in BOTTLENECK_MOVES.get(analysis.bottleneck.kind, ())]
    out += [(m, None) for m in first] + [(m, None) for m in DEFAULT_MOVES]
    seen, unique = set(), []
    for item in out:
        if item not in seen:
            seen.add(item)
            unique.append(item)
    return unique


def _finding_moves(f: Any) -> tuple[str, ...]:
    """The moves for one finding. An occupancy gap whose grid does not fill one wave
    (``waves_per_sm`` < 1 in its evidence) is the grid's fault, not the tile's: more
    programs or more warps fill the empty warp slots, where a smaller tile or fewer warps
    would empty more (pass 5's L1 #98: a persistent reduction at 0.5 waves went from 4 to 2
    warps, 0.79 -> 1.57 ms)."""
    if f.tool == "occupancy_gap":
        waves = (getattr(f, "evidence", None) or {}).get("waves_per_sm")
        if isinstance(waves, (int, float)) and waves < 1.0:
            return ("more_programs", "more_warps")
    return FINDING_MOVES.get(f.tool, ())


def root_first(tiles: dict[str, dict[str, Any]]) -> tuple[str, ...]:
    """Moves that lead the root's children. Windowed tiles (pooling, depthwise convolution)
    grow first: in bench pass 5 on the H200, twice the outputs per program (BLOCK 256) made
    L1 #82's depthwise convolution 1.28 -> 0.83 ms, while halving the warps, the default
    order's earlier move, was never faster (L1 #44 2.56 -> 2.55, #46 2.82 -> 2.97, #82
    1.28 -> 1.31, L2 #50 11.22 -> 11.33 ms). Tiles that compute logs try the fast log
    first (``precision``; pass 6's L1 #98: see ``render.uses_log``)."""
    windowed = any("BLOCK" in t and "PER_SM" not in t for t in tiles.values())
    # logs computed exactly: their special-function-unit form is the second root candidate
    exact_log = any(t.get("FASTLOG") == 0 for t in tiles.values())
    return (("larger_tile",) if windowed else ()) + (("precision",) if exact_log else ())


def _clamp(key: str, value: int) -> int | None:
    lo, hi = SPACE[key]
    return value if lo <= value <= hi else None


def apply_tile_move(move: str, tile: dict[str, int]) -> dict[str, int] | None:
    """The tile after ``move``, or None when the move leaves the parameter space.

    flat (pointwise, pool): BLOCK and num_warps; row: BLOCK_R and num_warps; col: BLOCK_R,
    BLOCK_I and num_warps; GEMM: see :func:`apply_gemm_move`; a rewrite (library calls, an
    empty tile) has nothing to move."""
    if not tile:
        return None
    if "BLOCK_M" in tile:
        return apply_gemm_move(move, tile)
    t = dict(tile)
    if move == "precision" and "BLOCK_M" not in t:
        # a tile whose region computes logs: log2 from the special-function unit instead
        # of libdevice's polynomial
        if t.get("FASTLOG") != 0:
            return None
        t["FASTLOG"] = 1
        return t
    if t.get("VEC"):
        # the vector windowed form: BLOCK outputs of a row, 4 per thread group
        if move == "larger_tile":
            t["BLOCK"] *= 2
        elif move in ("smaller", "more_programs"):
            t["BLOCK"] //= 2
        elif move == "more_warps":
            t["num_warps"] *= 2
        elif move == "fewer_warps":
            t["num_warps"] //= 2
        else:
            return None
        # at least one group of 4 outputs per thread, at most 4096 outputs a program
        return t if 1 <= t["num_warps"] <= 8 and 128 * t["num_warps"] <= t["BLOCK"] <= 4096 else None
    col = "BLOCK_I" in t
    key = "BLOCK" if "BLOCK" in t else ("BLOCK_I" if col else "BLOCK_R")
    windowed = "BLOCK" in t and "PER_SM" not in t  # pooling / depthwise conv: gathers per tap
    if move == "larger_tile" and windowed:
        # compute bound (the index math and masks of each tap): more outputs per thread
        # share a row's decomposition
        t["BLOCK"] *= 2
        return t if _clamp("BLOCK", t["BLOCK"]) is not None else None
    if move in GEMM_ONLY:
        return None
    if move == "more_warps" and windowed and t["BLOCK"] < 64 * t["num_warps"]:
        return None  # threads without an output of their own (pass 4: 8 warps on 128 outputs, 2x slower)
    if move == "wider" and windowed:
        # a tap's load is coalesced when a warp's lanes hold neighbouring outputs: fewer
        # outputs per thread, down to one
        if t["BLOCK"] <= 32 * t["num_warps"]:
            return None
        t["BLOCK"] //= 2
    elif move == "wider":
        t[key] = t[key] * 2
    elif move == "smaller":
        k = "BLOCK_R" if col else key
        t[k] = t[k] // 2
    elif move == "more_programs":
        if t.get("PER_SM"):
            # a persistent grid has PER_SM programs per SM whatever its BLOCK
            t["PER_SM"] *= 2
        elif "BLOCK" in t:
            t["BLOCK"] //= 2
        elif col:
            t["BLOCK_I"] //= 2
        elif "CHUNK" in t:
            t["CHUNK"] //= 2
        elif t.get("NOSPLIT"):
            return None  # a scan or an arg-reduction: its rows cannot be chunked
        else:
            # a row kernel has one program per row: split each row into chunks instead
            t["CHUNK"] = 4 * t["BLOCK_R"]
    elif move == "more_warps":
        t["num_warps"] *= 2
    elif move == "fewer_warps":
        t["num_warps"] //= 2
    elif move == "persistent":
        if t.get("PER_SM") != 0:
            return None  # not a pointwise tile, or already persistent
        t["PER_SM"] = 4  # enough resident programs per SM to keep loads in flight
    else:
        return None
    for k, v in t.items():
        if _clamp(k, v) is None:
            return None
    if "CHUNK" in t and t["BLOCK_R"] > t["CHUNK"]:
        return None  # a chunk holds whole tiles
    return t


def apply_gemm_move(move: str, tile: dict[str, Any]) -> dict[str, Any] | None:
    """A GEMM tile after ``move`` (see the module docstring), or None when it leaves the
    space (tile sides 16..256, BLOCK_K 16..256, 1..6 stages, 2..8 warps, the pipeline's
    shared memory within GEMM_SMEM_BYTES) or means nothing here (precision of fp16/bf16
    operands, or already tf32x3)."""
    t = dict(tile)
    longer = "BLOCK_M" if t["BLOCK_M"] >= t["BLOCK_N"] else "BLOCK_N"
    shorter = "BLOCK_N" if longer == "BLOCK_M" else "BLOCK_M"
    if move in ("smaller", "more_programs"):
        t[longer] //= 2
    elif move == "larger_tile":
        t[shorter] *= 2
    elif move in ("deeper_k", "wider"):
        t["BLOCK_K"] *= 2
    elif move == "more_stages":
        t["num_stages"] += 1
    elif move == "fewer_stages":
        t["num_stages"] -= 1
    elif move == "more_warps":
        t["num_warps"] *= 2
    elif move == "fewer_warps":
        t["num_warps"] //= 2
    elif move == "precision":
        if t.get("precision") != "ieee":
            return None
        t["precision"] = "tf32x3"
    else:
        return None
    if not 2 <= t["num_warps"] <= 8:
        return None  # fewer than 2 warps cannot feed an MMA tile well; more than 8 spill the epilogue
    for k, v in t.items():
        if k != "precision" and _clamp(k, v) is None:
            return None
    if gemm_smem_bytes(t) > GEMM_SMEM_BYTES:
        return None
    return t


def apply(move: str, rid: str | None, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Children of ``params`` for one planned move (one per region touched)."""
    if move == "graph":
        if params.get("graph"):
            return []
        child = copy.deepcopy(params)
        child["graph"] = True
        return [child]
    out = []
    for r in ([rid] if rid else list(params["lower"])):
        tile = apply_tile_move(move, params["tiles"][r])
        if tile is None:
            continue
        child = copy.deepcopy(params)
        child["tiles"][r] = tile
        out.append(child)
    return out
