"""Repairs in the built-in policies: a failed candidate of a promising parent is expanded
(so the generator fixes it), a bounded number of times in a row; a generator failure
leaves the node open."""

from __future__ import annotations

import random

from search_helpers import add

from kernelpro.search.beam import Beam
from kernelpro.search.beam import Settings as BeamSettings
from kernelpro.search.greedy import Greedy, GreedySettings
from kernelpro.search.mcts import MCTS
from kernelpro.search.mcts import Settings as MctsSettings
from kernelpro.search.repair import anchor, failure_chain, repair_targets
from kernelpro.search.tree import ROOT, Tree


def test_repair_targets_follow_the_chain_bound():
    g = Greedy(GreedySettings())
    tree = Tree.new()
    ok = add(g, tree, ROOT, 1.5)
    bad = add(g, tree, ok, None)
    assert [nd.id for nd in repair_targets(tree, 2)] == [bad]
    assert anchor(tree, tree[bad]).id == ok and failure_chain(tree, tree[bad]) == 1
    bad2 = add(g, tree, bad, None)  # the repair failed too
    assert [nd.id for nd in repair_targets(tree, 2)] == [bad2]
    bad3 = add(g, tree, bad2, None)
    assert failure_chain(tree, tree[bad3]) == 3
    assert repair_targets(tree, 2) == []  # two repairs in a row were spent
    assert repair_targets(tree, 0) == []


def test_contract_failures_are_not_repaired():
    g = Greedy(GreedySettings())
    tree = Tree.new()
    add(g, tree, ROOT, None, verdict="contract_violation")
    assert repair_targets(tree, 2) == []
    assert g.select(tree, 1) == [ROOT]


def test_greedy_repairs_the_failed_child_of_the_best_then_moves_on():
    g = Greedy(GreedySettings(repair_attempts=1))
    tree = Tree.new()
    best = add(g, tree, ROOT, 2.0)
    assert g.select(tree, 1) == [best]
    bad = add(g, tree, best, None)
    assert g.select(tree, 1) == [bad]  # the failure is repaired first
    add(g, tree, bad, None)  # the repair failed as well: one attempt was allowed
    assert g.select(tree, 1) == [best]


def test_greedy_repairs_at_the_root_while_nothing_is_correct():
    g = Greedy(GreedySettings())
    tree = Tree.new()
    bad = add(g, tree, ROOT, None, verdict="incorrect")
    assert g.select(tree, 2) == [bad, ROOT]  # distinct repairs, the rest as usual
    fixed = add(g, tree, bad, 1.3)
    assert g.select(tree, 1) == [fixed]  # the repaired candidate is the best now


def test_greedy_keeps_a_node_open_after_a_generator_failure():
    g = Greedy(GreedySettings())
    tree = Tree.new()
    [pid] = g.select(tree, 1)
    g.failed(tree, pid)
    assert tree.root.closed is None and g.select(tree, 1) == [ROOT]
    g.release(tree, ROOT)  # nothing to propose: closed
    assert g.select(tree, 1) == []


def test_beam_repairs_failed_children_of_the_round():
    b = Beam(BeamSettings(width=2, branching=1, repair_width=1), rng=random.Random(0))
    tree = Tree.new()
    picks = b.select(tree, 2)
    good = add(b, tree, picks[0], 1.5)
    bad = add(b, tree, picks[1], None)
    nxt = b.select(tree, 5)
    assert nxt == [good, bad]  # the beam, then one repair
    fixed = add(b, tree, bad, 1.8)
    add(b, tree, good, 1.2)
    # the repair competes for the next beam like any child, and the failed node is gone
    assert b.select(tree, 5) == [fixed, tree[good].children[0]]


def test_beam_generator_failure_returns_the_expansion():
    b = Beam(BeamSettings(width=1, branching=1), rng=random.Random(0))
    tree = Tree.new()
    assert b.select(tree, 1) == [ROOT]
    b.failed(tree, ROOT)
    assert b.select(tree, 1) == [ROOT]  # handed out again


def test_mcts_repairs_the_failed_child_of_the_node_it_picked():
    m = MCTS(MctsSettings(repair_attempts=1), rng=random.Random(0))
    tree = Tree.new()
    bad = add(m, tree, ROOT, None, verdict="runtime_error")
    assert m.select(tree, 1) == [bad]
    fixed = add(m, tree, bad, 1.4)
    assert m.select(tree, 1) == [fixed]  # a new best: refined next


def test_mcts_reaches_a_repaired_candidate_through_its_failed_parent():
    m = MCTS(MctsSettings(repair_attempts=1, dive=False, root_max_children=1), rng=random.Random(0))
    tree = Tree.new()
    bad = add(m, tree, ROOT, None, verdict="runtime_error")
    assert m.select(tree, 1) == [bad]
    fixed = add(m, tree, bad, 1.4)
    # the root is full; the failed strategy leads to its repair, which is refined
    assert m.select(tree, 1) == [fixed]


def test_mcts_generator_failure_keeps_the_node_open():
    m = MCTS(MctsSettings(max_empty_expansions=1), rng=random.Random(0))
    tree = Tree.new()
    [pid] = m.select(tree, 1)
    m.failed(tree, pid)
    assert tree.root.closed is None and tree.root.virtual_loss == 0
    assert m.select(tree, 1) == [ROOT]


def test_mcts_search_ends_once_the_repairs_are_spent():
    m = MCTS(MctsSettings(asymmetric=False, max_children=2, widening=False, repair_attempts=1),
             rng=random.Random(0))
    tree = Tree.new()
    a = add(m, tree, ROOT, None)
    b = add(m, tree, ROOT, None)
    picks = m.select(tree, 4)
    assert sorted(picks) == sorted([a, b])  # each failure repaired once, then nothing is left
    for pid in picks:
        add(m, tree, pid, None)
    assert m.select(tree, 4) == []
