"""The simulated loop: a generator proposing programs near a parent, the evaluator, and a
driver that runs a real ``kernelpro.search`` policy on a ``kernelpro.search.tree.Tree``
the way the optimization loop does (select a batch, expand, add evaluated children,
``update``; ``release`` when an expansion produced nothing).
"""

from __future__ import annotations

import math
import random
from typing import Any

import attrs

from kernelpro.api import Reward, SearchPolicy
from kernelpro.rewards.speed import LogSpeedupSettings
from kernelpro.search.tree import Tree

from search_sim.landscapes import DIMS, LEVELS, Landscape, Point

# the built-in reward (kernelpro.rewards.speed): log speedup clamped to +-cap; failures
# score the floor
REWARD_CLAMP = LogSpeedupSettings().cap
NAIVE_LEVELS = 3  # a first attempt sets each knob to one of its 3 lowest levels
STARTS = ("naive", "uniform")


def sim_reward(verdict: str, speedup: float | None) -> float:
    if verdict != "correct" or not speedup or speedup <= 0:
        return Reward.floor
    return max(-REWARD_CLAMP, min(REWARD_CLAMP, math.log(speedup)))


@attrs.define
class SimGenerator:
    """Proposes programs. From the reference: a strategy drawn at random, written plainly
    (``start="naive"``: every knob among its ``NAIVE_LEVELS`` lowest levels: small tiles, no
    vectorization, no unrolling) or anywhere (``start="uniform"``: a fresh rewrite may land
    near an optimum at once). From a program: a local edit of one or two of its knobs, same
    strategy. With probability ``guidance`` it picks the
    best of ``looks`` random edits by a noisy reading of the true speedup, standing in for a
    generator that follows profiler findings (right more often than not, never sure)."""

    landscape: Landscape
    rng: random.Random
    guidance: float = 0.5
    looks: int = 3
    hint_noise: float = 0.3  # log-scale noise on the generator's own estimate
    start: str = "naive"  # naive | uniform: where first attempts land in knob space
    tried: set = attrs.field(factory=set)

    def propose(self, parent_point: Point | None) -> Point | None:
        for _ in range(30):
            if parent_point is None:
                strategy = self.rng.randrange(self.landscape.n_strategies)
                top = NAIVE_LEVELS if self.start == "naive" else LEVELS
                x = (strategy, *(self.rng.randrange(top) for _ in range(DIMS)))
            elif self.rng.random() < self.guidance:
                edits = [self._edit(parent_point) for _ in range(self.looks)]
                x = max(
                    edits,
                    key=lambda p: self.landscape.true_log_speedup(p)
                    + self.rng.gauss(0.0, self.hint_noise),
                )
            else:
                x = self._edit(parent_point)
            if x not in self.tried:
                self.tried.add(x)
                return x
        return None  # nothing new near this parent

    def _edit(self, x: Point) -> Point:
        """Change one knob (70%) or two, mostly by one level; the strategy stays."""
        out = list(x)
        n_knobs = 1 if self.rng.random() < 0.7 else 2
        for dim in self.rng.sample(range(1, DIMS + 1), n_knobs):
            step = self.rng.choice((-1, 1)) * (1 if self.rng.random() < 0.75 else self.rng.randint(2, 3))
            out[dim] = min(LEVELS - 1, max(0, out[dim] + step))
        return tuple(out)


@attrs.frozen
class SearchOutcome:
    policy: str
    family: str
    seed: int
    evaluated: int
    correct: int
    reported_true_speedup: float  # true speedup of the candidate the run reports as best
    best_true_speedup: float  # best true speedup among everything evaluated
    selections: tuple[str, ...]  # the parents picked, in order
    tree: Any = attrs.field(eq=False, repr=False, default=None)


@attrs.define
class SimRun:
    """One simulated optimization run; :meth:`step` does one select/expand/update round."""

    policy: SearchPolicy
    landscape: Landscape
    budget: int
    parallel: int = 4
    seed: int = 0
    guidance: float = 0.5
    start: str = "naive"
    tree: Tree = attrs.field(factory=Tree.new)
    points: dict = attrs.field(factory=dict)  # node id -> program
    selections: list = attrs.field(factory=list)
    gen: SimGenerator | None = None
    evaluated: int = 0
    finished: bool = False

    def __attrs_post_init__(self) -> None:
        if self.gen is None:
            self.gen = SimGenerator(
                self.landscape, random.Random(f"gen:{self.seed}"), guidance=self.guidance,
                start=self.start,
            )

    def step(self) -> bool:
        """One batch. Returns False when the run is over (budget spent or search ended)."""
        if self.finished or self.evaluated >= self.budget:
            self.finished = True
            return False
        ids = self.policy.select(self.tree, min(self.parallel, self.budget - self.evaluated))
        if not ids:
            self.finished = True
            return False
        self.selections.extend(ids)
        drafts = [(pid, self.gen.propose(self.points.get(pid))) for pid in ids]
        for pid, x in drafts:
            if x is None:
                self.policy.release(self.tree, pid)
                continue
            outcome = self.landscape.evaluate(x)
            node_id = f"c{len(self.tree)}"
            self.tree.add(
                node_id,
                pid,
                reward=sim_reward(outcome.verdict, outcome.speedup),
                correct=outcome.verdict == "correct",
                verdict=outcome.verdict,
                speedup=outcome.speedup,
                description=f"knobs {x}",
            )
            self.points[node_id] = x
            self.evaluated += 1
            self.policy.update(self.tree, node_id)
        return True

    def run(self, max_batches: int = 100_000) -> "SearchOutcome":
        for _ in range(max_batches):
            if not self.step():
                break
        return self.outcome()

    def outcome(self, keep_tree: bool = False) -> "SearchOutcome":
        true_of = {nid: self.landscape.evaluate(x).true_speedup for nid, x in self.points.items()}
        best = self.tree.best()
        # a run whose best candidate measured slower than the reference keeps the reference
        if best is None or (best.speedup or 0.0) <= 1.0:
            reported = 1.0
        else:
            reported = true_of[best.id] or 1.0
        trues = [t for t in true_of.values() if t is not None]
        return SearchOutcome(
            policy=self.policy.name,
            family=self.landscape.family,
            seed=self.seed,
            evaluated=self.evaluated,
            correct=sum(1 for n in self.tree.candidates() if n.correct),
            reported_true_speedup=reported,
            best_true_speedup=max(trues, default=1.0),
            selections=tuple(self.selections),
            tree=self.tree if keep_tree else None,
        )


def run_search(
    policy: SearchPolicy,
    landscape: Landscape,
    budget: int,
    parallel: int = 4,
    seed: int = 0,
    guidance: float = 0.5,
    start: str = "naive",
    keep_tree: bool = False,
) -> SearchOutcome:
    """Run ``policy`` until ``budget`` candidates were evaluated or it ends the search."""
    run = SimRun(policy, landscape, budget, parallel=parallel, seed=seed, guidance=guidance,
                 start=start)
    run.run()
    return run.outcome(keep_tree=keep_tree)
