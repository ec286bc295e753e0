"""The beam policy: rounds, width, fallback, in-flight handling, persistence."""

from __future__ import annotations

import random

import pluggy

from search_helpers import add

from kernelpro import hookspecs
from kernelpro.search import beam as beam_module
from kernelpro.search.beam import Beam, Settings
from kernelpro.search.tree import ROOT, Tree


def beam(**overrides) -> Beam:
    """A beam without repairs unless asked: these tests follow the rounds (repairs have
    their own tests in test_search_repair.py)."""
    overrides.setdefault("repair_width", 0)
    return Beam(Settings(**overrides), rng=random.Random(0))


def test_registered_through_the_hook():
    pm = pluggy.PluginManager("kernelpro")
    pm.add_hookspecs(hookspecs)
    pm.register(beam_module)
    seen = []
    pm.hook.kernelpro_register_search_policies(register=seen.append)
    assert seen == [Beam] and Beam.name == "beam"


def test_first_round_expands_the_root_width_times_branching():
    b = beam(width=3, branching=2)
    tree = Tree.new()
    assert b.select(tree, 4) == [ROOT] * 4
    assert b.select(tree, 4) == [ROOT] * 2
    assert b.select(tree, 4) == []  # the round's last expansions are in flight


def test_next_round_keeps_the_best_correct_children():
    b = beam(width=2, branching=2)
    tree = Tree.new()
    picks = b.select(tree, 4)
    kids = [add(b, tree, pid, s) for pid, s in zip(picks, (1.5, None, 3.0, 2.0))]
    nxt = b.select(tree, 10)
    assert nxt == [kids[2], kids[3], kids[2], kids[3]]  # best first, branching each


def test_a_round_without_correct_children_retries_the_beam():
    b = beam(width=2, branching=1, max_children=3)
    tree = Tree.new()
    picks = b.select(tree, 2)
    a, c = (add(b, tree, p, s) for p, s in zip(picks, (2.0, 1.5)))
    for pid in b.select(tree, 2):
        add(b, tree, pid, None)
    assert b.select(tree, 2) == [a, c]


def test_the_search_ends_when_every_member_is_spent():
    b = beam(width=1, branching=1, max_children=1)
    tree = Tree.new()
    [pid] = b.select(tree, 1)
    a = add(b, tree, pid, 2.0)
    assert b.select(tree, 1) == [a]
    add(b, tree, a, None)
    assert b.select(tree, 1) == []  # a has its one child, nothing correct came out of it


def test_release_counts_against_the_budget():
    b = beam(width=1, branching=1, max_children=2)
    tree = Tree.new()
    a = add(b, tree, b.select(tree, 1)[0], 2.0)
    for _ in range(2):
        assert b.select(tree, 1) == [a]
        b.release(tree, a)
    assert b.select(tree, 1) == []


def test_elitist_keeps_a_better_parent():
    b = beam(width=1, branching=1, elitist=True)
    tree = Tree.new()
    a = add(b, tree, b.select(tree, 1)[0], 3.0)
    assert b.select(tree, 1) == [a]
    add(b, tree, a, 1.2)
    assert b.select(tree, 1) == [a]


def test_state_round_trip_returns_in_flight_work_to_the_quota():
    b = beam(width=2, branching=2)
    tree = Tree.new()
    picks = b.select(tree, 3)
    add(b, tree, picks[0], 1.5)
    state = b.state()
    b2 = beam(width=2, branching=2)
    b2.load_state(state)
    # 4 root expansions in round 0: one done, two lost in flight, one never handed out
    assert b2.select(tree, 10) == [ROOT] * 3
