#!/usr/bin/env python3
"""Write KernelBench problems from a JSONL suite (e.g. ../shared/kernelbench/level1_dev.jsonl)
to problem files that `kernelpro optimize` reads.

    python scripts/kernelbench_problem.py SUITE.jsonl ID [ID ...] -o DIR
"""

import argparse
import json
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("suite", type=Path)
    ap.add_argument("ids", type=int, nargs="+")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    rows = {json.loads(line)["problem_id"]: json.loads(line) for line in args.suite.read_text().splitlines() if line.strip()}
    args.out.mkdir(parents=True, exist_ok=True)
    for pid in args.ids:
        if pid not in rows:
            print(f"error: problem {pid} is not in {args.suite}", file=sys.stderr)
            return 2
        row = rows[pid]
        path = args.out / f"level{row['level']}_{row['name']}.py"
        path.write_text(row["code"])
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
