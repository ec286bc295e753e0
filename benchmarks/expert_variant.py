#!/usr/bin/env python3
"""Write one expert candidate for a problem whatever the generator's gates say, for an A/B on
the GPU with ``kernelpro eval``. Run on the CPU.

    python benchmarks/expert_variant.py SUITE.jsonl ID [--level N] [--fold] [--channels-last] -o DIR

SUITE.jsonl: rows of ``benchmarks/kernelbench/split.py --write`` (``level``, ``problem_id``,
``name``, ``code``). Writes ``DIR/L{level}_{id}.py`` (the problem) and
``DIR/L{level}_{id}_{variant}.py`` (the candidate: every recognized region lowered with its
default tile; ``--fold``: the convolutions' biases added by the kernels after them;
``--channels-last``: the library convolutions channels-last), and prints the candidate's
description. Then, on the GPU:

    kernelpro eval DIR/L2_44.py DIR/L2_44_fold_cl.py --device cuda --json -c benchmarks/expert_h200.yaml

Exit 2 when the problem is not in the suite or the variant does not apply (no convolution
to fold, no recognized region).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("problem_id", type=int)
    ap.add_argument("--level", type=int, default=None)
    ap.add_argument("--fold", action="store_true")
    ap.add_argument("--channels-last", dest="channels_last", action="store_true")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args(argv)

    from kernelpro.problem import parse_problem
    from kernelpro_plugins_expert.generator import ExpertGenerator
    from kernelpro_plugins_expert.render import (default_params, describe, fold_layout_params, layout_params,
                                                 render_candidate)

    try:
        rows = [json.loads(line) for line in args.suite.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the suite {args.suite}: {exc}", file=sys.stderr)
        return 2
    found = [r for r in rows if r.get("problem_id") == args.problem_id
             and (args.level is None or r.get("level") == args.level)]
    if len(found) != 1:
        print(f"error: {len(found)} rows of {args.suite} have problem id {args.problem_id}"
              + (" (name one with --level)" if len(found) > 1 else ""), file=sys.stderr)
        return 2
    row = found[0]
    key = f"L{row.get('level')}_{row['problem_id']}"
    try:
        problem = parse_problem(str(row["code"]), name=key)
    except Exception as exc:  # a row without code, or code that is not a KernelBench problem
        print(f"error: {key}: not a problem: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    gen = ExpertGenerator()
    rec = gen.recognition(problem.source, problem.digest)
    if not rec.ok:
        print(f"error: {key}: no kernel template fits: {rec.reason}", file=sys.stderr)
        return 2
    own = rec
    params = default_params(rec)
    if args.fold:
        folded = gen.folded(problem.source, problem.digest)
        if folded is None:
            print(f"error: {key}: no convolution bias to fold", file=sys.stderr)
            return 2
        own, params = folded, {**default_params(folded), "fold": True}
    if args.channels_last:
        # the fold's candidate indexes the folded regions; the layout's paths come from the
        # unfolded recognition's convolutions
        made = fold_layout_params(rec, params) if args.fold else layout_params(rec, params)
        if made is None:
            print(f"error: {key}: no library convolution to run channels-last", file=sys.stderr)
            return 2
        params = made
    if not params["lower"] and not params.get("layout"):
        print(f"error: {key}: nothing to lower", file=sys.stderr)
        return 2
    variant = "_".join(["fold"] * args.fold + ["cl"] * args.channels_last) or "default"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{key}.py").write_text(row["code"])
    path = args.out / f"{key}_{variant}.py"
    path.write_text(render_candidate(problem.source, own, params))
    print(f"{path}: {describe(own, params)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
