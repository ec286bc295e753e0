"""The search tree: a node is a candidate program, its children are generations from it.

The root is the reference itself. The optimization loop owns the tree and adds a node for
every evaluated draft; search policies read it and keep their statistics on the nodes
(``visits``, ``value_sum``, ``virtual_loss``, ``closed``) so that everything needed to
resume is in ``tree.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import attrs

ROOT = "root"


@attrs.define
class Node:
    id: str
    parent: str | None
    depth: int
    reward: float | None = None  # None for the root and for nodes not yet evaluated
    correct: bool = False
    verdict: str | None = None
    speedup: float | None = None
    description: str = ""
    kind: str = "candidate"  # root | candidate
    children: list[str] = attrs.field(factory=list)
    visits: int = 0
    value_sum: float = 0.0
    virtual_loss: int = 0
    expansions: int = 0  # times this node was expanded (generated from)
    closed: str | None = None  # why the policy stopped selecting it (dead end, exhausted, ...)
    stats: dict[str, Any] = attrs.field(factory=dict)  # policy-specific numbers

    @property
    def mean_value(self) -> float:
        return self.value_sum / self.visits if self.visits else 0.0


@attrs.define
class Tree:
    nodes: dict[str, Node] = attrs.field(factory=dict)
    policy_state: dict[str, Any] = attrs.field(factory=dict)

    @classmethod
    def new(cls) -> "Tree":
        tree = cls()
        tree.nodes[ROOT] = Node(id=ROOT, parent=None, depth=0, kind="root", correct=True)
        return tree

    @property
    def root(self) -> Node:
        return self.nodes[ROOT]

    def __getitem__(self, node_id: str) -> Node:
        return self.nodes[node_id]

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.nodes

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def add(self, node_id: str, parent: str, **fields: Any) -> Node:
        if node_id in self.nodes:
            raise ValueError(f"node {node_id} already in the tree")
        p = self.nodes[parent]
        node = Node(id=node_id, parent=parent, depth=p.depth + 1, **fields)
        self.nodes[node_id] = node
        p.children.append(node_id)
        return node

    def path_to_root(self, node_id: str) -> list[Node]:
        out = []
        cur: str | None = node_id
        while cur is not None:
            node = self.nodes[cur]
            out.append(node)
            cur = node.parent
        return out

    def candidates(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind != "root"]

    def best(self) -> Node | None:
        scored = [(n.reward, n) for n in self.candidates() if n.correct and n.reward is not None]
        return max(scored, key=lambda rn: rn[0])[1] if scored else None

    # --- persistence ---------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [attrs.asdict(n) for n in self.nodes.values()],
            "policy_state": self.policy_state,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Tree":
        tree = cls()
        for nd in data["nodes"]:
            tree.nodes[nd["id"]] = Node(**nd)
        tree.policy_state = data.get("policy_state", {})
        return tree

    def save(self, path: Path) -> None:
        """Write atomically: a kill at any moment leaves the old or the new file."""
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "w") as fh:
            json.dump(self.to_dict(), fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> "Tree":
        with open(path) as fh:
            return cls.from_dict(json.load(fh))
