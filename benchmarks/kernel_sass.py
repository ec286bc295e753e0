"""Static instruction counts of the expert's windowed and full-reduction kernels.

    python benchmarks/kernel_sass.py [SUITE.jsonl] [--kinds pool,reduce_all,conv] [--block N ...] [--json]
                                     [--sass-dir DIR] [--vec]

For every problem of the suite (default: the bench sample, ``build/kernelbench_sample/
sample.jsonl``) whose recognition has a region of those kinds (pooling and depthwise
convolution: ``pool``; a loss reduced to one value: ``reduce_all``; a dense convolution as
an implicit GEMM: ``conv``, in both fp32 precisions), renders the root candidate (for
``conv`` the Triton alternative), runs its forward on meta tensors (no memory, no GPU) with each Triton launch
replaced by a compile for sm_90 at the launch's real argument types, disassembles the
cubin (nvdisasm or cuobjdump) and prints per kernel: SASS instructions (in its loops when
it has any), integer and memory shares, integer division sites (32-bit reciprocal set-ups
and 64-bit division calls) and instructions per element: a windowed kernel runs its
straight-line body once for BLOCK / threads outputs per thread; a full reduction runs its
loop body once per BLOCK / threads elements per thread. These are static counts, not
timings: they say where a kernel's issue slots go, which a GPU run then confirms or not.
A kernel with branches (the windowed kernels check bounds only in the tiles that need it)
is counted whole, every path together; each row also gives ``fallthrough``: the
instructions executed along the path that takes no conditional branch (unconditional ones
followed) up to the first unpredicated EXIT. In the windowed kernels compiled here that is
the path of a tile without bounds checks; ``--sass-dir`` writes each listing, to check it
(the first conditional branch skips that tile's loads).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "build" / "kernelbench_sample" / "sample.jsonl"


def fallthrough_count(instructions: list) -> int:
    """Instructions executed along the path that takes no conditional branch (see the
    module docstring), over a kernel's parsed instructions (kernelpro_plugins_sass)."""
    index = {ins.address: k for k, ins in enumerate(instructions)}
    i, n = 0, 0
    while i < len(instructions) and n < 100_000:
        ins = instructions[i]
        n += 1
        if ins.opcode == "EXIT" and ins.predicate is None:
            break
        if ins.opcode == "BRA" and ins.predicate is None and ins.branch_target in index:
            i = index[ins.branch_target]
        else:
            i += 1
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", nargs="?", default=str(SAMPLE))
    ap.add_argument("--json", action="store_true", help="one JSON line per kernel")
    ap.add_argument("--kinds", default="pool,reduce_all", help="region kinds, comma-separated (pool, reduce_all, conv)")
    ap.add_argument("--sass-dir", default=None, help="also write each kernel's SASS listing here")
    ap.add_argument("--vec", action="store_true",
                    help="also the vector form of windowed regions that have one (BLOCK 512 at 4 warps, 1024 at 4)")
    ap.add_argument("--block", type=int, action="append", default=[],
                    help="also compile with this BLOCK (outputs per program; repeatable)")
    args = ap.parse_args(argv)
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as exc:
        print(f"error: {exc}: torch and triton are needed", file=sys.stderr)
        return 2
    from kernelpro.evaluate.loader import load_module
    from kernelpro_plugins_expert.offline import compile_instead_of_launch
    from kernelpro_plugins_expert.recognize import recognize
    from kernelpro_plugins_expert.render import default_params, gemm_params, render_candidate
    from kernelpro_plugins_sass.binaries import disassemble, sass_listing
    from kernelpro_plugins_sass.toolchain import find_tool
    from kernelpro_plugins_sass.features import kernel_features

    path = Path(args.suite)
    if not path.is_file():
        print(f"error: {path} is absent (benchmarks/expert_h200.py prepare writes the sample)", file=sys.stderr)
        return 2
    if find_tool("nvdisasm") is None and find_tool("cuobjdump") is None:
        print("error: neither nvdisasm nor cuobjdump was found (pip install nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 2
    rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="kernelpro_kernel_sass_"))
    kinds = {k.strip() for k in args.kinds.split(",") if k.strip()}

    def recorder(problem: str, tile: dict, prefix: str):
        def on_compiled(kernel: str, compiled, num_warps: int, constexprs: dict) -> None:
            if not kernel.startswith(prefix):
                return  # another region's kernel
            cubin = work / f"{problem}_{len(rows)}.cubin"
            cubin.write_bytes(compiled.asm["cubin"])
            if args.sass_dir:
                label = "_".join(f"{k}{v}" for k, v in tile.items() if k in ("BLOCK", "BLOCK_M", "BLOCK_N", "precision", "VEC"))
                out = Path(args.sass_dir) / f"{problem}_{label}_w{num_warps}.sass"
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(sass_listing(cubin)[0])
            for k in disassemble(cubin).kernels:
                fallthrough = fallthrough_count(list(k.instructions))
                f = kernel_features(k)
                looped = f.instructions_in_loops > 0
                counted = f.instructions_in_loops if looped else f.instructions
                classes = f.class_counts_in_loops if looped else f.class_counts
                n = max(1, counted)
                # windowed: outputs per thread; full reduction: elements per thread per loop
                # step; a GEMM tile has no such count
                per_thread = tile["BLOCK"] / (32 * num_warps) if "BLOCK" in tile else None
                rows.append({
                    "problem": problem, "tile": tile, "index64": bool(constexprs.get("INDEX64")),
                    "in_loops": looped, "instructions": counted,
                    "integer_share": round(classes.get("integer", 0) / n, 3),
                    "memory_share": round(classes.get("global_memory", 0) / n, 3),
                    "division_setups": f.division_setups,
                    "division_calls": sum(1 for i in k.instructions if i.opcode == "CALL"),
                    "tensor_core_ops": f.warp_mma + f.warpgroup_mma,
                    "k": constexprs.get("K"),
                    "instructions_per_element": round(counted / per_thread, 1) if per_thread else None,
                    "fallthrough": fallthrough,
                    "fallthrough_per_element": (round(fallthrough / per_thread, 1)
                                                if per_thread else None)})
        return on_compiled

    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        source = row["code"]
        rec = recognize(source)
        if not rec.ok or not any(r.kind in kinds for r in rec.regions):
            continue
        base = default_params(rec)
        name = f"L{row['level']}_{row['problem_id']}"
        ids = [r for r in base["lower"] if "BLOCK" in base["tiles"][r]
               and rec.regions[int(r[1:])].kind in kinds]
        convs = [f"r{i}" for i, r in enumerate(rec.regions) if r.kind == "conv" and "conv" in kinds]
        variants = []
        if ids:
            rid = ids[0]
            variants += [(rid, {**base, "tiles": {**base["tiles"], rid: {**base["tiles"][rid], "BLOCK": block}}})
                         for block in [base["tiles"][rid]["BLOCK"]] + args.block]
        if ids and args.vec:
            from kernelpro_plugins_expert.render import vec_eligible, vec_tile  # code after bench pass 5
        if ids and args.vec and vec_eligible(rec.regions[int(ids[0][1:])]):
            variants += [(ids[0], {**base, "tiles": {**base["tiles"], ids[0]: tile}})
                         for tile in (vec_tile(), {**vec_tile(), "BLOCK": 1024})]
        if convs:  # the implicit-GEMM convolution of the Triton alternative, both precisions
            variants += [(convs[0], gemm_params(rec, precision)) for precision in ("tf32x3", "ieee")]
        for k, (rid, params) in enumerate(variants):
            cand = work / f"{name}_{k}.py"
            cand.write_text(render_candidate(source, rec, params))
            mod = load_module(cand, f"ws_{name}_{k}")
            compile_instead_of_launch(mod, recorder(name, params["tiles"][rid], f"_kp_{rid}_"))
            with torch.device("meta"):
                torch.manual_seed(0)
                model = mod.ModelNew(*mod.get_init_inputs())
                inputs = mod.get_inputs()
            with torch.no_grad():
                model(*inputs)
    for r in rows:
        if args.json:
            print(json.dumps(r))
        else:
            t = r["tile"]
            tile = (f"BLOCK={t['BLOCK']:<5d}" + (" vec" if t.get("VEC") else "    ") if "BLOCK" in t else
                    f"{t['BLOCK_M']}x{t['BLOCK_N']}x{t['BLOCK_K']} {t.get('precision', '')} K={r['k']}")
            print(f"{r['problem']:8s} {tile} warps={t['num_warps']} "
                  f"index64={r['index64']!s:5s} instructions{' in loops' if r['in_loops'] else ''}="
                  f"{r['instructions']} integer={r['integer_share']:.0%} global_mem={r['memory_share']:.0%} "
                  f"div_setups={r['division_setups']} calls={r['division_calls']} "
                  + (f"per_element={r['instructions_per_element']}" if r["instructions_per_element"] is not None
                     else f"tensor_core_ops={r['tensor_core_ops']}")
                  + f" fallthrough={r['fallthrough']} ({r['fallthrough_per_element']} per element)")
    if not rows:
        print(f"no kernels of kinds {sorted(kinds)} in the suite")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
