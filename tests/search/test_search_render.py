"""The tree drawn for report.md."""

from __future__ import annotations

import random

from search_helpers import add

from kernelpro.search.mcts import MCTS, Settings
from kernelpro.search.render import render_tree_markdown
from kernelpro.search.tree import ROOT, Tree


def small_tree():
    p = MCTS(Settings(max_consecutive_failures=3), rng=random.Random(0))
    tree = Tree.new()
    a = add(p, tree, ROOT, 1.4, description="tile 64x64 in shared memory")
    b = add(p, tree, a, 2.1, description="vectorized float4 loads")
    dead = add(p, tree, ROOT, 1.1, description="split-K")
    for verdict in ("compile_error", "compile_error", "incorrect"):
        add(p, tree, dead, None, verdict=verdict)
    return tree, a, b, dead


def test_winner_path_closed_reason_and_collapsed_failures():
    tree, a, b, dead = small_tree()
    text = render_tree_markdown(tree)
    lines = text.splitlines()
    assert lines[0].startswith("6 candidates (3 correct, 3 failed), 1 closed")
    assert f"best {b} at 2.10x" in lines[0]
    line_of = {nid: next(ln for ln in lines if f" {nid}  " in ln or ln.startswith(f"{nid}  ")) for nid in (a, b, dead)}
    assert "★" in line_of[a] and "★" in line_of[b] and "★" not in line_of[dead]
    assert "2.10x" in line_of[b] and "vectorized float4 loads" in line_of[b]
    assert "✂ dead end" in line_of[dead]
    assert any("3 failed: compile_error ×2, incorrect ×1" in ln for ln in lines)
    assert text.count("```") == 2


def test_few_failures_are_drawn_one_by_one():
    p = MCTS(rng=random.Random(0))
    tree = Tree.new()
    add(p, tree, ROOT, None, verdict="timeout")
    text = render_tree_markdown(tree)
    assert "✗ timeout" in text and "failed:" not in text.split("```text")[1]


def test_a_hundred_node_tree_stays_compact():
    import search_helpers  # noqa: F401  (benchmarks on sys.path)
    from search_sim.landscapes import make_landscape
    from search_sim.sim import run_search

    out = run_search(MCTS(rng=random.Random(2)), make_landscape("failure_wall", 2), 100, seed=2,
                     keep_tree=True)
    text = render_tree_markdown(out.tree)
    drawing = text.split("```text")[1].split("```")[0].strip().splitlines()
    assert len(drawing) <= len(out.tree)
    assert max(len(ln) for ln in drawing) < 200
    assert "★" in text


def test_empty_tree():
    text = render_tree_markdown(Tree.new())
    assert text.startswith("0 candidates") and "root  reference" in text
