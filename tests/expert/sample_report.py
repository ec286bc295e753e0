"""What the expert generator makes of the H200 benchmark's sample (no GPU needed).

Reads ``build/kernelbench_sample/sample.jsonl`` (written by ``benchmarks/expert_h200.py
prepare``; the problems are read at run time, never copied into the repository) and
prints, per problem, the recognized regions and the root candidates the generator
proposes for a CUDA device, in order::

    python tests/expert/sample_report.py [--n 4]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "build" / "kernelbench_sample" / "sample.jsonl"


def report(path: Path, n: int) -> list[dict]:
    from kernelpro.api import GenerationRequest
    from kernelpro_plugins_expert.generator import ExpertGenerator
    from kernelpro.problem import parse_problem

    rows = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        p = json.loads(line)
        gen = ExpertGenerator()
        problem = parse_problem(p["code"], name=p["name"])
        rec = gen.recognition(problem.source, problem.digest)
        drafts = gen.generate(GenerationRequest(problem=problem, n=n, device="cuda", parent=None, tried=()))
        rows.append({"level": p["level"], "problem_id": p["problem_id"], "name": p["name"],
                     "recognition": rec.summary(), "root": [d.description for d in drafts]})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4, help="root candidates to list per problem")
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    args = parser.parse_args()
    if not args.sample.exists():
        print(f"error: {args.sample} is absent: run `python benchmarks/expert_h200.py prepare` first", file=sys.stderr)
        return 2
    for row in report(args.sample, args.n):
        print(f"L{row['level']} #{row['problem_id']} {row['name']}\n    {row['recognition']}")
        for d in row["root"]:
            print(f"      - {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
