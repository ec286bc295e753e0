"""Shared helpers for the search tests: small hand-built trees and the simulator's path."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from kernelpro.api import Reward
from kernelpro.search.tree import Tree

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

_counter = [0]


def add(policy, tree: Tree, parent: str, speedup: float | None, verdict: str | None = None,
        description: str = "", update: bool = True) -> str:
    """Add an evaluated child of ``parent`` (speedup None = failed) and tell the policy."""
    _counter[0] += 1
    node_id = f"n{_counter[0]}"
    correct = speedup is not None
    tree.add(
        node_id,
        parent,
        reward=math.log(speedup) if correct else Reward.floor,
        correct=correct,
        verdict="correct" if correct else (verdict or "compile_error"),
        speedup=speedup,
        description=description or node_id,
    )
    if update:
        policy.update(tree, node_id)
    return node_id
