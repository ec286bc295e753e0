"""Monte Carlo tree search adapted to kernel optimization (search policy ``mcts``).

A node is a candidate program, its children are generations from it (see
:mod:`kernelpro.search.tree`). Every adaptation below has a switch in :class:`Settings`
so that it can be turned off for ablation:

* **UCT selection.** From the root, descend to the child maximising
  ``Q + c * sqrt(ln N_parent / N_child)`` (Kocsis & Szepesvari 2006), where ``Q`` is the
  calibrated value of the child's subtree (a mix of its mean and its best, ``max_backup``)
  and ``N`` counts evaluated candidates in a subtree (virtual losses included).
* **Progressive widening.** A node with ``N`` visits may have at most
  ``ceil(k * N**alpha)`` children (Coulom 2007; Chaslot et al. 2008). While it has fewer it
  is expanded; otherwise the search descends into its children. A node none of whose
  children can be selected may still be expanded up to its branching budget, so that a
  parent whose every child failed is not stuck. With best-first refinement on (the default)
  the search stops descending at a strategy, so widening acts at the root only.
* **Asymmetric branching.** The branching budget (the most children a node ever gets), the
  widening coefficient and the exploration constant differ between the root (distinct
  strategies: wide, exploratory) and refinement nodes (narrow, shrinking with depth,
  exploitative). A strategy (a child of the root) is valued as the best so far until
  ``strategy_trials`` candidates were evaluated in its subtree (first-play urgency), since
  a first attempt says little about where a strategy goes.
* **Best-first refinement.** Below the root the goal is the best program of a strategy,
  not a good average: once UCT has picked a strategy (a child of the root), the search
  expands the open candidate of that subtree with the best own reward that is still under
  its branching budget (ties: the earliest added), rather than descending by UCT through
  subtree averages. Exploration happens between strategies (root UCT, first-play urgency,
  virtual loss spreading a batch over strategies); within a strategy it comes from the
  branching budget, which moves the search to the next-best candidate once the best has
  had its children. Switched off, UCT with progressive widening decides at every level.
* **Greedy playout.** A candidate that sets a new best for the problem is expanded in the
  next batch (``dive``), before UCT fills the rest of the batch; MCTS's simulation step,
  done with real evaluations.
* **Log-reward calibration.** ``Node.reward`` is the reward function's value (the built-in
  reward is the clamped log speedup). Values are normalised per problem to ``[0, 1]`` by
  the range of correct rewards in this tree (the reference, log 1 = 0, included), so a
  1.1x and a 10x differ by a bounded amount. Switched off, the backup averages linear
  speedups.
* **Correctness wall.** Incorrect and failed candidates never enter a subtree's value: it
  is computed over its correct candidates only, and a subtree with none is worth
  ``wall_value`` (below every correct value). Failures still count as visits (they
  spent budget). Switched off, failures are averaged in at ``wall_value`` like slow
  candidates.
* **Dead-end pruning.** A subtree whose last ``max_consecutive_failures`` new candidates
  all failed, or whose last ``stale_expansions`` new candidates did not improve its best by
  ``min_improvement``, is closed (``Node.closed`` holds the reason) and never selected
  again; it stays in the tree. The ancestors of the best candidate so far are never closed.
* **Repairs.** When the node chosen for expansion has a failed child (or a failed repair
  of one, up to ``repair_attempts`` in a row; :mod:`kernelpro.search.repair`), that child is
  expanded instead: the generator fixes it with its verdict in hand. A failed node whose
  repair is correct leads to it like any other node (it is never expanded for itself).
* **Parallel expansion.** ``select(tree, n)`` returns up to ``n`` parents at once. Each
  selection adds a virtual loss to every node of its path (``Node.virtual_loss``), which
  counts as ``virtual_loss`` extra visits valued at the worst correct value; ``update`` or
  ``release`` removes it.

Every statistic lives on the nodes (``visits``, ``value_sum``, ``virtual_loss``,
``closed``, ``stats``) and the random generator's state in :meth:`MCTS.state`, so a tree
saved with :meth:`Tree.save` and reloaded continues with identical selections.

Node ``stats`` keys written here: ``n_correct`` / ``n_fail`` (evaluated candidates in the
subtree), ``best_reward_raw`` (best backed-up value in the subtree), ``best_reward`` (best
correct reward in the subtree, for pruning), ``stale`` (candidates added to the subtree
since its best last improved), ``fail_streak`` (consecutive failed candidates in the
subtree), ``pending`` (expansions selected and not yet resolved), ``empty`` (expansions
that produced nothing), ``backed_up`` (the node's own result was backed up), ``dive`` (set
a new best, to be expanded next).
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable

import attrs

from kernelpro.api import SearchPolicy
from kernelpro.hookspecs import hookimpl
from kernelpro.search.repair import anchor, repair_targets
from kernelpro.search.tree import ROOT, Node, Tree

_pos = attrs.validators.gt(0)
_nonneg = attrs.validators.ge(0)
_pos_f = attrs.validators.gt(0.0)  # for float fields: attrs types a validator by its bound
_nonneg_f = attrs.validators.ge(0.0)


@attrs.frozen
class Settings:
    """Config keys of the ``mcts`` policy. Defaults were tuned on the development seeds
    (0-199) of the simulated landscapes in ``benchmarks/search_sim`` (``tune.py``,
    ``screen.py``) and reported on other seeds (``RESULTS.md``)."""

    # UCT exploration constant below the root, on normalised values in [0, 1]; below the root
    # it acts only with best_first off (best-first refinement does not descend by UCT below a
    # strategy); with asymmetric off it is also the root's
    exploration: float = attrs.field(default=0.05, validator=_nonneg_f)
    # share of a subtree's best (instead of its mean) in its value: 0 = plain UCT mean.
    # The goal is the best kernel, not the average one; the mean part damps timing noise.
    max_backup: float = attrs.field(
        default=0.85, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)]
    )

    # progressive widening: at most ceil(k * N**alpha) children after N visits
    widening: bool = True
    widening_k: float = attrs.field(default=1.5, validator=_pos_f)
    widening_alpha: float = attrs.field(
        default=0.5, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)]
    )

    # asymmetric branching: the root explores distinct strategies widely, refinements narrowly
    asymmetric: bool = True
    root_max_children: int = attrs.field(default=8, validator=_pos)
    root_widening_k: float = attrs.field(default=2.0, validator=_pos_f)
    # UCT constant among the root's children (strategies); ``exploration`` applies below.
    # With asymmetric off, ``exploration`` applies everywhere.
    root_exploration: float = attrs.field(default=0.3, validator=_nonneg_f)
    # first-play urgency for strategies: a child of the root whose subtree holds fewer
    # candidates than this is valued as the best so far, because a first attempt says little
    # about where a strategy can go (0 = off)
    strategy_trials: int = attrs.field(default=4, validator=_nonneg)
    # refinement budget at depth 1; with asymmetric off, the budget of every node. Under
    # best-first refinement it is how often the best candidate of a strategy is refined
    # before the next-best gets a turn: 6 flat (no decay) was best on development seeds
    # 0-199 at budgets 50, 100 and 200 among 3 (decaying to 2), 4, 5, 6, 8 and 12
    max_children: int = attrs.field(default=6, validator=_pos)
    depth_decay: int = attrs.field(default=0, validator=_nonneg)  # fewer children per level
    min_children: int = attrs.field(default=2, validator=_pos)

    # reward calibration: log-speedup rewards normalised per problem (off: linear speedups)
    log_reward: bool = True
    # smallest reward range used for normalisation: log(1.1), so noise around 1.0x is not
    # stretched to the whole [0, 1] scale
    min_span: float = attrs.field(default=0.0953, validator=_pos_f)
    correctness_wall: bool = True
    wall_value: float = -0.5  # normalised value of failures (correct ones are in [0, 1])

    # dead-end pruning
    pruning: bool = True
    max_consecutive_failures: int = attrs.field(default=4, validator=_pos)
    stale_expansions: int = attrs.field(default=15, validator=_pos)
    # an improvement must beat the subtree's best by this fraction (timing noise is ~1-5%)
    min_improvement: float = attrs.field(default=0.02, validator=_nonneg_f)

    # playout: a candidate that sets a new best for the problem is expanded next, once,
    # before UCT picks the rest of the batch (a greedy one-step playout)
    dive: bool = True
    # best-first refinement: UCT picks the strategy (a child of the root); inside its subtree
    # the open candidate with the best own reward that can still be expanded is expanded,
    # instead of descending further by UCT. Off: UCT (with widening) at every level.
    best_first: bool = True

    # parallel expansion: pretend visits per in-flight selection, valued as the worst correct
    virtual_loss: float = attrs.field(default=2.5, validator=_nonneg_f)
    # a node whose expansions produced nothing this many times is closed (liveness, not pruning)
    max_empty_expansions: int = attrs.field(default=2, validator=_pos)
    # repairs of one failed candidate in a row (a failed repair is repaired again); 0: off
    repair_attempts: int = attrs.field(default=2, validator=_nonneg)


class MCTS(SearchPolicy):
    """UCT over strategies with best-first refinement inside them, progressive widening,
    asymmetric branching, calibrated rewards behind a correctness wall, dead-end pruning and
    virtual loss."""

    name = "mcts"
    Settings = Settings
    description = "Monte Carlo tree search with progressive widening and dead-end pruning"

    def __init__(self, settings: Any = None, rng: random.Random | None = None) -> None:
        super().__init__(settings, rng)
        self._restored = False  # set by load_state: in-flight marks in the tree are stale

    # --- the SearchPolicy protocol -------------------------------------------------------

    def select(self, tree: Tree, n: int) -> list[str]:
        """Pick up to ``n`` parents to expand now, applying a virtual loss per pick."""
        self._sync(tree)
        picked: list[str] = []
        dives = self._dives(tree) if self.settings.dive else []
        for _ in range(max(0, n)):
            node_id = dives.pop(0) if dives else self._descend(tree)
            if node_id is None:
                node_id = self._any_repair(tree)  # nothing to expand, maybe something to fix
                if node_id is None:
                    break
            node_id = self._repair_instead(tree, node_id)
            self._apply_virtual_loss(tree, node_id)
            picked.append(node_id)
        return picked

    def update(self, tree: Tree, node_id: str) -> None:
        """Node ``node_id`` was added with its reward: remove the virtual loss its parent's
        selection applied (if one is pending) and back its value up to the root."""
        self._sync(tree, backup=False)
        node = tree[node_id]
        if node.parent is not None:
            self._remove_virtual_loss(tree, node.parent)
        if not node.stats.get("backed_up"):
            self._backup(tree, node)

    def failed(self, tree: Tree, node_id: str) -> None:
        """The generator failed on an expansion of ``node_id``: remove its virtual loss; the
        node stays open (it produced nothing through no fault of its own)."""
        self._sync(tree, backup=False)
        self._remove_virtual_loss(tree, node_id)

    def release(self, tree: Tree, node_id: str) -> None:
        """An expansion of ``node_id`` produced nothing: remove its virtual loss."""
        self._sync(tree, backup=False)
        node = tree[node_id]
        self._remove_virtual_loss(tree, node_id)
        node.stats["empty"] = node.stats.get("empty", 0) + 1
        if node.closed is None and node.stats["empty"] >= self.settings.max_empty_expansions:
            node.closed = f"exhausted: generation produced nothing {node.stats['empty']} times"

    def state(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"version": 1, "rng": [version, list(internal), gauss]}

    def load_state(self, state: dict[str, Any]) -> None:
        if state.get("rng"):
            version, internal, gauss = state["rng"]
            self.rng.setstate((version, tuple(internal), gauss))
        self._restored = True

    # --- structure: budgets, widening, what can be selected ------------------------------

    def branching_budget(self, node: Node) -> int:
        """The most children ``node`` ever gets."""
        s = self.settings
        if not s.asymmetric:
            return s.max_children
        if node.id == ROOT:
            return s.root_max_children
        return max(s.min_children, s.max_children - s.depth_decay * (node.depth - 1))

    def child_limit(self, node: Node) -> int:
        """Children allowed now: ``min(budget, ceil(k * N**alpha))`` with N = visits."""
        s = self.settings
        budget = self.branching_budget(node)
        if not s.widening:
            return budget
        k = s.root_widening_k if (s.asymmetric and node.id == ROOT) else s.widening_k
        # the epsilon keeps ceil(2.0000000001) from becoming 3 on exact powers
        widened = math.ceil(k * node.visits**s.widening_alpha - 1e-9)
        return min(budget, max(1, widened))

    @staticmethod
    def _pending(node: Node) -> int:
        return int(node.stats.get("pending", 0))

    def _is_open(self, node: Node) -> bool:
        if node.closed is not None:
            return False
        if node.id == ROOT:
            return True
        return node.correct and node.reward is not None

    def _repair_instead(self, tree: Tree, node_id: str) -> str:
        """A failed child of ``node_id`` to repair (the newest), else ``node_id``."""
        targets = repair_targets(tree, self.settings.repair_attempts, busy=self._pending)
        mine = [nd for nd in targets if anchor(tree, nd).id == node_id]
        return mine[-1].id if mine else node_id

    def _any_repair(self, tree: Tree) -> str | None:
        """The newest repairable node whose anchor is still open, else None."""
        targets = repair_targets(tree, self.settings.repair_attempts, busy=self._pending)
        for nd in reversed(targets):
            if anchor(tree, nd).closed is None:
                return nd.id
        return None

    def _selectable(self, tree: Tree) -> set[str]:
        """Ids of open nodes that can be expanded now or lead to one that can (a failed
        node leads to its repaired children)."""
        out: set[str] = set()
        for node in sorted(tree, key=lambda nd: -nd.depth):
            if not self._is_open(node):
                if node.closed is None and any(c in out for c in node.children):
                    out.add(node.id)  # passed through, never expanded for itself
                continue
            grown = len(node.children) + self._pending(node)
            if grown < self.branching_budget(node) or any(c in out for c in node.children):
                out.add(node.id)
        return out

    def _dives(self, tree: Tree) -> list[str]:
        """Nodes that set a new best for the problem since the last selection and can still
        be expanded, best first; their mark is consumed."""
        out = []
        for node in tree:
            if node.stats.get("dive"):
                node.stats["dive"] = False
                grown = len(node.children) + self._pending(node)
                if self._is_open(node) and grown < self.branching_budget(node):
                    out.append(node)
        out.sort(key=lambda nd: -(nd.reward or 0.0))  # stable: ties keep insertion order
        return [nd.id for nd in out]

    def _descend(self, tree: Tree) -> str | None:
        selectable = self._selectable(tree)
        if ROOT not in selectable:
            return None
        span = self._span(tree)
        node = tree.root
        while True:
            kids = [tree[c] for c in node.children if c in selectable]
            grown = len(node.children) + self._pending(node)
            if self._is_open(node) and (grown < self.child_limit(node) or (
                not kids and grown < self.branching_budget(node)
            )):
                return node.id
            node = self._best_child(node, kids, span)
            if self.settings.best_first and node.parent == ROOT:
                return self._best_in_subtree(tree, node, selectable)

    def _best_in_subtree(self, tree: Tree, top: Node, selectable: set[str]) -> str:
        """The selectable node of ``top``'s subtree with the best own reward that can still
        be expanded (ties: the earliest added); ``top`` is selectable, so one exists."""
        inside: set[str] = set()
        stack = [top.id]
        while stack:
            nid = stack.pop()
            inside.add(nid)
            stack.extend(c for c in tree[nid].children if c in selectable)
        best: Node | None = None
        for nd in tree:  # insertion order
            if nd.id not in inside or not self._is_open(nd):
                continue
            if len(nd.children) + self._pending(nd) >= self.branching_budget(nd):
                continue
            if best is None or (nd.reward or 0.0) > (best.reward or 0.0):
                best = nd
        assert best is not None
        return best.id

    def _best_child(self, parent: Node, kids: list[Node], span: tuple[float, float]) -> Node:
        scores = [self.uct(parent, kid, span) for kid in kids]
        top = max(scores)
        tied = [kid for kid, sc in zip(kids, scores) if sc >= top - 1e-12]
        return tied[0] if len(tied) == 1 else tied[self.rng.randrange(len(tied))]

    # --- values --------------------------------------------------------------------------

    def _span(self, tree: Tree) -> tuple[float, float]:
        """(lo, hi) of correct log rewards in this tree, the reference (0.0) included."""
        rewards = [n.reward for n in tree if n.id != ROOT and n.correct and n.reward is not None]
        lo = min([0.0, *rewards])
        hi = max([0.0, *rewards])
        return lo, max(hi, lo + self.settings.min_span)

    def _raw(self, node: Node) -> float:
        """The value a correct node contributes to the backup, before normalisation."""
        assert node.reward is not None
        if self.settings.log_reward:
            return node.reward
        if node.speedup is not None:
            return node.speedup
        return math.exp(min(node.reward, 50.0))

    def _top(self, span: tuple[float, float]) -> float:
        """The best value on the current scale: 1 normalised, the best speedup otherwise."""
        return 1.0 if self.settings.log_reward else math.exp(span[1])

    def _normalise(self, raw: float, span: tuple[float, float]) -> float:
        if not self.settings.log_reward:
            return raw
        lo, hi = span
        return (raw - lo) / (hi - lo)

    def value(self, node: Node, span: tuple[float, float]) -> float:
        """Calibrated value of ``node``'s subtree (virtual loss excluded)."""
        s = self.settings
        n_ok = node.stats.get("n_correct", 0)
        n_fail = node.stats.get("n_fail", 0)
        if n_ok:
            mean = self._normalise(node.value_sum / n_ok, span)
            best = self._normalise(node.stats["best_reward_raw"], span)
            q_ok = (1.0 - s.max_backup) * mean + s.max_backup * best
        if s.correctness_wall:
            return q_ok if n_ok else s.wall_value
        total = n_ok + n_fail
        if total == 0:
            return s.wall_value
        return ((q_ok * n_ok if n_ok else 0.0) + s.wall_value * n_fail) / total

    def uct(self, parent: Node, node: Node, span: tuple[float, float]) -> float:
        """``Q + c * sqrt(ln N_parent / N_node)``, virtual losses counted as visits that
        scored the worst correct value (0 normalised; speedup 0 when uncalibrated)."""
        s = self.settings
        vl = s.virtual_loss * node.virtual_loss
        weight = node.stats.get("n_correct", 0) if s.correctness_wall else node.visits
        weight = max(weight, 1)
        value = self.value(node, span)
        if parent.id == ROOT and node.visits < s.strategy_trials:
            value = self._top(span)  # an untried strategy is judged after a few refinements
        q = value * weight / (weight + vl)
        n_node = node.visits + vl
        n_parent = parent.visits + s.virtual_loss * parent.virtual_loss
        if n_node <= 0:
            return math.inf
        c = s.root_exploration if (s.asymmetric and parent.id == ROOT) else s.exploration
        return q + c * math.sqrt(math.log(max(n_parent, 1.0)) / n_node)

    # --- bookkeeping ---------------------------------------------------------------------

    def _path(self, tree: Tree, node_id: str) -> list[Node]:
        return tree.path_to_root(node_id)

    def _apply_virtual_loss(self, tree: Tree, node_id: str) -> None:
        tree[node_id].stats["pending"] = self._pending(tree[node_id]) + 1
        for node in self._path(tree, node_id):
            node.virtual_loss += 1

    def _remove_virtual_loss(self, tree: Tree, node_id: str) -> None:
        node = tree[node_id]
        if self._pending(node) <= 0:
            return  # nothing in flight (extra children of one expansion, or after resume)
        node.stats["pending"] = self._pending(node) - 1
        for nd in self._path(tree, node_id):
            nd.virtual_loss = max(0, nd.virtual_loss - 1)

    def _sync(self, tree: Tree, backup: bool = True) -> None:
        """After a restart nothing is in flight: drop stale virtual losses. Back up any
        evaluated node the loop added without calling :meth:`update` (killed between the
        two), in insertion order."""
        if self._restored:
            for node in tree:
                node.virtual_loss = 0
                if "pending" in node.stats:
                    node.stats["pending"] = 0
            self._restored = False
        if backup:
            for node in list(tree):
                if node.id != ROOT and node.reward is not None and not node.stats.get("backed_up"):
                    self._backup(tree, node)

    def _backup(self, tree: Tree, node: Node) -> None:
        """Add ``node``'s own result to every node on its path, then apply pruning."""
        s = self.settings
        node.stats["backed_up"] = True
        correct = node.correct and node.reward is not None
        raw = self._raw(node) if correct else None
        for nd in self._path(tree, node.id):
            nd.visits += 1
            if raw is not None:  # the node is correct
                nd.value_sum += raw
                nd.stats["n_correct"] = nd.stats.get("n_correct", 0) + 1
                if nd.stats.get("best_reward_raw") is None or raw > nd.stats["best_reward_raw"]:
                    nd.stats["best_reward_raw"] = raw
            else:
                nd.stats["n_fail"] = nd.stats.get("n_fail", 0) + 1

        # improvement, staleness and failure streaks of every subtree holding the node,
        # on the reward's (log) scale
        if correct:
            node.stats.setdefault("best_reward", node.reward)
        if node.parent is None:
            return
        threshold = math.log1p(s.min_improvement)
        ancestors = self._path(tree, node.parent)
        for anc in ancestors:
            best = anc.stats.get("best_reward")
            if correct and (best is None or node.reward > best + threshold):
                anc.stats["best_reward"] = node.reward
                anc.stats["stale"] = 0
                if anc.id == ROOT:
                    node.stats["dive"] = True  # a new best for the problem
            else:
                anc.stats["stale"] = anc.stats.get("stale", 0) + 1
            anc.stats["fail_streak"] = 0 if correct else anc.stats.get("fail_streak", 0) + 1
        if not s.pruning:
            return
        incumbent = tree.best()
        # the lineage of the best candidate so far is where refinement pays most: it is not
        # closed (the best candidate itself may be)
        protected = (
            {nd.id for nd in tree.path_to_root(incumbent.id)} - {incumbent.id}
            if incumbent is not None
            else set()
        )
        for anc in ancestors:
            if anc.id != ROOT and anc.closed is None and anc.id not in protected:
                self._maybe_prune(anc)

    def _maybe_prune(self, node: Node) -> None:
        s = self.settings
        if node.stats.get("fail_streak", 0) >= s.max_consecutive_failures:
            node.closed = (
                f"dead end: the last {node.stats['fail_streak']} candidates in this subtree "
                f"failed to compile or verify"
            )
        elif node.stats.get("stale", 0) >= s.stale_expansions:
            best = node.stats.get("best_reward")
            shown = f"{math.exp(best):.2f}x" if best is not None else "none correct"
            node.closed = (
                f"no improvement in {node.stats['stale']} expansions of this subtree "
                f"(best {shown})"
            )


@hookimpl
def kernelpro_register_search_policies(register: Callable[[type[SearchPolicy]], None]) -> None:
    register(MCTS)
