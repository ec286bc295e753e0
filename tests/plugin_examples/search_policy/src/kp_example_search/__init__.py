"""Example search policy: expand the best candidate, breadth before depth.

Among the correct candidates of the best reward it picks the one expanded the fewest
times, so a tie is explored side by side before any of them goes deeper; with nothing
correct yet it expands the root. A node whose expansion produced nothing is closed.
"""

from __future__ import annotations

import attrs

from kernelpro.api import ROOT, SearchPolicy, hookimpl

KERNELPRO_API_VERSION = "1.0"


@attrs.frozen
class BreadthFirstBestSettings:
    max_expansions: int = 3  # a node expanded this often is not selected again


class BreadthFirstBest(SearchPolicy):
    name = "breadth_first_best"
    description = "the best candidate, the least expanded first"
    Settings = BreadthFirstBestSettings

    def select(self, tree, n):
        picks: list[str] = []
        pending = {nd.id: nd.expansions for nd in tree}
        for _ in range(n):
            open_nodes = [nd for nd in tree.candidates() if nd.correct and nd.reward is not None
                          and not nd.closed and pending[nd.id] < self.settings.max_expansions]
            if open_nodes:
                best = max(nd.reward for nd in open_nodes)
                node = min((nd for nd in open_nodes if nd.reward == best), key=lambda nd: (pending[nd.id], nd.id))
                picks.append(node.id)
                pending[node.id] += 1
            elif not tree.root.closed:
                picks.append(ROOT)
        return picks

    def release(self, tree, node_id):
        tree[node_id].closed = "its expansion produced nothing"


@hookimpl
def kernelpro_register_search_policies(register):
    register(BreadthFirstBest)
