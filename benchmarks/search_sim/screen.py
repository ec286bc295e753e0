"""Screen MCTS setting overrides against beam and greedy on the development seeds.

    python benchmarks/search_sim/screen.py BUDGETS FIRST_SEED END_SEED JSON_VARIANTS

e.g. ``screen.py 100,200 0 200 '{"default": {}, "no_bf": {"best_first": false}}'``: every
variant (a name and ``kernelpro.search.mcts.Settings`` overrides) on every family and seed
``FIRST_SEED .. END_SEED-1`` (development seeds only: below 200), with two worker processes.
Prints per budget and variant the geometric mean of reported true speedups, and against beam
and greedy the ratio of geometric means, the Wilcoxon signed-rank p over all pairs and the
per-family ratios in ``FAMILIES`` order. This is how the defaults' structural switches were
screened; ``run.py`` reports on held-out seeds.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernelpro.search.beam import Beam  # noqa: E402
from kernelpro.search.greedy import Greedy  # noqa: E402
from kernelpro.search.mcts import MCTS, Settings  # noqa: E402

from search_sim.landscapes import FAMILIES, make_landscape  # noqa: E402
from search_sim.sim import run_search  # noqa: E402
from search_sim.stats import wilcoxon_signed_rank  # noqa: E402

DEV_SEEDS_END = 200  # seeds 0-199 are the development set


def _log_score(task: tuple[str, dict, str, int, int]) -> float:
    kind, params, family, seed, budget = task
    if kind == "beam":
        policy = Beam(rng=random.Random(seed))
    elif kind == "greedy":
        policy = Greedy(rng=random.Random(seed))
    else:
        policy = MCTS(Settings(**params), rng=random.Random(seed))
    out = run_search(policy, make_landscape(family, seed), budget, seed=seed)
    return math.log(out.reported_true_speedup)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    budgets = [int(b) for b in argv[0].split(",")]
    seeds = list(range(int(argv[1]), int(argv[2])))
    if not seeds or seeds[-1] >= DEV_SEEDS_END:
        sys.exit(f"screen: seeds must lie in the development set 0-{DEV_SEEDS_END - 1}")
    variants = json.loads(argv[3])
    n = len(seeds)
    with multiprocessing.Pool(2) as pool:
        def scores(kind: str, params: dict, budget: int) -> list[float]:
            tasks = [(kind, params, f, s, budget) for f in FAMILIES for s in seeds]
            return pool.map(_log_score, tasks, chunksize=8)

        for budget in budgets:
            base = {k: scores(k, {}, budget) for k in ("beam", "greedy")}
            for name, params in variants.items():
                mine = scores("mcts", params, budget)
                cells = [f"b{budget} {name:24s} {math.exp(statistics.fmean(mine)):.3f}"]
                for k, other in base.items():
                    d = [x - y for x, y in zip(mine, other)]
                    fams = " ".join(f"{math.exp(statistics.fmean(d[i * n:(i + 1) * n])):.3f}"
                                    for i in range(len(FAMILIES)))
                    p = wilcoxon_signed_rank(mine, other).p_value
                    cells.append(f"vs {k} {math.exp(statistics.fmean(d)):.3f} p={p:.2g} [{fams}]")
                print("  ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
