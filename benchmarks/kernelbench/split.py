#!/usr/bin/env python3
"""The KernelBench development subset (../shared/kernelbench) split into a tuning sample and a
validation sample, drawn once with fixed seeds and committed as ``split.json`` (level,
problem id and name only: the problems are read from the shared data, never copied).

* ``tuning``: the 10 + 10 level-1 / level-2 problems the expert generator's passes were run
  and changed on (``benchmarks/expert_h200.py``'s sample: seed 20261130). Study these freely.
* ``validation``: drawn on 2026-12-02, before any change made for the issue that asked for
  it, from the problems outside the tuning sample with seed 20261202: 20 of level 1, 20 of
  level 2, 10 of level 3. Run only to report. When a report on it has been used to decide a
  change, draw a new one (``--draw`` with a new seed, and say so in the record).
* ``validation_2``: drawn on 2026-12-05 with seed 20261205 from the level-1 and level-2
  problems in neither sample above (20 of each: all that is left), after the first
  validation sample's level-1 and level-2 reports had been used to decide a change (the
  expert generator's channels-last convolutions). Its level-3 problems stay the first
  sample's, which has not been run. Run only to report, as the first.

    python benchmarks/kernelbench/split.py            # check split.json against the data
    python benchmarks/kernelbench/split.py --draw     # write split.json (only to draw anew)
    python benchmarks/kernelbench/split.py --write validation --levels 1 -o build/validation_sample/level1.jsonl

``--write SAMPLE`` writes that sample's problems, with their code from the shared data, as a
JSONL suite for ``kernelpro bench`` into an ignored folder (the device tool carries it).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHARED = REPO.parent / "shared" / "kernelbench"
SPLIT = HERE / "split.json"
TUNING_SEED, TUNING_PER_LEVEL = 20261130, {1: 10, 2: 10}
VALIDATION_SEED, VALIDATION_PER_LEVEL = 20261202, {1: 20, 2: 20, 3: 10}
VALIDATION_2_SEED, VALIDATION_2_PER_LEVEL = 20261205, {1: 20, 2: 20}
SAMPLES = ("tuning", "validation", "validation_2")


def load(level: int) -> list[dict]:
    path = SHARED / f"level{level}_dev.jsonl"
    if not path.exists():
        raise SystemExit(f"error: {path} is absent")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: int(r["problem_id"]))


def with_code(picks: list[dict]) -> list[dict]:
    """The shared data's rows (code included) of ``picks`` (level, problem_id), in their order."""
    by_level: dict[int, dict[int, dict]] = {}
    rows = []
    for p in picks:
        level = int(p["level"])
        if level not in by_level:
            by_level[level] = {int(r["problem_id"]): r for r in load(level)}
        row = by_level[level].get(int(p["problem_id"]))
        if row is None:
            raise SystemExit(f"error: level {level} problem {p['problem_id']} is not in {SHARED}")
        rows.append(row)
    return rows


def write_suite(rows: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for r in rows:
        print(f"level {r['level']} #{r['problem_id']} {r['name']}")
    print(f"{len(rows)} problems -> {out}")


def draw() -> dict:
    # the tuning sample exactly as benchmarks/expert_h200.py drew it: one generator over levels 1, 2
    rng = random.Random(TUNING_SEED)
    tuning: dict[int, list[dict]] = {}
    for level, n in TUNING_PER_LEVEL.items():
        rows = load(level)
        tuning[level] = [rows[i] for i in sorted(rng.sample(range(len(rows)), n))]
    def outside(seed: int, per_level: dict[int, int], *earlier: dict[int, list[dict]]) -> dict[int, list[dict]]:
        """n problems per level, drawn with ``seed`` from those in none of the ``earlier`` samples."""
        rng = random.Random(seed)
        sample: dict[int, list[dict]] = {}
        for level, n in per_level.items():
            taken = {r["problem_id"] for e in earlier for r in e.get(level, [])}
            rest = [r for r in load(level) if r["problem_id"] not in taken]
            sample[level] = [rest[i] for i in sorted(rng.sample(range(len(rest)), min(n, len(rest))))]
        return sample

    validation = outside(VALIDATION_SEED, VALIDATION_PER_LEVEL, tuning)
    validation_2 = outside(VALIDATION_2_SEED, VALIDATION_2_PER_LEVEL, tuning, validation)

    def ids(sample: dict[int, list[dict]]) -> list[dict]:
        return [{"level": lv, "problem_id": r["problem_id"], "name": r["name"]} for lv in sorted(sample)
                for r in sample[lv]]

    return {"tuning": {"seed": TUNING_SEED, "problems": ids(tuning)},
            "validation": {"seed": VALIDATION_SEED, "drawn": "2026-12-02", "problems": ids(validation)},
            "validation_2": {"seed": VALIDATION_2_SEED, "drawn": "2026-12-05",
                             "why": "the first sample's level-1 and level-2 reports were used to decide a change "
                                    "(channels-last convolutions); level 3 stays the first sample's",
                             "problems": ids(validation_2)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draw", action="store_true", help="write split.json from the seeds")
    ap.add_argument("--write", choices=list(SAMPLES), help="write this sample as a JSONL suite")
    ap.add_argument("--levels", help="with --write: comma-separated levels (default: all)")
    ap.add_argument("-o", "--out", type=Path, help="with --write: the suite file")
    args = ap.parse_args()
    if args.write:
        if args.out is None:
            ap.error("--write needs -o FILE")
        levels = {int(v) for v in args.levels.split(",")} if args.levels else None
        picks = [p for p in json.loads(SPLIT.read_text())[args.write]["problems"]
                 if levels is None or p["level"] in levels]
        write_suite(with_code(picks), args.out)
        return 0
    fresh = draw()
    if args.draw:
        SPLIT.write_text(json.dumps(fresh, indent=1) + "\n")
        print(f"wrote {SPLIT}")
        return 0
    kept = json.loads(SPLIT.read_text())
    if any(kept.get(part, {}).get("problems") != fresh[part]["problems"] for part in SAMPLES):
        print("error: split.json does not match the seeds over this data", file=sys.stderr)
        return 1
    for part in SAMPLES:
        by = {}
        for p in kept[part]["problems"]:
            by[p["level"]] = by.get(p["level"], 0) + 1
        print(part, ", ".join(f"level {lv}: {n}" for lv, n in sorted(by.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
