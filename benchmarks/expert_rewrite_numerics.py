"""How far the expert generator's GEMM-sum rewrite lands from the exact value, next to the
fp32 reference's own error, on a KernelBench problem (CPU, fp32; the exact value in fp64).

    python benchmarks/expert_rewrite_numerics.py [SAMPLE_JSONL] [--level 2 --problem-id 14] [--trials 2]

SAMPLE_JSONL defaults to build/kernelbench_sample/sample.jsonl (written by
``benchmarks/expert_h200.py prepare``). For each trial (the problem's own inputs, seeded)
it prints, for the fp32 reference and the rendered rewrite candidate, the largest error
against the fp64 value and how many outputs lie outside the evaluator's default fp32
tolerance (atol = rtol = 1e-4), against the exact value and against the reference, and
outside KernelBench's tolerance (1e-2) against the reference; then the evaluator's own
verdicts on the rewrite: its check against the fp32 reference, and its second opinion
against the fp64 value (``compare.compare_to_exact``, reference_error_factor 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
TOL = {"float32": (1e-4, 1e-4)}  # the evaluator's default


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sample", nargs="?", default=str(REPO / "build" / "kernelbench_sample" / "sample.jsonl"))
    ap.add_argument("--level", type=int, default=2)
    ap.add_argument("--problem-id", type=int, default=14)
    ap.add_argument("--trials", type=int, default=2)
    args = ap.parse_args(argv)

    from kernelpro.evaluate.compare import compare, compare_to_exact
    from kernelpro.evaluate.loader import load_module
    from kernelpro_plugins_expert.recognize import recognize
    from kernelpro_plugins_expert.render import render_candidate, rewrite_params

    path = Path(args.sample)
    if not path.exists():
        print(f"error: {path} is absent (run `python benchmarks/expert_h200.py prepare`)", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    code = next((r["code"] for r in rows if r["level"] == args.level and int(r["problem_id"]) == args.problem_id), None)
    if code is None:
        print(f"error: level {args.level} #{args.problem_id} is not in {path}", file=sys.stderr)
        return 2
    rec = recognize(code)
    params = rewrite_params(rec)
    if params is None:
        print(f"error: no GEMM-sum rewrite for this problem ({rec.summary()})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        cand = Path(tmp) / "rewrite.py"
        cand.write_text(render_candidate(code, rec, params))
        mod = load_module(cand, "kernelpro_rewrite_numerics")
        torch.manual_seed(0)
        ref = mod.Model(*mod.get_init_inputs())
        torch.manual_seed(0)
        new = mod.ModelNew(*mod.get_init_inputs())
        exact_model = mod.Model(*mod.get_init_inputs()).double()
        exact_model.load_state_dict(ref.state_dict())
        print(f"level {args.level} #{args.problem_id}: {rec.summary()}")
        with torch.no_grad():
            for trial in range(args.trials):
                torch.manual_seed(1 + trial)
                inputs = mod.get_inputs()
                want = ref(*inputs)
                exact = exact_model(*[x.double() for x in inputs])
                got = new(*inputs)
                second = compare_to_exact(got, want, exact, TOL, 2.0)
                for name, value in (("reference fp32", want), ("rewrite", got)):
                    err = (value.double() - exact).abs()
                    off_exact = int((err > 1e-4 + 1e-4 * exact.abs()).sum())
                    off_ref = int(((value - want).abs() > 1e-4 + 1e-4 * want.abs()).sum())
                    off_ref_kb = int(((value - want).abs() > 1e-2 + 1e-2 * want.abs()).sum())
                    print(f"trial {trial} {name:15s} max err vs fp64 {err.max().item():.3g}  "
                          f"outside 1e-4 vs fp64: {off_exact} of {exact.numel()}  vs the reference: {off_ref}  "
                          f"outside 1e-2 vs the reference: {off_ref_kb}  "
                          f"(|exact| from {exact.abs().min().item():.3g} to {exact.abs().max().item():.3g})")
                print(f"trial {trial} the evaluator's check: {'pass' if compare(got, want, TOL).ok else 'fail'}; "
                      f"its fp64 second opinion: {'pass' if second.ok else 'fail: ' + second.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
