"""Where each policy spends its expansions, on development seeds 0-59 at budget 100.

    python benchmarks/search_sim/diagnose.py

Per family and policy (MCTS at the defaults before best-first refinement; MCTS with UCT
below the root, i.e. ``best_first=False`` and the current refinement budget; MCTS at its
defaults; beam): the mean depth of the reported best candidate, the share of expansions
spent on the root (new first attempts), the median rank by reward (0 = best so far) of the
parents expanded, and the share of expansions whose parent was among the 4 best correct
candidates at the time of selection.
"""

import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernelpro.search.mcts import MCTS, Settings  # noqa: E402
from kernelpro.search.beam import Beam
from kernelpro.search.tree import ROOT
from search_sim.landscapes import FAMILIES, make_landscape
from search_sim.sim import SimRun



def diag(make, fam, seeds, budget=100):
    """Averages over seeds of the four statistics in the module docstring."""
    share_best, depth, root_exp, parent_rank = [], [], [], []
    for seed in seeds:
        run = SimRun(make(seed), make_landscape(fam, seed), budget, seed=seed)
        tot = roots = 0
        ranks = []
        while True:
            before = len(run.selections)
            # snapshot: rank of each correct candidate by reward
            cands = sorted([n for n in run.tree if n.id != ROOT and n.correct and n.reward is not None], key=lambda n: -n.reward)
            rank = {n.id: i for i, n in enumerate(cands)}
            if not run.step():
                break
            for pid in run.selections[before:]:
                tot += 1
                if pid == ROOT:
                    roots += 1
                else:
                    ranks.append(rank.get(pid, 99))
        b = run.tree.best()
        depth.append(b.depth if b else 0)
        root_exp.append(roots / max(tot, 1))
        parent_rank.append(statistics.median(ranks) if ranks else 0)
        share_best.append(sum(r < 4 for r in ranks) / max(len(ranks), 1))
    return (statistics.fmean(depth), statistics.fmean(root_exp), statistics.fmean(parent_rank), statistics.fmean(share_best))

POLICIES = {
    # the defaults before best-first refinement (commit e0043a3)
    "mcts_before": lambda s: MCTS(Settings(best_first=False, max_children=3, depth_decay=1),
                                  rng=random.Random(s)),
    "mcts_uct_below_root": lambda s: MCTS(Settings(best_first=False), rng=random.Random(s)),
    "mcts_best_first": lambda s: MCTS(rng=random.Random(s)),
    "beam": lambda s: Beam(rng=random.Random(s)),
}

if __name__ == "__main__":
    for fam in FAMILIES:
        for name, make in POLICIES.items():
            d, r, pr, sb = diag(make, fam, range(0, 60))
            print(f"{fam:13s} {name:20s} depth_of_best={d:.1f} root_share={r:.2f} "
                  f"median_parent_rank={pr:.1f} parents_in_top4={sb:.2f}")
