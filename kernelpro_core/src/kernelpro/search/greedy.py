"""Built-in search policy: greedy.

Always expands the best correct node so far (highest reward); while nothing correct
exists, expands the root. Nodes a policy closed are skipped; a node whose expansions
produced nothing (the generator had nothing left) is closed; a generator failure (an API
error) leaves the node open.

Repairs (:mod:`kernelpro.search.repair`): before expanding that node again, a failed
candidate generated from it (or a failed repair of one, up to ``repair_attempts`` in a
row) is expanded instead, so the generator fixes it with the verdict in hand.
"""

from __future__ import annotations

import attrs

from kernelpro.api import SearchPolicy
from kernelpro.hookspecs import hookimpl
from kernelpro.search.repair import anchor, repair_targets
from kernelpro.search.tree import ROOT, Tree


@attrs.frozen
class GreedySettings:
    #: expand the root again when the best node has been expanded this many times without improving
    patience: int = 3
    #: repairs of one failed candidate in a row (a failed repair is repaired again); 0: no repairs
    repair_attempts: int = attrs.field(default=2, validator=attrs.validators.ge(0))


class Greedy(SearchPolicy):
    name = "greedy"
    description = "expand the best candidate so far"
    Settings = GreedySettings

    def select(self, tree: Tree, n: int) -> list[str]:
        target = self._target(tree)
        if target is None:
            return []
        # failed candidates of the node about to be expanded are repaired first, newest first
        repairs = [nd.id for nd in reversed(repair_targets(tree, self.settings.repair_attempts))
                   if anchor(tree, nd).id == target]
        picks = repairs[:n]
        return picks + [target] * (n - len(picks))

    def _target(self, tree: Tree) -> str | None:
        open_nodes = [nd for nd in tree.candidates() if nd.correct and nd.reward is not None and not nd.closed]
        if open_nodes:
            best = max(open_nodes, key=lambda nd: (nd.reward, -nd.depth))
            stale = best.stats.get("stale", 0)
            if stale < self.settings.patience:
                return best.id
        if tree.root.closed:
            return None
        return ROOT

    def update(self, tree: Tree, node_id: str) -> None:
        node = tree[node_id]
        parent = tree[node.parent] if node.parent else None
        if parent is None or parent.kind == "root":
            return
        if node.reward is None or parent.reward is None or node.reward <= parent.reward:
            parent.stats["stale"] = parent.stats.get("stale", 0) + 1

    def release(self, tree: Tree, node_id: str) -> None:
        tree[node_id].closed = "generator had nothing more to propose"

    def failed(self, tree: Tree, node_id: str) -> None:
        """A generator error is not the node's fault: it stays open (the loop stops the run
        after too many failures in a row)."""


@hookimpl
def kernelpro_register_search_policies(register):
    register(Greedy)
