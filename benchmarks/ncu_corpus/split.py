#!/usr/bin/env python3
"""Draw the corpus's tuning / held-out split (``split.json`` beside this file).

    python benchmarks/ncu_corpus/split.py [--check]

Thresholds are tuned on the tuning half only; the held-out half is measured once, after
tuning, so that what is reported was not what was tuned on. The split is drawn over
*families*, not kernels, so that nothing of a held-out operation is seen while tuning:

* a workload's large and small size are one family (``<name>@large``, ``<name>@small``);
* an operation's PyTorch, torch.compile (``tc_``) and template (``tpl_``) variants are one
  family;
* operations that run the same PyTorch kernel are one family: softmax and cross-entropy
  (``cunn_SoftMaxForward`` / ``softmax_warp_forward``), index_select and embedding
  (``vectorized_gather_kernel``), row sum and row argmax (``reduce_kernel<512, 1>``); the
  matmuls of every dtype are one family.

Families are stratified by the bottleneck class the classifier gave the family's kernels
(the most common class other than ``too_little_work``, recorded in the file as drawn, so a
later classifier change does not move the split). Within each stratum, in name order, the
families are shuffled with ``random.Random(SEED)`` and dealt alternately, each next family
to the half with fewer kernels so far (ties to the tuning half).

``--check`` recomputes the split from the recorded strata and fails if the file differs.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLIT = HERE / "split.json"
SEED = 20261202

#: base workload (no size, no tc_/tpl_ prefix) -> family, where it is not the workload itself
MERGED = {
    "cross_entropy": "softmax_rows",
    "embedding": "index_select_rows",
    "argmax_rows": "sum_rows",
    "matmul_tf32": "matmul_fp32",
    "matmul_bf16": "matmul_fp32",
}


def family(workload: str) -> str:
    """``tc_softmax_rows@large`` -> ``softmax_rows``."""
    base = workload.split("@", 1)[0]
    for prefix in ("tc_", "tpl_"):
        if base.startswith(prefix):
            base = base[len(prefix):]
    return MERGED.get(base, base)


def strata(rows: list[dict]) -> dict[str, str]:
    """Family -> its bottleneck class (most common other than too_little_work; ties by name)."""
    by_family: dict[str, Counter] = {}
    for r in rows:
        by_family.setdefault(family(r["workload"]), Counter())[r["bottleneck"]] += 1
    out = {}
    for fam, counts in by_family.items():
        real = {k: v for k, v in counts.items() if k != "too_little_work"}
        out[fam] = min(real, key=lambda k: (-real[k], k)) if real else "too_little_work"
    return out


def deal(stratum_of: dict[str, str], kernels_of: dict[str, int]) -> dict[str, str]:
    rng = random.Random(SEED)
    size = {"tuning": 0, "held_out": 0}
    half: dict[str, str] = {}
    for stratum in sorted(set(stratum_of.values())):
        fams = sorted(f for f, s in stratum_of.items() if s == stratum)
        rng.shuffle(fams)
        for f in fams:
            side = "tuning" if size["tuning"] <= size["held_out"] else "held_out"
            half[f] = side
            size[side] += kernels_of[f]
    return half


def load() -> dict:
    return json.loads(SPLIT.read_text())


def half_of(workload: str, split: dict | None = None) -> str:
    """``tuning`` or ``held_out`` for a corpus workload; KeyError for one the split lacks."""
    split = split or load()
    return split["families"][family(workload)]["half"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="recompute from the recorded strata; fail on a difference")
    args = ap.parse_args()
    if args.check:
        rec = load()
        stratum_of = {f: v["stratum"] for f, v in rec["families"].items()}
        kernels_of = {f: v["kernels"] for f, v in rec["families"].items()}
        again = deal(stratum_of, kernels_of)
        bad = [f for f, h in again.items() if rec["families"][f]["half"] != h]
        if bad:
            print(f"error: split.json differs from its recomputation for {', '.join(sorted(bad))}", file=sys.stderr)
            return 1
        print("split.json matches its recomputation")
        return 0
    sys.path.insert(0, str(HERE))
    from run import REPO, analyze  # the classifier's classes as drawn

    rows = analyze(REPO / "tests" / "ncu" / "corpus" / "h200", 10.0)
    stratum_of = strata(rows)
    kernels_of = Counter(family(r["workload"]) for r in rows)
    half = deal(stratum_of, dict(kernels_of))
    workloads: dict[str, list[str]] = {}
    for r in rows:
        workloads.setdefault(family(r["workload"]), [])
        if r["workload"] not in workloads[family(r["workload"])]:
            workloads[family(r["workload"])].append(r["workload"])
    data = {
        "seed": SEED,
        "drawn_by": "benchmarks/ncu_corpus/split.py (see its docstring)",
        "families": {f: {"half": half[f], "stratum": stratum_of[f], "kernels": kernels_of[f],
                         "workloads": sorted(workloads[f])} for f in sorted(half)},
    }
    SPLIT.write_text(json.dumps(data, indent=1) + "\n")
    for side in ("tuning", "held_out"):
        fams = [f for f in sorted(half) if half[f] == side]
        print(f"{side}: {sum(kernels_of[f] for f in fams)} kernels, {len(fams)} families: {', '.join(fams)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
