#!/usr/bin/env python3
"""Does every candidate the expert generator would write for a KernelBench problem build
for the H200? Run on the CPU, no GPU needed.

    python benchmarks/kernelbench/compile_sweep.py [--levels 1,2,3] [--jobs 2] [--json OUT]
                                                   [--only L1_23,L2_40] [--limit 40] [--with-validation]

For each problem of ``../shared/kernelbench`` (the development subset) the generator's
first candidates (``root_proposals``, in its order) and, from its default and Triton-GEMM
parameters, one child of every tile move (``--limit`` candidates a problem at most) are rendered,
imported, built and run on meta tensors (no memory; real CPU tensors where the problem's own
model cannot run on meta ones) with each Triton launch replaced by a compile for sm_90 at the launch's real
argument types (``kernelpro_plugins_expert.offline``). A candidate fails when any step
raises, or when a kernel needs more shared memory than an H200 block may have (the launch
would fail with "out of resources"). CUDA-graph variants are the same kernels captured and
are not built apart. Each problem runs in its own process with a time limit.

The validation samples (``split.json``: ``validation``, ``validation_2``) are counted, never
listed: their problems are run only to report, so this prints their aggregate unless
``--with-validation`` is given.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHARED = REPO.parent / "shared" / "kernelbench"
#: the most shared memory one block may use on sm_90 (227 KiB)
SM90_SHARED_BYTES = 232_448
MOVES = ("wider", "smaller", "larger_tile", "more_programs", "persistent", "fewer_warps", "more_warps",
         "more_stages", "fewer_stages", "deeper_k", "precision")


def variants(rec, limit: int = 40, folded=None):
    """(label, params, recognition) of the candidates to build: the root's in the
    generator's order, then one child per move, ``limit`` at most (a model of 200 regions
    has 1,500 root proposals: the generator writes its first few). ``folded``: the
    recognition with the convolutions' biases split off, which fold candidates index."""
    from kernelpro_plugins_expert import moves
    from kernelpro_plugins_expert.generator import ExpertGenerator
    from kernelpro_plugins_expert.render import default_params, describe, gemm_params

    seen, out = set(), []

    def add(params):
        key = json.dumps(params, sort_keys=True)
        if key in seen or not params["lower"]:
            return
        seen.add(key)
        own = folded if params.get("fold") else rec
        assert own is not None
        out.append((describe(own, params), params, own))

    starts = [default_params(rec)] + [p for p in (gemm_params(rec),) if p is not None]
    if folded is not None:  # the fold candidates' tiles move like the default candidate's
        starts.append({**default_params(folded), "fold": True})
    roots = ExpertGenerator().root_proposals(rec, cuda=False, folded=folded)
    for params in roots[: max(1, limit - len(starts) * len(MOVES))]:
        add({**params, "graph": False})
    for start in starts:
        if not start["lower"]:
            continue
        for move in MOVES:
            for child in moves.apply(move, None, start)[:1]:
                add(child)
    return out[:limit]


def _device_for(code: str, workdir: Path) -> str:
    """"meta" where the problem's own model builds and runs on meta tensors; else "cpu" (real
    tensors: a model whose constructor reads values, Swin V2's ``.item()``)."""
    import torch

    from kernelpro.evaluate.loader import load_module

    path = workdir / "problem.py"
    path.write_text(code)
    try:
        mod = load_module(path, "sweep_problem")
        with torch.device("meta"):
            model = mod.Model(*mod.get_init_inputs())
            inputs = mod.get_inputs()
        with torch.no_grad():
            model(*inputs)
    except Exception:  # noqa: BLE001 - any failure on meta tensors means real ones
        return "cpu"
    return "meta"


def sweep_problem(code: str, workdir: Path, limit: int = 40) -> dict:
    """Build every variant of one problem; what failed, how many launches were built and how
    many distinct kernels compiled."""
    import torch

    from kernelpro.evaluate.loader import load_module
    from kernelpro_plugins_expert.offline import compile_instead_of_launch
    from kernelpro_plugins_expert.generator import fold_recognition
    from kernelpro_plugins_expert.recognize import recognize
    from kernelpro_plugins_expert.render import is_triton, render_candidate

    rec = recognize(code)
    if not rec.ok or not rec.regions:
        return {"recognized": False, "variants": 0, "kernels": 0, "compiles": 0, "failures": []}
    folded = fold_recognition(code, rec)  # the generator's fold candidates, where it offers them
    compiles: dict = {}  # a model's layers launch the same kernel at the same types many times
    device = _device_for(code, workdir)
    failures, kernels = [], 0
    built = variants(rec, limit, folded)
    for k, (label, params, own) in enumerate(built):
        stage = "render"
        compiled: list[tuple[str, int]] = []
        try:
            path = workdir / f"v{k}.py"
            path.write_text(render_candidate(code, own, params))
            stage = "import"
            mod = load_module(path, f"sweep_v{k}")
            compile_instead_of_launch(mod, lambda name, c, *_: compiled.append((name, c.metadata.shared)),
                                      cache=compiles)
            stage = "build"
            with torch.device(device):
                torch.manual_seed(0)
                model = mod.ModelNew(*mod.get_init_inputs())
                inputs = mod.get_inputs()
            stage = "forward"
            with torch.no_grad():
                model(*inputs)
                if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
                    model.eval()  # the evaluator's mode: the batch norm's other kernel
                    model(*inputs)
            over = [f"{n}: {s} bytes" for n, s in compiled if s > SM90_SHARED_BYTES]
            if over:
                stage = "resources"
                raise RuntimeError(f"shared memory past sm_90's {SM90_SHARED_BYTES} bytes a block: "
                                   + ", ".join(over))
            if not compiled and is_triton(own, params):  # a rewrite in PyTorch launches none
                stage = "forward"
                raise RuntimeError("no Triton kernel was launched")
        except Exception as exc:  # noqa: BLE001 - each failure is the sweep's result
            msg = f"{type(exc).__name__}: {exc}".strip().splitlines()
            failures.append({"variant": label, "stage": stage, "error": (msg[0] if msg else "")[:300]})
        kernels += len(compiled)
    return {"recognized": True, "variants": len(built), "kernels": kernels, "compiles": len(compiles),
            "device": device, "failures": failures}


def _child(level: int, problem_id: int, limit: int) -> int:
    """In a fresh process: one problem, one JSON line on stdout."""
    import tempfile

    rows = [json.loads(x) for x in (SHARED / f"level{level}_dev.jsonl").read_text().splitlines() if x.strip()]
    row = next(r for r in rows if int(r["problem_id"]) == problem_id)
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)
        result = sweep_problem(row["code"], Path(tmp), limit)
    print(json.dumps(result))
    return 0


def run_one(level: int, problem_id: int, timeout_s: float, limit: int) -> dict:
    start = time.monotonic()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", f"{level}:{problem_id}:{limit}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout_s:.0f} s", "seconds": time.monotonic() - start}
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {proc.returncode}: {tail[:300]}", "seconds": time.monotonic() - start}
    return {**json.loads(lines[-1]), "seconds": time.monotonic() - start}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--only", default="", help="problems as L<level>_<id>, comma-separated")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=40, help="candidates a problem at most")
    ap.add_argument("--timeout-s", type=float, default=900.0)
    ap.add_argument("--json", type=Path, help="every problem's result (validation problems by id only)")
    ap.add_argument("--with-validation", action="store_true", help="list validation problems' failures too")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        level, pid, limit = args.child.split(":")
        return _child(int(level), int(pid), int(limit))
    if not SHARED.exists():
        print(f"error: {SHARED} is absent", file=sys.stderr)
        return 2
    split = json.loads((HERE / "split.json").read_text())
    validation = {(p["level"], p["problem_id"]) for part in ("validation", "validation_2")
                  for p in split.get(part, {}).get("problems", [])}
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    todo = []
    for level in [int(x) for x in args.levels.split(",")]:
        path = SHARED / f"level{level}_dev.jsonl"
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                if not only or f"L{level}_{r['problem_id']}" in only:
                    todo.append((level, int(r["problem_id"]), r["name"]))
    results = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run_one, lv, pid, args.timeout_s, args.limit): (lv, pid, name) for lv, pid, name in todo}
        for fut in concurrent.futures.as_completed(futures):
            lv, pid, name = futures[fut]
            res = {"level": lv, "problem_id": pid, "name": name, "validation": (lv, pid) in validation,
                   **fut.result()}
            results.append(res)
            if not res["validation"] or args.with_validation:
                bad = res.get("error") or "; ".join(f"{f['stage']}: {f['error']}" for f in res.get("failures", []))
                print(f"L{lv}_{pid} {name}: {res.get('variants', 0)} candidates, {res.get('kernels', 0)} launches, "
                      f"{res.get('compiles', 0)} kernels compiled, "
                      f"{res['seconds']:.0f} s" + (f"  FAILED {bad[:400]}" if bad else ""), flush=True)
    results.sort(key=lambda r: (r["level"], r["problem_id"]))
    print()
    print("| level | sample | problems | recognized | candidates built | candidates failed | problems with a failure |")
    print("|---|---|---|---|---|---|---|")
    for level in sorted({r["level"] for r in results}):
        for sample, in_val in (("tuning and rest", False), ("validation", True)):
            rs = [r for r in results if r["level"] == level and r["validation"] == in_val]
            if not rs:
                continue
            rec = [r for r in rs if r.get("recognized")]
            built = sum(r.get("variants", 0) for r in rs)
            failed = sum(len(r.get("failures", [])) for r in rs)
            bad = sum(1 for r in rs if r.get("error") or r.get("failures"))
            print(f"| {level} | {sample} | {len(rs)} | {len(rec)} | {built} | {failed} | {bad} |")
    if args.json:
        out = [r if (not r["validation"] or args.with_validation) else
               {k: r.get(k) for k in ("level", "problem_id", "validation", "recognized", "variants", "kernels",
                                       "compiles")}
               | {"failed": len(r.get("failures", [])) + bool(r.get("error"))} for r in results]
        args.json.write_text(json.dumps(out, indent=1))
    return 1 if any(r.get("error") or r.get("failures") for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
