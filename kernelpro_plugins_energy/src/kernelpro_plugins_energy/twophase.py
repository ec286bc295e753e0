"""The two-phase search for energy at matched speed (search policy ``energy_two_phase``).

Phase 1 runs another registered search policy (``policy``, default ``greedy``, with
``policy_params``) for speed: while it decides, every candidate node's reward reads as its
log-speedup (``ln(speedup)``, the floor for failures), whatever the run's reward is. It
ends after ``phase1_budget`` candidates, or earlier when that policy has nothing left.

Phase 2 searches the neighbourhood of the speed winner for the least energy: the window
is ``(1 + max_slowdown) x`` the fastest correct candidate's time (re-read after every
evaluation, so a faster phase-2 candidate moves it); the speed winner is expanded first,
then the candidates inside the window in order of energy, least first (each at most
``expansions_per_node`` times; one the generator had nothing more for is closed). It ends
after ``phase2_budget`` candidates or when no candidate in the window is left open.

Every candidate of both phases is evaluated the same way: the evaluator times it and the
configured ``energy`` measurement measures it in the same evaluation, next to the
reference. The policy reads those numbers from the tree (``node.stats["runtime_ms"]`` and
``node.stats["measurements"]["energy"]``). The candidate the run keeps (``best.py``) is the
reward's choice: with ``reward: energy_at_matched_speed`` and the same ``slowdown`` as
``max_slowdown`` that is the least-energy candidate in the window (the report's
``Energy at matched speed`` section names both and says when they differ).
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from kernelpro.api import Reward, SearchPolicy, Tree, build_search_policy

from kernelpro_plugins_energy import matched
from kernelpro_plugins_energy.rewards import SPEED_SOURCES

NAME = "energy_two_phase"
#: the phase-1 view's scores stay inside (floor, -floor), as the built-in log_speedup's
SPEED_CAP = 9.0


def _at_least(minimum: int):
    def check(instance: Any, attribute: attrs.Attribute, value: int) -> None:
        if value < minimum:
            raise ValueError(f"{attribute.name}: expected an integer >= {minimum}, got {value!r}")

    return check


def _non_negative(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{attribute.name}: expected a number >= 0, got {value!r}")


def _source(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in SPEED_SOURCES:
        raise ValueError(f"{attribute.name}: expected one of {', '.join(SPEED_SOURCES)}, got {value!r}")


@attrs.frozen
class TwoPhaseSettings:
    #: the phase-1 search policy (any registered one but this) and its parameters
    policy: str = "greedy"
    policy_params: dict[str, Any] = attrs.field(factory=dict)
    #: candidates evaluated in phase 1 (speed); the run's budget should cover both phases
    phase1_budget: int = attrs.field(default=8, validator=_at_least(1))
    #: candidates evaluated in phase 2 (energy within the window)
    phase2_budget: int = attrs.field(default=4, validator=_at_least(1))
    #: the window: at most this much slower than the fastest correct candidate (2 %)
    max_slowdown: float = attrs.field(default=0.02, validator=_non_negative)
    #: phase-2 expansions of one candidate at most
    expansions_per_node: int = attrs.field(default=2, validator=_at_least(1))
    #: the time the window is on: the evaluator's timing or the energy loop's time per call
    speed_source: str = attrs.field(default="timing", validator=_source)

    def __attrs_post_init__(self) -> None:
        if self.policy == NAME:
            raise ValueError(f"policy: {NAME} cannot run itself as its phase-1 policy")
        # an unknown policy or a bad parameter is found when the config is validated
        build_search_policy(self.policy, self.policy_params, where="policy_params")


def node_measured(tree: Tree, speed_source: str) -> list[matched.Measured]:
    """The tree's correct candidates with a runtime, as :class:`matched.Measured`."""
    out = []
    for node in tree.candidates():
        if not node.correct:
            continue
        energy = (node.stats.get("measurements") or {}).get(matched.MEASUREMENT) or {}
        runtime = matched.runtime_from(node.stats.get("runtime_ms"), energy, speed_source)
        if runtime is None:
            continue
        out.append(matched.Measured(id=node.id, runtime_ms=runtime, **matched.energy_fields(energy)))
    return out


def speed_score(node: Any) -> float | None:
    """The phase-1 reward of a node: ``clamp(ln(speedup))`` if correct, the floor if not."""
    if node.kind == "root" or node.reward is None:
        return node.reward
    if not node.correct or not node.speedup or node.speedup <= 0:
        return Reward.floor
    return max(-SPEED_CAP, min(SPEED_CAP, math.log(node.speedup)))


class _SpeedView:
    """While open, every candidate node's ``reward`` is its speed score; the run's rewards
    are put back on exit (the inner policy's own statistics on the nodes are kept)."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.saved: dict[str, float | None] = {}

    def __enter__(self) -> Tree:
        for node in self.tree.candidates():
            self.saved[node.id] = node.reward
            node.reward = speed_score(node)
        return self.tree

    def __exit__(self, *exc: Any) -> None:
        for node_id, reward in self.saved.items():
            if node_id in self.tree:
                self.tree[node_id].reward = reward


class EnergyTwoPhase(SearchPolicy):
    name = NAME
    description = ("phase 1: the configured policy for speed; phase 2: least energy within max_slowdown of the "
                   "speed winner")
    Settings = TwoPhaseSettings

    def __init__(self, settings: TwoPhaseSettings | None = None, rng: Any = None) -> None:
        super().__init__(settings, rng)
        s: TwoPhaseSettings = self.settings
        self.inner = build_search_policy(s.policy, s.policy_params, seed=self.rng.randrange(2 ** 31),
                                         where="search.params.policy_params", name_where="search.params.policy")
        self.phase = 1
        self.phase1_evaluated: int | None = None  # candidates in the tree when phase 2 began
        self.speed_winner: str | None = None  # the fastest when phase 2 began
        self.phase2_ids: list[str] = []
        self.picks: dict[str, int] = {}  # phase-2 expansions per node
        self.closed: list[str] = []  # phase-2 nodes the generator had nothing more for

    # --- phase 1 -------------------------------------------------------------------------

    def _inner(self, method: str, tree: Tree, *args: Any) -> Any:
        with _SpeedView(tree):
            return getattr(self.inner, method)(tree, *args)

    def select(self, tree: Tree, n: int) -> list[str]:
        if self.phase == 1:
            left = self.settings.phase1_budget - len(tree.candidates())
            if left > 0:
                picks = self._inner("select", tree, min(n, left))
                if picks:
                    return list(picks)
            self._begin_phase2(tree)
        return self._select_phase2(tree, n)

    def _begin_phase2(self, tree: Tree) -> None:
        self.phase = 2
        self.phase1_evaluated = len(tree.candidates())
        winner = matched.speed_winner(node_measured(tree, self.settings.speed_source))
        self.speed_winner = winner.id if winner is not None else None

    # --- phase 2 -------------------------------------------------------------------------

    def ranked(self, tree: Tree) -> list[str]:
        """Phase-2 expansion order: the current speed winner first until it has been
        expanded once, then the candidates in the window, least energy first (those without
        an energy number after them, fastest first); open ones only."""
        s = self.settings
        cands = node_measured(tree, s.speed_source)
        inside = matched.within(cands, s.max_slowdown)
        order = [c.id for c in matched.energy_order(inside)]
        order += [c.id for c in sorted(inside, key=lambda c: c.runtime_ms) if c.id not in order]
        winner = matched.speed_winner(cands)
        if winner is not None and not self.picks.get(winner.id):
            order = [winner.id] + [i for i in order if i != winner.id]
        return [i for i in order if i not in self.closed and self.picks.get(i, 0) < s.expansions_per_node]

    def _select_phase2(self, tree: Tree, n: int) -> list[str]:
        left = self.settings.phase2_budget - len(self.phase2_ids)
        picks: list[str] = []
        while left > 0 and len(picks) < n:
            order = self.ranked(tree)
            if not order:
                break
            picks.append(order[0])
            self.picks[order[0]] = self.picks.get(order[0], 0) + 1
            left -= 1
        return picks

    # --- bookkeeping ---------------------------------------------------------------------

    def update(self, tree: Tree, node_id: str) -> None:
        node = tree[node_id]
        node.stats["two_phase"] = self.phase
        if self.phase == 1:
            self._inner("update", tree, node_id)
        else:
            self.phase2_ids.append(node_id)

    def release(self, tree: Tree, node_id: str) -> None:
        if self.phase == 1:
            self._inner("release", tree, node_id)
        elif node_id not in self.closed:
            self.closed.append(node_id)

    def failed(self, tree: Tree, node_id: str) -> None:
        # a generator error is not the node's fault; in phase 2 the expansion still counts
        if self.phase == 1:
            self._inner("failed", tree, node_id)

    def state(self) -> dict[str, Any]:
        return {"phase": self.phase, "phase1_evaluated": self.phase1_evaluated, "speed_winner": self.speed_winner,
                "phase2_ids": list(self.phase2_ids), "picks": dict(self.picks), "closed": list(self.closed),
                "max_slowdown": self.settings.max_slowdown, "speed_source": self.settings.speed_source,
                "inner": self.inner.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        self.phase = int(state.get("phase", 1))
        self.phase1_evaluated = state.get("phase1_evaluated")
        self.speed_winner = state.get("speed_winner")
        self.phase2_ids = list(state.get("phase2_ids", []))
        self.picks = {str(k): int(v) for k, v in (state.get("picks") or {}).items()}
        self.closed = list(state.get("closed", []))
        self.inner.load_state(state.get("inner") or {})
