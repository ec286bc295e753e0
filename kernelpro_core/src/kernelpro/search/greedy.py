"""Built-in search policy: greedy.

Always expands the best correct node so far (highest reward); while nothing correct
exists, expands the root. Nodes a policy closed are skipped; a node whose expansions
produced nothing (the generator had nothing left) is closed.
"""

from __future__ import annotations

import attrs

from kernelpro.api import SearchPolicy
from kernelpro.hookspecs import hookimpl
from kernelpro.search.tree import ROOT, Tree


@attrs.frozen
class GreedySettings:
    #: expand the root again when the best node has been expanded this many times without improving
    patience: int = 3


class Greedy(SearchPolicy):
    name = "greedy"
    description = "expand the best candidate so far"
    Settings = GreedySettings

    def select(self, tree: Tree, n: int) -> list[str]:
        open_nodes = [nd for nd in tree.candidates() if nd.correct and nd.reward is not None and not nd.closed]
        if open_nodes:
            best = max(open_nodes, key=lambda nd: (nd.reward, -nd.depth))
            stale = best.stats.get("stale", 0)
            if stale < self.settings.patience:
                return [best.id] * n
        if tree.root.closed:
            return []
        return [ROOT] * n

    def update(self, tree: Tree, node_id: str) -> None:
        node = tree[node_id]
        parent = tree[node.parent] if node.parent else None
        if parent is None or parent.kind == "root":
            return
        if node.reward is None or parent.reward is None or node.reward <= parent.reward:
            parent.stats["stale"] = parent.stats.get("stale", 0) + 1

    def release(self, tree: Tree, node_id: str) -> None:
        tree[node_id].closed = "generator had nothing more to propose"


@hookimpl
def kernelpro_register_search_policies(register):
    register(Greedy)
