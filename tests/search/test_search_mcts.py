"""The mcts policy: UCT math, widening, branching, the correctness wall, pruning, virtual
loss, persistence and determinism."""

from __future__ import annotations

import copy
import json
import math
import random

import attrs
import pluggy
import pytest

from search_helpers import add  # noqa: E402  (also puts benchmarks/ on sys.path)

from kernelpro import hookspecs
from kernelpro.search import mcts as mcts_module
from kernelpro.search.mcts import MCTS, Settings
from kernelpro.search.tree import ROOT, Tree


def policy(**overrides) -> MCTS:
    return MCTS(Settings(**overrides), rng=random.Random(0))


def test_registered_through_the_hook():
    pm = pluggy.PluginManager("kernelpro")
    pm.add_hookspecs(hookspecs)
    pm.register(mcts_module)
    seen = []
    pm.hook.kernelpro_register_search_policies(register=seen.append)
    assert seen == [MCTS] and MCTS.name == "mcts"


def test_bad_settings_are_rejected_with_a_value_error():
    with pytest.raises(ValueError):
        Settings(widening_alpha=1.5)
    with pytest.raises(ValueError):
        Settings(max_children=0)


def test_uct_matches_the_formula():
    p = policy(root_exploration=0.7, max_backup=0.0, strategy_trials=0)
    tree = Tree.new()
    a = add(p, tree, ROOT, 2.0)
    add(p, tree, a, 4.0)
    b = add(p, tree, ROOT, 1.0)
    span = p._span(tree)
    assert span == (0.0, math.log(4.0))
    # a's subtree mean of log rewards, normalised by the tree's range [0, ln 4]
    q_a = ((math.log(2.0) + math.log(4.0)) / 2) / math.log(4.0)
    expected = q_a + 0.7 * math.sqrt(math.log(3) / 2)
    assert p.uct(tree.root, tree[a], span) == pytest.approx(expected)
    assert p.uct(tree.root, tree[b], span) == pytest.approx(0.0 + 0.7 * math.sqrt(math.log(3) / 1))


def test_root_and_refinement_exploration_constants():
    p = policy(root_exploration=0.6, exploration=0.1, max_backup=0.0, strategy_trials=0)
    tree = Tree.new()
    a = add(p, tree, ROOT, 2.0)
    b = add(p, tree, a, 2.0)
    add(p, tree, a, 1.0)
    span = p._span(tree)
    bonus = lambda c, n_parent, n: c * math.sqrt(math.log(n_parent) / n)  # noqa: E731
    assert p.uct(tree.root, tree[a], span) == pytest.approx(p.value(tree[a], span) + bonus(0.6, 3, 3))
    assert p.uct(tree[a], tree[b], span) == pytest.approx(p.value(tree[b], span) + bonus(0.1, 3, 1))
    flat = policy(asymmetric=False, root_exploration=0.6, exploration=0.1, max_backup=0.0,
                  strategy_trials=0)
    assert flat.uct(tree.root, tree[a], span) == pytest.approx(p.value(tree[a], span) + bonus(0.1, 3, 3))


def test_a_strategy_is_valued_as_the_best_until_refined_a_few_times():
    p = policy(strategy_trials=3, max_backup=0.0, root_exploration=0.0)
    tree = Tree.new()
    good = add(p, tree, ROOT, 3.0)
    add(p, tree, good, 3.0)
    add(p, tree, good, 3.0)
    fresh = add(p, tree, ROOT, 0.8)  # a slow first attempt at another strategy
    span = p._span(tree)
    assert p.uct(tree.root, tree[fresh], span) == pytest.approx(1.0)
    add(p, tree, fresh, 0.8)
    add(p, tree, fresh, 0.8)
    assert p.uct(tree.root, tree[fresh], p._span(tree)) < 0.5
    off = policy(strategy_trials=0, max_backup=0.0, root_exploration=0.0)
    assert off.uct(tree.root, tree[fresh], p._span(tree)) < 0.5


def test_a_new_best_is_expanded_next():
    p = policy(dive=True, pruning=False)
    tree = Tree.new()
    a = add(p, tree, ROOT, 1.5)
    add(p, tree, ROOT, 1.2)
    star = add(p, tree, a, 3.0)  # new best for the problem
    assert tree[star].stats["dive"] is True
    picks = p.select(tree, 2)
    assert picks[0] == star
    assert tree[star].stats["dive"] is False  # consumed: the rest is UCT's
    add(p, tree, a, 1.0)  # not a new best: no dive
    assert not tree[tree[a].children[-1]].stats.get("dive")


def test_max_backup_mixes_mean_and_best():
    p = policy(max_backup=0.5, strategy_trials=0)
    tree = Tree.new()
    a = add(p, tree, ROOT, 2.0)
    add(p, tree, a, 4.0)
    add(p, tree, a, 1.0)
    span = p._span(tree)
    mean = (math.log(2.0) + math.log(4.0) + 0.0) / 3 / math.log(4.0)
    assert p.value(tree[a], span) == pytest.approx(0.5 * mean + 0.5 * 1.0)


@pytest.mark.parametrize("visits", [1, 2, 3, 4, 5, 9, 10, 17, 50])
def test_widening_limit_is_ceil_k_n_alpha(visits):
    p = policy(asymmetric=False, max_children=100, widening_k=1.5, widening_alpha=0.5)
    node = Tree.new().root
    node.visits = visits
    assert p.child_limit(node) == min(100, math.ceil(1.5 * visits**0.5 - 1e-9))


def test_widening_decides_between_expanding_and_descending():
    p = policy(asymmetric=False, max_children=10, widening_k=1.0, widening_alpha=0.5, pruning=False,
               dive=False)
    tree = Tree.new()
    add(p, tree, ROOT, 1.5)
    add(p, tree, ROOT, 1.2)
    add(p, tree, tree.root.children[0], 1.6)
    add(p, tree, tree.root.children[0], 1.4)
    assert tree.root.visits == 4  # ceil(sqrt 4) = 2 children allowed: descend
    assert p.select(tree, 1) != [ROOT]
    tree = Tree.new()
    for s in (1.5, 1.2):
        add(p, tree, ROOT, s)
    first = tree.root.children[0]
    for s in (1.6, 1.4, 1.3):
        add(p, tree, first, s)
    assert tree.root.visits == 5  # ceil(sqrt 5) = 3 > 2 children: expand the root
    assert p.select(tree, 1) == [ROOT]


def test_a_node_whose_children_all_failed_is_not_stuck():
    # repairs off: with them the failed child would be repaired first (test_search_repair.py)
    p = policy(asymmetric=False, max_children=4, widening_k=1.0, pruning=False, repair_attempts=0)
    tree = Tree.new()
    add(p, tree, ROOT, None)
    assert p.select(tree, 1) == [ROOT]  # widening allows 1, but no child is selectable


def test_asymmetric_branching_budgets():
    p = policy(root_max_children=12, max_children=5, depth_decay=1, min_children=2, widening_k=1.0)
    tree = Tree.new()
    assert p.branching_budget(tree.root) == 12
    for depth, budget in [(1, 5), (2, 4), (3, 3), (4, 2), (9, 2)]:
        node = tree.root.__class__(id="x", parent=ROOT, depth=depth)
        assert p.branching_budget(node) == budget
    flat = policy(asymmetric=False, max_children=5, widening_k=1.0)
    assert flat.branching_budget(tree.root) == 5
    tree.root.visits = 4
    assert p.child_limit(tree.root) == math.ceil(p.settings.root_widening_k * 2)
    assert flat.child_limit(tree.root) == 2


def test_budget_caps_children_even_without_widening():
    p = policy(widening=False, asymmetric=False, max_children=3, pruning=False)
    tree = Tree.new()
    picks = p.select(tree, 5)
    assert picks == [ROOT, ROOT, ROOT]  # the budget, then nothing else exists to select


def test_correctness_wall_failures_never_move_a_subtree_value():
    p = policy(pruning=False, max_backup=0.0)
    tree = Tree.new()
    a = add(p, tree, ROOT, 1.5)
    add(p, tree, a, 3.0)
    span = p._span(tree)
    before = p.value(tree[a], span)
    for verdict in ("compile_error", "incorrect", "timeout"):
        add(p, tree, a, None, verdict=verdict)
        assert p.value(tree[a], p._span(tree)) == pytest.approx(before)
    assert tree[a].visits == 5  # failures count as visits (they spent budget)
    assert tree[a].stats["n_fail"] == 3


def test_without_the_wall_failures_drag_the_mean_down():
    p = policy(pruning=False, max_backup=0.0, correctness_wall=False, wall_value=-0.5)
    tree = Tree.new()
    a = add(p, tree, ROOT, 2.0)
    span = p._span(tree)
    before = p.value(tree[a], span)
    add(p, tree, a, None)
    assert p.value(tree[a], p._span(tree)) == pytest.approx((before - 0.5) / 2)


def test_failed_subtree_alone_is_worth_the_wall_value():
    p = policy(wall_value=-0.7)
    tree = Tree.new()
    f = add(p, tree, ROOT, None)
    assert p.value(tree[f], p._span(tree)) == -0.7


def test_log_calibration_bounds_the_scale():
    p = policy(max_backup=0.0)
    tree = Tree.new()
    a = add(p, tree, ROOT, 1.1)
    b = add(p, tree, ROOT, 10.0)
    span = p._span(tree)
    assert p.value(tree[b], span) == pytest.approx(1.0)
    assert p.value(tree[a], span) == pytest.approx(math.log(1.1) / math.log(10.0))
    linear = policy(max_backup=0.0, log_reward=False)
    tree2 = Tree.new()
    a2 = add(linear, tree2, ROOT, 1.1)
    b2 = add(linear, tree2, ROOT, 10.0)
    assert linear.value(tree2[b2], (0, 1)) / linear.value(tree2[a2], (0, 1)) == pytest.approx(10 / 1.1)


def test_consecutive_failures_close_a_node_with_the_reason():
    p = policy(max_consecutive_failures=3)
    tree = Tree.new()
    a = add(p, tree, ROOT, 1.5)
    add(p, tree, a, None)
    add(p, tree, a, None, verdict="incorrect")
    assert tree[a].closed is None
    add(p, tree, a, None)
    assert tree[a].closed == "dead end: the last 3 candidates in this subtree failed to compile or verify"
    assert a in tree and len(tree[a].children) == 3  # pruned nodes stay in the record
    assert a not in p._selectable(tree)


def test_a_correct_child_resets_the_failure_streak():
    p = policy(max_consecutive_failures=2, stale_expansions=50)
    tree = Tree.new()
    a = add(p, tree, ROOT, 1.5)
    add(p, tree, a, None)
    add(p, tree, a, 1.2)
    add(p, tree, a, None)
    assert tree[a].closed is None


def test_non_improving_expansions_close_a_node():
    p = policy(stale_expansions=3, min_improvement=0.02, max_consecutive_failures=99)
    tree = Tree.new()
    add(p, tree, ROOT, 5.0)  # the best candidate lives elsewhere
    a = add(p, tree, ROOT, 2.0)
    add(p, tree, a, 2.01)  # within the 2% improvement threshold: not an improvement
    add(p, tree, a, 1.5)
    assert tree[a].closed is None
    add(p, tree, a, 1.9)
    assert tree[a].closed == "no improvement in 3 expansions of this subtree (best 2.00x)"


def test_staleness_counts_the_whole_subtree():
    p = policy(stale_expansions=2, max_consecutive_failures=99)
    tree = Tree.new()
    add(p, tree, ROOT, 10.0)
    a = add(p, tree, ROOT, 2.0)
    b = add(p, tree, a, 1.5)  # a: 1 without improvement
    add(p, tree, b, 3.0)  # improves a's subtree best: a's count restarts
    assert tree[a].closed is None and tree[a].stats["stale"] == 0
    add(p, tree, b, 1.0)
    assert tree[a].closed is None
    add(p, tree, b, 1.0)
    assert tree[a].closed is not None and tree[b].closed is not None


def test_the_lineage_of_the_best_candidate_is_never_closed():
    p = policy(stale_expansions=2, max_consecutive_failures=2)
    tree = Tree.new()
    a = add(p, tree, ROOT, 2.0)
    b = add(p, tree, a, 3.0)  # the best candidate; a is its ancestor
    add(p, tree, b, None)
    add(p, tree, b, None)
    assert tree[b].closed is not None  # the best candidate itself can be a dead end
    for _ in range(4):
        add(p, tree, a, 1.0)
    assert tree[a].closed is None


def test_pruning_off_never_closes():
    p = policy(pruning=False)
    tree = Tree.new()
    a = add(p, tree, ROOT, 1.5)
    for _ in range(10):
        add(p, tree, a, None)
    assert tree[a].closed is None


def test_the_root_is_never_pruned():
    p = policy(max_consecutive_failures=2)
    tree = Tree.new()
    for _ in range(5):
        add(p, tree, ROOT, None)
    assert tree.root.closed is None


def test_virtual_loss_is_applied_along_paths_and_removed():
    p = policy(pruning=False)
    tree = Tree.new()
    a = add(p, tree, ROOT, 2.0)
    add(p, tree, ROOT, 1.2)
    picks = p.select(tree, 3)
    assert len(picks) == 3
    for pid in picks:
        for node in tree.path_to_root(pid):
            assert node.virtual_loss >= 1
    assert tree.root.virtual_loss == 3
    # each selection is resolved once: a child added, or nothing produced
    add(p, tree, picks[0], 2.5)
    p.release(tree, picks[1])
    add(p, tree, picks[2], None)
    assert all(node.virtual_loss == 0 for node in tree)
    assert all(node.stats.get("pending", 0) == 0 for node in tree)
    assert tree[a].virtual_loss == 0


def test_virtual_loss_spreads_parallel_selections():
    tree = Tree.new()
    spread = policy(pruning=False, virtual_loss=3.0)
    for s in (2.0, 1.9):
        add(spread, tree, ROOT, s)
    tree.root.visits = 2  # root limit ceil(2*sqrt 2) = 3 > 2 children: first pick is the root
    picks = spread.select(tree, 3)
    assert len(set(picks)) > 1


def test_extra_children_of_one_expansion_do_not_underflow():
    p = policy(pruning=False)
    tree = Tree.new()
    [pid] = p.select(tree, 1)
    add(p, tree, pid, 1.1)
    add(p, tree, pid, 1.2)  # a generator returning two drafts for one selection
    assert all(node.virtual_loss == 0 for node in tree)


def test_release_closes_a_node_that_keeps_producing_nothing():
    p = policy(max_empty_expansions=2)
    tree = Tree.new()
    a = add(p, tree, ROOT, 2.0)
    p.release(tree, a)
    assert tree[a].closed is None
    p.release(tree, a)
    assert tree[a].closed.startswith("exhausted")


def test_search_ends_when_nothing_is_selectable():
    # repairs off (with them the failures are fixed first: test_search_repair.py)
    p = policy(asymmetric=False, max_children=2, widening=False, repair_attempts=0)
    tree = Tree.new()
    add(p, tree, ROOT, None)
    add(p, tree, ROOT, None)
    assert p.select(tree, 4) == []


def test_nodes_added_without_update_are_backed_up_once():
    p = policy()
    tree = Tree.new()
    a = add(p, tree, ROOT, 2.0, update=False)
    p.select(tree, 1)
    assert tree[a].visits == 1 and tree.root.visits == 1
    p.update(tree, a)  # late update: removes nothing twice, backs up nothing twice
    assert tree[a].visits == 1 and tree.root.visits == 1


def _sim_run(seed: int, budget: int = 60, family: str = "deceptive"):
    from search_sim.landscapes import make_landscape
    from search_sim.sim import SimRun

    return SimRun(MCTS(rng=random.Random(seed)), make_landscape(family, seed), budget, seed=seed)


def test_determinism_under_a_fixed_seed():
    first = _sim_run(7).run()
    second = _sim_run(7).run()
    assert first.selections == second.selections
    assert first.reported_true_speedup == second.reported_true_speedup
    other = _sim_run(8).run()
    assert other.selections != first.selections


def test_save_and_load_continue_identically(tmp_path):
    run = _sim_run(3, budget=90, family="rugged")
    for _ in range(8):
        run.step()
    run.tree.policy_state = run.policy.state()
    run.tree.save(tmp_path / "tree.json")

    resumed = copy.deepcopy(run)
    resumed.tree = Tree.load(tmp_path / "tree.json")
    resumed.policy = MCTS(rng=random.Random(12345))  # a fresh process: different rng
    resumed.policy.load_state(resumed.tree.policy_state)
    before = len(run.selections)
    run.run()
    resumed.run()
    assert run.selections[before:] == resumed.selections[before:]
    assert len(run.selections) > before
    nodes = lambda t: json.dumps(t.to_dict()["nodes"], sort_keys=True)  # noqa: E731
    assert nodes(run.tree) == nodes(resumed.tree)


def test_resume_after_a_kill_mid_batch_drops_stale_virtual_loss(tmp_path):
    p = policy(pruning=False)
    tree = Tree.new()
    add(p, tree, ROOT, 2.0)
    picks = p.select(tree, 3)
    add(p, tree, picks[0], 2.2)  # one of three expansions finished, then the process dies
    tree.policy_state = p.state()
    tree.save(tmp_path / "tree.json")
    assert any(node.virtual_loss for node in Tree.load(tmp_path / "tree.json"))

    tree2 = Tree.load(tmp_path / "tree.json")
    p2 = policy(pruning=False)
    p2.load_state(tree2.policy_state)
    picks2 = p2.select(tree2, 2)
    assert tree2.root.virtual_loss == len(picks2)
    for pid in picks2:
        add(p2, tree2, pid, 1.1)
    assert all(node.virtual_loss == 0 for node in tree2)


def test_settings_are_frozen_attrs():
    assert attrs.has(Settings)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Settings().exploration = 1.0  # type: ignore[misc]


def _one_strategy_tree(p):
    """Root -> a (1.0) -> {b (2.0) -> {b1 1.0, b2 1.8, b3 1.02}, c (1.1)}; b is full."""
    tree = Tree.new()
    a = add(p, tree, ROOT, 1.0)
    b = add(p, tree, a, 2.0)
    c = add(p, tree, a, 1.1)
    b1 = add(p, tree, b, 1.0)
    b2 = add(p, tree, b, 1.8)
    b3 = add(p, tree, b, 1.02)
    return tree, dict(a=a, b=b, c=c, b1=b1, b2=b2, b3=b3)


_REFINE = dict(root_max_children=1, max_children=3, depth_decay=0, widening=False, dive=False,
               pruning=False)


def test_best_first_refinement_expands_the_best_open_candidate_of_the_strategy():
    p = policy(best_first=True, **_REFINE)
    tree, n = _one_strategy_tree(p)
    # b (2.0) has its 3 children; b2 is the best one under its budget, three times, then c
    assert p.select(tree, 4) == [n["b2"], n["b2"], n["b2"], n["c"]]


def test_best_first_skips_closed_candidates():
    p = policy(best_first=True, **_REFINE)
    tree, n = _one_strategy_tree(p)
    tree[n["b2"]].closed = "closed by hand"
    assert p.select(tree, 1) == [n["c"]]


def test_without_best_first_uct_descends_and_widens_at_every_level():
    p = policy(best_first=False, **_REFINE)
    tree, n = _one_strategy_tree(p)
    assert p.select(tree, 1) == [n["a"]]  # a is under its budget: UCT expands it


def test_best_first_leaves_the_choice_of_strategy_to_uct():
    p = policy(best_first=True, root_max_children=2, root_exploration=0.0, strategy_trials=0,
               max_backup=1.0, max_children=3, depth_decay=0, widening=False, dive=False,
               pruning=False)
    tree = Tree.new()
    a = add(p, tree, ROOT, 2.5)  # the better first attempt
    b = add(p, tree, ROOT, 1.2)
    b1 = add(p, tree, b, 3.0)  # the strategy that went further
    for _ in range(3):
        add(p, tree, a, 1.5)  # a is full, its children are slower
    assert p.select(tree, 1) == [b1]
