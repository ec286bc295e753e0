"""Repairs: a failed candidate is a child the search can expand again.

A candidate that failed to compile, verify or run is a node like any other; expanding it
asks the generator to fix it (the prompt carries the verdict, the error or the first
mismatching values, and the failed code). The built-in policies share these rules:

* A failed node can be repaired while its *failure chain* (the failed node and its failed
  ancestors up to the nearest correct one or the root) is at most ``repair_attempts``
  long: a repair that fails is itself repaired, up to that many attempts in a row for one
  original failure. ``repair_attempts = 0`` turns repairs off.
* A node is repaired once (it has no children yet and none in flight); contract failures
  (a refusal, a reply without code or in the wrong language) are not repaired: there is
  no kernel to fix, and asking again goes through a fresh expansion of the parent.
* Each policy decides *which* repairs to spend budget on: those whose nearest correct
  ancestor (the *anchor*) is the node it would expand anyway (greedy, mcts), or the failed
  children of the beam's members (beam).
"""

from __future__ import annotations

from typing import Callable

from kernelpro.search.tree import ROOT, Node, Tree

#: verdicts whose candidates are not repaired (nothing to fix in the code)
NOT_REPAIRABLE = frozenset({"contract_violation"})


def is_failed(node: Node) -> bool:
    """An evaluated candidate that is not correct."""
    return node.id != ROOT and node.verdict is not None and not node.correct


def anchor(tree: Tree, node: Node) -> Node:
    """The nearest correct ancestor of ``node`` (the root when there is none)."""
    cur = tree[node.parent] if node.parent else tree.root
    while cur.id != ROOT and not cur.correct:
        cur = tree[cur.parent] if cur.parent else tree.root
    return cur


def failure_chain(tree: Tree, node: Node) -> int:
    """How many failed nodes lead from the anchor down to ``node``, ``node`` included."""
    n = 0
    cur: Node | None = node
    while cur is not None and is_failed(cur):
        n += 1
        cur = tree[cur.parent] if cur.parent else None
    return n


def repair_targets(tree: Tree, attempts: int, busy: Callable[[Node], int] = lambda nd: 0) -> list[Node]:
    """Failed nodes that may be repaired now, oldest first. ``busy`` counts expansions of
    a node already in flight (a policy's own bookkeeping)."""
    if attempts <= 0:
        return []
    out = []
    for node in tree:
        if not is_failed(node) or node.closed is not None or node.verdict in NOT_REPAIRABLE:
            continue
        if node.children or busy(node) > 0:
            continue
        if failure_chain(tree, node) <= attempts:
            out.append(node)
    return out
