"""Compare search policies on simulated landscapes at equal budget.

    python benchmarks/search_sim/run.py [--seeds N] [--first-seed S] [--budget B]
                                        [--parallel P] [--families a,b] [--no-ablations]
                                        [--start naive|uniform] [--jobs J] [--json OUT]

Runs the real policy classes (``kernelpro.search.mcts.MCTS``, ``kernelpro.search.greedy.Greedy``,
``kernelpro.search.beam.Beam``, default settings) and MCTS with each adaptation switched
off, on ``N`` landscapes of every family (seeds ``S .. S+N-1``), each policy with the same
budget of evaluated candidates and the same landscape (outcomes are deterministic per
program, so pairs differ only by the policy). The score of a run is the true speedup of
the candidate it reports as best (the best *measured*; 1.0 when nothing measured faster
than the reference). Paired comparisons use the Wilcoxon signed-rank test on log scores.

Seeds 0-199 are the development set the MCTS defaults were tuned on; report on others
(the default first seed is 1000; the recorded results use 2000-2199, 3000-3199 and
4000-4199, see RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernelpro.search.beam import Beam  # noqa: E402
from kernelpro.search.mcts import MCTS, Settings  # noqa: E402

try:
    from kernelpro.search.greedy import Greedy  # noqa: E402
except ImportError as exc:  # pragma: no cover - only before core ships greedy
    sys.exit(f"search_sim: cannot import kernelpro.search.greedy.Greedy ({exc}); install kernelpro-core")

from search_sim.landscapes import FAMILIES, make_landscape  # noqa: E402
from search_sim.sim import STARTS, run_search  # noqa: E402
from search_sim.stats import wilcoxon_signed_rank  # noqa: E402

BASELINES: dict[str, Callable[[int], Any]] = {
    "mcts": lambda seed: MCTS(rng=random.Random(seed)),
    "greedy": lambda seed: Greedy(rng=random.Random(seed)),
    "beam": lambda seed: Beam(rng=random.Random(seed)),
}

# each adaptation switched off, everything else at its default
ABLATIONS: dict[str, dict[str, Any]] = {
    "no_best_first": {"best_first": False},
    "no_widening": {"widening": False},
    # root and refinements alike: every node gets the refinement budget, k and constant
    "no_asymmetric_narrow": {"asymmetric": False},
    # ... or every node gets the root's
    "no_asymmetric_wide": {"asymmetric": False, "max_children": 8, "widening_k": 2.0,
                           "exploration": 0.3},
    "no_strategy_trials": {"strategy_trials": 0},
    "no_log_reward": {"log_reward": False},
    "no_wall": {"correctness_wall": False},
    "no_pruning": {"pruning": False},
    "no_dive": {"dive": False},
    "no_virtual_loss": {"virtual_loss": 0.0},
    "mean_backup": {"max_backup": 0.0},
}


def make_policy(name: str, seed: int) -> Any:
    if name in BASELINES:
        return BASELINES[name](seed)
    return MCTS(Settings(**ABLATIONS[name]), rng=random.Random(seed))


def _one_landscape(task: tuple[str, int, list[str], int, int, str]) -> tuple[str, int, dict[str, dict]]:
    """Every policy on one landscape; the unit of work for --jobs."""
    family, seed, names, budget, parallel, start = task
    landscape = make_landscape(family, seed)
    optimum = landscape.optimum()
    rows = {}
    for name in names:
        out = run_search(make_policy(name, seed), landscape, budget, parallel=parallel, seed=seed,
                         start=start)
        rows[name] = {
            "seed": seed,
            "reported_speedup": out.reported_true_speedup,
            "best_found_speedup": out.best_true_speedup,
            "optimum_speedup": optimum,
            "evaluated": out.evaluated,
            "correct": out.correct,
        }
    return family, seed, rows


def run_all(names: list[str], families: list[str], seeds: list[int], budget: int, parallel: int,
            start: str = "naive", jobs: int = 1) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """results[family][policy] = one dict per seed, in seed order."""
    tasks = [(f, s, names, budget, parallel, start) for f in families for s in seeds]
    if jobs > 1:
        with multiprocessing.Pool(jobs) as pool:
            done = pool.map(_one_landscape, tasks, chunksize=4)
    else:
        done = [_one_landscape(t) for t in tasks]
    results: dict[str, dict[str, list[dict[str, Any]]]] = {f: {n: [] for n in names} for f in families}
    for family, _seed, rows in done:  # tasks are in (family, seed) order
        for name, row in rows.items():
            results[family][name].append(row)
    return results


def _logs(rows: list[dict[str, Any]]) -> list[float]:
    return [math.log(r["reported_speedup"]) for r in rows]


def gmean(rows: list[dict[str, Any]], key: str = "reported_speedup") -> float:
    return math.exp(statistics.fmean(math.log(r[key]) for r in rows))


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Paired comparison of policy a against b on log scores."""
    la, lb = _logs(a), _logs(b)
    diffs = [x - y for x, y in zip(la, lb)]
    test = wilcoxon_signed_rank(la, lb)
    return {
        "ratio_gmean": math.exp(statistics.fmean(diffs)),
        "wins": sum(d > 1e-12 for d in diffs),
        "ties": sum(abs(d) <= 1e-12 for d in diffs),
        "losses": sum(d < -1e-12 for d in diffs),
        "p_value": test.p_value,
        "test": f"wilcoxon signed-rank ({test.method}, n={test.n})",
    }


def pooled(results, name: str) -> list[dict[str, Any]]:
    return [row for fam in results.values() for row in fam[name]]


def table(results, names: list[str], reference: str, title: str) -> list[str]:
    families = list(results)
    lines = [f"### {title}", ""]
    head = "| policy | " + " | ".join(families) + " | all families |"
    lines += [head, "|" + "---|" * (len(families) + 2)]
    for name in names:
        cells = [f"{gmean(results[f][name]):.3f}" for f in families]
        cells.append(f"{gmean(pooled(results, name)):.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", f"Paired against `{reference}` (ratio of geometric means of reported speedups; "
                  f"wins/ties/losses of `{reference}`; two-sided Wilcoxon signed-rank p):", ""]
    lines += ["| comparison | " + " | ".join(families) + " | all families |",
              "|" + "---|" * (len(families) + 2)]
    for name in names:
        if name == reference:
            continue
        cells = []
        for f in families + [None]:
            a = results[f][reference] if f else pooled(results, reference)
            b = results[f][name] if f else pooled(results, name)
            c = compare(a, b)
            cells.append(f"{c['ratio_gmean']:.3f}x, {c['wins']}/{c['ties']}/{c['losses']}, "
                         f"p={c['p_value']:.2g}")
        lines.append(f"| {reference} vs {name} | " + " | ".join(cells) + " |")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=100, help="landscapes per family")
    ap.add_argument("--first-seed", type=int, default=1000,
                    help="first landscape seed (0-199 were used to tune the defaults)")
    ap.add_argument("--budget", type=int, default=100, help="evaluated candidates per run")
    ap.add_argument("--parallel", type=int, default=4, help="parents selected per batch")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--no-ablations", action="store_true")
    ap.add_argument("--start", choices=STARTS, default="naive",
                    help="where first attempts land: plain low knobs (naive) or anywhere (uniform)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--json", type=Path, help="write every run's numbers here")
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    for f in families:
        if f not in FAMILIES:
            ap.error(f"unknown family {f!r}; known: {', '.join(FAMILIES)}")
    if args.seeds < 1 or args.budget < 1 or args.parallel < 1:
        ap.error("--seeds, --budget and --parallel must be positive")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))

    names = list(BASELINES) + ([] if args.no_ablations else list(ABLATIONS))
    started = time.time()
    results = run_all(names, families, seeds, args.budget, args.parallel, args.start, args.jobs)
    elapsed = time.time() - started

    header = [
        f"search_sim: {len(families)} families x {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}), "
        f"budget {args.budget} evaluations, {args.parallel} parents per batch, "
        f"first attempts {args.start}, "
        f"{elapsed:.0f} s on {platform.processor() or platform.machine()} "
        f"(python {platform.python_version()})",
        "",
        "Geometric mean over seeds of the true speedup of the candidate each run reports as best.",
        "",
    ]
    lines = header + table(results, list(BASELINES), "mcts", "Policies at equal budget")
    opt = {f: statistics.fmean(r["optimum_speedup"] for r in results[f]["mcts"]) for f in families}
    lines += ["Mean grid optimum per family: " + ", ".join(f"{f} {v:.2f}x" for f, v in opt.items()), ""]
    if not args.no_ablations:
        lines += table(results, ["mcts", *ABLATIONS], "mcts", "Ablations: MCTS with one adaptation off")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({
            "command": " ".join(["python", "benchmarks/search_sim/run.py", *(argv or sys.argv[1:])]),
            "seeds": seeds, "budget": args.budget, "parallel": args.parallel, "start": args.start,
            "mcts_defaults": attrs.asdict(Settings()),
            "ablations": ABLATIONS,
            "results": results,
        }, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
