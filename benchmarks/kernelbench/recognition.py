#!/usr/bin/env python3
"""How much of the KernelBench development subset the expert generator's recognizer can
write kernels for: per level, the share of problems with at least one kernel region, and
why the others have none.

    python benchmarks/kernelbench/recognition.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1].parent / "shared" / "kernelbench"


def measure(levels=(1, 2, 3)) -> dict:
    from kernelpro_plugins_expert.recognize import recognize

    out: dict = {}
    for level in levels:
        path = SHARED / f"level{level}_dev.jsonl"
        if not path.exists():
            continue
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        per = []
        for r in rows:
            try:
                rec = recognize(r["code"])
                ok, why = bool(rec.ok and rec.regions), (rec.reason if not rec.ok else
                                                         ("" if rec.regions else "no region"))
                kinds = sorted({g.kind for g in rec.regions}) if rec.ok else []
            except Exception as exc:  # a problem the recognizer fails on counts as not recognized
                ok, why, kinds = False, f"{type(exc).__name__}: {str(exc)[:120]}", []
            per.append({"problem_id": r["problem_id"], "name": r["name"], "recognized": ok,
                        "kinds": kinds, "why_not": why.splitlines()[0][:160] if why else ""})
        out[f"level{level}"] = {"problems": len(per), "recognized": sum(p["recognized"] for p in per),
                                "share": sum(p["recognized"] for p in per) / len(per) if per else 0.0,
                                "per_problem": per}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not SHARED.exists():
        print(f"error: {SHARED} is absent", file=sys.stderr)
        return 2
    result = measure()
    for level, r in result.items():
        print(f"{level}: {r['recognized']} of {r['problems']} problems have a kernel region ({r['share']:.0%})")
        for p in r["per_problem"]:
            if not p["recognized"]:
                print(f"    {p['name']}: {p['why_not']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
