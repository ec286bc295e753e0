"""Beam search over the candidate tree (search policy ``beam``).

The search advances in rounds. Round 0 expands the root ``width * branching`` times. Each
later round takes the ``width`` best correct candidates generated in the previous round
(by reward) and expands each of them ``branching`` times. If a round produced no correct
candidate, its beam is kept and expanded again; a node is expanded at most
``max_children`` times in total, and the search ends when the beam is empty. With
``elitist`` on, members of the previous beam compete with their children for a place.

Repairs (:mod:`kernelpro.search.repair`): up to ``repair_width`` failed children of the
round (those of the best parents first) join the next round's beam for one expansion each,
which asks the generator to fix them; a repair is a child of the failed node and competes
for the following beam like any other child. A failed repair is repaired again, up to
``repair_attempts`` in a row.

The beam, the expansions still to hand out and those in flight are kept in :meth:`state`;
each node it has accounted for carries ``stats["beam_round"]``.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import attrs

from kernelpro.api import SearchPolicy
from kernelpro.hookspecs import hookimpl
from kernelpro.search.repair import anchor, repair_targets
from kernelpro.search.tree import ROOT, Node, Tree

_pos = attrs.validators.gt(0)


@attrs.frozen
class Settings:
    width: int = attrs.field(default=4, validator=_pos)  # candidates kept per round
    branching: int = attrs.field(default=2, validator=_pos)  # expansions per member per round
    max_children: int = attrs.field(default=8, validator=_pos)  # most expansions of one node
    elitist: bool = False  # previous members compete with their children
    # failed children repaired per round, and repairs of one failure in a row (0: off)
    repair_width: int = attrs.field(default=2, validator=attrs.validators.ge(0))
    repair_attempts: int = attrs.field(default=2, validator=attrs.validators.ge(0))


class Beam(SearchPolicy):
    name = "beam"
    Settings = Settings
    description = "beam search: expand the best few candidates of each round"

    def __init__(self, settings: Any = None, rng: random.Random | None = None) -> None:
        super().__init__(settings, rng)
        self._round = -1  # -1: not started
        self._beam: list[str] = []
        self._quota: dict[str, int] = {}  # expansions still to hand out this round
        self._in_flight: dict[str, int] = {}  # handed out, not yet resolved
        self._produced: list[str] = []  # children generated this round

    # --- protocol ------------------------------------------------------------------------

    def select(self, tree: Tree, n: int) -> list[str]:
        """Hand out up to ``n`` of this round's expansions, members in beam order.

        Returns [] while the round's last expansions are in flight (call again after
        they resolve) and when the beam is empty (the search is over)."""
        self._sync(tree)
        if self._round < 0:
            self._start_round(tree, [ROOT], self.settings.width * self.settings.branching)
        elif not self._open_quota() and not self._outstanding():
            self._next_round(tree)
        picked: list[str] = []
        while len(picked) < n and self._open_quota():
            for member in self._beam:
                if len(picked) >= n:
                    break
                if self._quota.get(member, 0) > 0:
                    self._quota[member] -= 1
                    self._in_flight[member] = self._in_flight.get(member, 0) + 1
                    picked.append(member)
        return picked

    def update(self, tree: Tree, node_id: str) -> None:
        self._account(tree[node_id])

    def failed(self, tree: Tree, node_id: str) -> None:
        """The generator failed on an expansion: it goes back to the round's quota (the loop
        stops the run after too many failures in a row)."""
        if self._in_flight.get(node_id, 0) > 0:
            self._in_flight[node_id] -= 1
            self._quota[node_id] = self._quota.get(node_id, 0) + 1

    def release(self, tree: Tree, node_id: str) -> None:
        """An expansion produced nothing; it still counts against ``max_children``."""
        if self._in_flight.get(node_id, 0) > 0:
            self._in_flight[node_id] -= 1
        node = tree[node_id]
        node.stats["beam_empty"] = int(node.stats.get("beam_empty", 0)) + 1

    def state(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {
            "version": 1,
            "round": self._round,
            "beam": list(self._beam),
            "quota": dict(self._quota),
            "in_flight": dict(self._in_flight),
            "produced": list(self._produced),
            "rng": [version, list(internal), gauss],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self._round = int(state.get("round", -1))
        self._beam = list(state.get("beam", []))
        self._quota = {k: int(v) for k, v in state.get("quota", {}).items()}
        self._produced = list(state.get("produced", []))
        # after a restart nothing is in flight: lost expansions go back to the quota
        for member, count in state.get("in_flight", {}).items():
            self._quota[member] = self._quota.get(member, 0) + int(count)
        self._in_flight = {}
        if state.get("rng"):
            version, internal, gauss = state["rng"]
            self.rng.setstate((version, tuple(internal), gauss))

    # --- rounds --------------------------------------------------------------------------

    def _open_quota(self) -> bool:
        return any(v > 0 for v in self._quota.values())

    def _outstanding(self) -> bool:
        return any(v > 0 for v in self._in_flight.values())

    def _start_round(self, tree: Tree, beam: list[str], per_member: int) -> None:
        self._round += 1
        self._beam = beam
        self._quota = {
            m: max(0, min(per_member, self.settings.max_children - self._expansions(tree[m])))
            for m in beam
        }
        self._in_flight = {}
        self._produced = []

    def _expansions(self, node: Node) -> int:
        return len(node.children) + int(node.stats.get("beam_empty", 0))

    def _next_round(self, tree: Tree) -> None:
        produced = [tree[c] for c in self._produced if tree[c].correct and tree[c].reward is not None]
        # repairs of failed nodes were members for one expansion only
        members = [tree[m] for m in self._beam if m == ROOT or tree[m].correct]
        pool = produced + ([nd for nd in members if nd.id != ROOT] if self.settings.elitist else [])
        if not produced:
            pool = members  # nothing correct came out: try the beam again
        pool = [nd for nd in pool if self._expansions(nd) < self.settings.max_children]
        # best reward first; ties by insertion order (stable sort) for determinism
        pool.sort(key=lambda nd: -(nd.reward if nd.reward is not None else float("-inf")))
        repairs = self._repairs(tree)
        self._start_round(tree, [nd.id for nd in pool[: self.settings.width]], self.settings.branching)
        for nd in repairs:
            if nd.id not in self._quota:
                self._beam.append(nd.id)
                self._quota[nd.id] = 1

    def _repairs(self, tree: Tree) -> list[Node]:
        """This round's failed children to repair next round, best anchor first."""
        s = self.settings
        if not s.repair_width:
            return []
        produced = set(self._produced)
        targets = [nd for nd in repair_targets(tree, s.repair_attempts) if nd.id in produced
                   and self._expansions(nd) < s.max_children]

        def anchor_reward(nd: Node) -> float:
            a = anchor(tree, nd)
            return a.reward if a.reward is not None else 0.0  # the root: the reference, log 1 = 0

        targets.sort(key=lambda nd: -anchor_reward(nd))
        return targets[: s.repair_width]

    def _account(self, node: Node) -> None:
        if "beam_round" in node.stats or node.parent is None:
            return
        node.stats["beam_round"] = self._round
        parent = node.parent
        if self._in_flight.get(parent, 0) > 0:
            self._in_flight[parent] -= 1
        elif self._quota.get(parent, 0) > 0:
            self._quota[parent] -= 1  # an expansion re-added after a restart
        if parent in self._beam:
            self._produced.append(node.id)

    def _sync(self, tree: Tree) -> None:
        """Account for nodes the loop added without calling :meth:`update`."""
        for node in list(tree):
            if node.id != ROOT and node.reward is not None and "beam_round" not in node.stats:
                self._account(node)


@hookimpl
def kernelpro_register_search_policies(register: Callable[[type[SearchPolicy]], None]) -> None:
    register(Beam)
