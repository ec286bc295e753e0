"""Where one evaluation's seconds went, from ``kernelpro eval --json`` output:

    kernelpro eval PROBLEM CANDIDATE --json > eval.json
    python benchmarks/timing/eval_stages.py eval.json

Prints the verdict and times, then the judge's stages (``stage_<name>_s``), the parts of the
reference-outputs stage (``ref_outputs_<part>_s``) and what the judge did with the
reference's outputs (kept on the device, computed again at correctness)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def summary(result: dict) -> list[str]:
    notes = (result.get("measurements") or {}).get("evaluator") or {}
    wall = (result.get("result") or {}).get("wall_s")
    lines = [f"verdict {result.get('verdict')} {result.get('reason') or ''}".rstrip(),
             f"candidate {result.get('runtime_ms')} ms, eager {result.get('baseline_ms')} ms, "
             f"torch.compile {result.get('compiled_baseline_ms')} ms, judge wall {wall} s"]
    stages = {k[len("stage_"):-2]: v for k, v in notes.items() if k.startswith("stage_")}
    lines.append("stages: " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
    parts = {k[len("ref_outputs_"):-2]: v for k, v in notes.items() if k.startswith("ref_outputs_")}
    lines.append("reference outputs: " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()))
    kept = {k: notes[k] for k in ("reference_outputs_on_device", "reference_outputs_kept",
                                  "reference_outputs_recomputed", "ref_recompute_s") if k in notes}
    lines.append("outputs: " + ", ".join(f"{k} {v:g}" for k, v in kept.items()))
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: eval_stages.py EVAL_JSON", file=sys.stderr)
        return 2
    try:
        result = json.loads(Path(argv[0]).read_text())
    except (OSError, ValueError) as exc:
        print(f"eval_stages.py: {argv[0]}: {exc}", file=sys.stderr)
        return 2
    print("\n".join(summary(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
