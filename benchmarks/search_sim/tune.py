"""Random search over MCTS settings on the development seeds (0-199 at most).

    python benchmarks/search_sim/tune.py [--trials N] [--seeds N] [--first-seed S] [--budget B]
                                         [--seed S] [--around JSON]

Scores each sampled configuration by the geometric mean, over every family and seed, of the
true speedup of the reported best candidate, and prints the best few. This is how the
defaults in ``kernelpro.search.mcts.Settings`` were chosen; ``run.py`` reports on other
seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernelpro.search.mcts import MCTS, Settings  # noqa: E402

from search_sim.landscapes import FAMILIES, make_landscape  # noqa: E402
from search_sim.sim import run_search  # noqa: E402

SPACE = {
    "exploration": lambda r: round(r.uniform(0.02, 0.5), 3),
    "root_exploration": lambda r: round(r.uniform(0.1, 0.6), 3),
    "strategy_trials": lambda r: r.randint(0, 6),
    "max_backup": lambda r: round(r.uniform(0.5, 1.0), 2),
    "widening_k": lambda r: round(r.uniform(0.5, 2.0), 2),
    "widening_alpha": lambda r: round(r.uniform(0.2, 0.6), 2),
    "root_max_children": lambda r: r.randint(4, 12),
    "root_widening_k": lambda r: round(r.uniform(1.0, 3.0), 2),
    "max_children": lambda r: r.randint(2, 6),
    "depth_decay": lambda r: r.randint(0, 1),
    "min_children": lambda r: r.randint(1, 3),
    "stale_expansions": lambda r: r.randint(2, 8),
    "max_consecutive_failures": lambda r: r.randint(2, 5),
    "virtual_loss": lambda r: round(r.uniform(0.5, 3.0), 2),
}


def score(settings: Settings, seeds: list[int], budget: int) -> float:
    logs = []
    for family in FAMILIES:
        for seed in seeds:
            out = run_search(MCTS(settings, rng=random.Random(seed)), make_landscape(family, seed),
                             budget, seed=seed)
            logs.append(math.log(out.reported_true_speedup))
    return math.exp(statistics.fmean(logs))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0, help="seed of the configuration sampler")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--around", type=json.loads, default=None,
                    help="JSON settings: perturb two of them per trial instead of sampling all")
    args = ap.parse_args()
    if args.first_seed + args.seeds > 200:
        ap.error("the development set is seeds 0-199")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    rng = random.Random(args.seed)
    start = args.around or {}
    scored = [(score(Settings(**start), seeds, args.budget), "start", start)]
    print(f"start: {scored[0][0]:.3f}", flush=True)
    for trial in range(args.trials):
        if args.around is None:
            params = {k: f(rng) for k, f in SPACE.items()}
        else:
            params = dict(args.around)
            for key in rng.sample(sorted(SPACE), 2):
                params[key] = SPACE[key](rng)
        value = score(Settings(**params), seeds, args.budget)
        scored.append((value, f"trial {trial}", params))
        print(f"trial {trial}: {value:.3f} {params}", flush=True)
    scored.sort(key=lambda t: -t[0])
    print("best:")
    for value, name, params in scored[:5]:
        print(f"  {value:.3f} {name} {params}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
