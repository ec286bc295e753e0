"""Draw the search tree as markdown for ``report.md``.

One line per node in a fenced text block::

    root  reference  (visits 42)
    ├── c1  tile 64x64 smem  1.42x  v12
    │   ├── c5  vectorized float4 loads  2.10x  v5  ★
    │   └── … 4 failed: compile_error ×3, incorrect ×1 (c7, c8, c9, c11)
    └── c2  fused epilogue  1.05x  v4  ✂ no improvement in 4 expansions (subtree best 1.05x)

``★`` marks the path to the best candidate, ``✂`` a node closed by the policy with its
reason. When a node has three or more failed leaf children they collapse into one line
(drawn last) so that trees of ~100 nodes stay readable.
"""

from __future__ import annotations

from collections import Counter

from kernelpro.search.tree import ROOT, Node, Tree

WINNER = "★"
CLOSED = "✂"
DESCRIPTION_CHARS = 60  # keep each line within a typical markdown viewer's width
COLLAPSE_RUN = 3  # this many failed leaf siblings collapse into one line


def _outcome(node: Node) -> str:
    if node.kind == "root":
        return "reference"
    if node.correct and node.speedup is not None:
        return f"{node.speedup:.2f}x"
    if node.correct:
        return f"reward {node.reward:.3g}" if node.reward is not None else "correct"
    return f"✗ {node.verdict or 'failed'}"


def _description(node: Node) -> str:
    text = " ".join(node.description.split())
    if len(text) > DESCRIPTION_CHARS:
        text = text[: DESCRIPTION_CHARS - 1] + "…"
    return text


def _line(node: Node, on_winner_path: bool) -> str:
    parts = [node.id]
    if node.kind != "root" and node.description:
        parts.append(_description(node))
    parts.append(_outcome(node))
    if node.visits:
        parts.append(f"v{node.visits}")
    if on_winner_path:
        parts.append(WINNER)
    if node.closed:
        parts.append(f"{CLOSED} {node.closed}")
    return "  ".join(parts)


def _is_failed_leaf(node: Node) -> bool:
    return not node.correct and not node.children and node.kind != "root"


def _groups(tree: Tree, node: Node) -> list[Node | list[Node]]:
    """Children of ``node`` in order; when it has COLLAPSE_RUN or more failed leaves, they
    are gathered into one group drawn last."""
    children = [tree[c] for c in node.children]
    failed = [c for c in children if _is_failed_leaf(c) and not c.closed]
    if len(failed) < COLLAPSE_RUN:
        return list(children)
    kept: list[Node | list[Node]] = [c for c in children if c not in failed]
    kept.append(failed)
    return kept


def _collapsed_line(run: list[Node]) -> str:
    counts = Counter(n.verdict or "failed" for n in run)
    kinds = ", ".join(f"{verdict} ×{count}" for verdict, count in counts.most_common())
    ids = ", ".join(n.id for n in run)
    return f"… {len(run)} failed: {kinds} ({ids})"


def render_tree_markdown(tree: Tree, best_id: str | None = None) -> str:
    """The tree as a markdown section body: a summary line, a legend and the drawing.
    ``best_id``: the run's best as the loop chose it (default: the highest reward)."""
    best = tree[best_id] if best_id is not None and best_id in tree else tree.best()
    winner = {n.id for n in tree.path_to_root(best.id)} if best is not None else set()
    candidates = tree.candidates()
    n_correct = sum(1 for n in candidates if n.correct)
    n_closed = sum(1 for n in candidates if n.closed)
    summary = (
        f"{len(candidates)} candidates ({n_correct} correct, {len(candidates) - n_correct} failed), "
        f"{n_closed} closed by the search policy"
    )
    if best is not None:
        shown = f"{best.speedup:.2f}x" if best.speedup is not None else f"reward {best.reward:.3g}"
        summary += f"; best {best.id} at {shown} (depth {best.depth})"
    lines: list[str] = []

    def draw(node: Node, prefix: str) -> None:
        groups = _groups(tree, node)
        for i, item in enumerate(groups):
            last = i == len(groups) - 1
            branch = "└── " if last else "├── "
            if isinstance(item, list):
                lines.append(prefix + branch + _collapsed_line(item))
                continue
            lines.append(prefix + branch + _line(item, item.id in winner))
            draw(item, prefix + ("    " if last else "│   "))

    root = tree.root if ROOT in tree else None
    if root is None:
        return summary + "\n"
    lines.append(_line(root, ROOT in winner))
    draw(root, "")
    legend = (
        f"`{WINNER}` path to the best candidate · `{CLOSED}` closed by the search policy "
        f"(reason given) · `✗` failed (verdict) · `vN` visits (candidates evaluated in the subtree)"
    )
    return "\n".join([summary, "", legend, "", "```text", *lines, "```", ""])
