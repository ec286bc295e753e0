"""The search tree as a picture: ``tree.svg`` beside ``report.md``, written from the tree
(``tree.json``) with no drawing library.

One box per candidate, children below their parent, leaves side by side in the order the
tree holds them. A box shows the id, the speedup (or the verdict of a failed candidate),
and the two median times the speedup divides (reference / candidate, from the candidate's
evaluation); its tooltip holds the description. The path to the best is drawn thick and
gold; failed candidates are red, the reference (root) grey, nodes the search policy closed
dashed. Three or more failed leaves under one parent are drawn as one box that counts them.

    python -m kernelpro.tree_svg RUN_DIR     # (re)draws RUN_DIR/tree.svg from RUN_DIR/tree.json
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Mapping
from xml.sax.saxutils import escape

from kernelpro.search.tree import ROOT, Node, Tree

BOX_W, BOX_H = 168, 50
GAP_X, GAP_Y = 14, 44
MARGIN = 16
COLLAPSE_RUN = 3

FILL = {"root": "#e5e7eb", "correct": "#dcfce7", "failed": "#fee2e2", "group": "#fef2f2"}
STROKE, BEST_STROKE = "#6b7280", "#d97706"


class _Box:
    def __init__(self, key: str, lines: list[str], fill: str, tooltip: str, dashed: bool = False,
                 on_best_path: bool = False) -> None:
        self.key = key
        self.lines = lines
        self.fill = fill
        self.tooltip = tooltip
        self.dashed = dashed
        self.on_best_path = on_best_path
        self.children: list[_Box] = []
        self.x = 0.0
        self.depth = 0


def _node_box(node: Node, timings: Mapping[str, str], winner: set[str]) -> _Box:
    if node.kind == "root":
        return _Box(node.id, [node.id, "reference"], FILL["root"], "the reference (eager PyTorch)",
                    on_best_path=node.id in winner)
    if node.correct:
        outcome = f"{node.speedup:.2f}x" if node.speedup is not None else (
            f"reward {node.reward:.3g}" if node.reward is not None else "correct")
        fill = FILL["correct"]
    else:
        outcome, fill = f"✗ {node.verdict or 'failed'}", FILL["failed"]
    lines = [f"{node.id}  {outcome}"]
    if node.id in timings:
        lines.append(timings[node.id])
    tooltip = node.description + (f"\nclosed: {node.closed}" if node.closed else "")
    return _Box(node.id, lines, fill, tooltip, dashed=bool(node.closed), on_best_path=node.id in winner)


def _build(tree: Tree, node: Node, timings: Mapping[str, str], winner: set[str]) -> _Box:
    box = _node_box(node, timings, winner)
    children = [tree[c] for c in node.children if c in tree]
    failed = [c for c in children if not c.correct and not c.children and not c.closed and c.kind != "root"]
    grouped = failed if len(failed) >= COLLAPSE_RUN else []
    for child in children:
        if child not in grouped:
            box.children.append(_build(tree, child, timings, winner))
    if grouped:
        counts = Counter(c.verdict or "failed" for c in grouped)
        kinds = ", ".join(f"{v} ×{n}" for v, n in counts.most_common())
        box.children.append(_Box("+".join(c.id for c in grouped), [f"{len(grouped)} failed", kinds[:28]],
                                 FILL["group"], ", ".join(c.id for c in grouped) + ": " + kinds))
    return box


def _place(box: _Box, depth: int, next_leaf: list[float]) -> None:
    box.depth = depth
    if not box.children:
        box.x = next_leaf[0]
        next_leaf[0] += BOX_W + GAP_X
        return
    for child in box.children:
        _place(child, depth + 1, next_leaf)
    box.x = (box.children[0].x + box.children[-1].x) / 2


def _all(box: _Box) -> list[_Box]:
    out = [box]
    for child in box.children:
        out.extend(_all(child))
    return out


def render_tree_svg(tree: Tree, best_id: str | None = None, timings: Mapping[str, str] | None = None) -> str:
    """The SVG text. ``timings``: per candidate id, the line shown under its speedup."""
    if ROOT not in tree:
        raise ValueError("the tree has no root")
    best = tree[best_id] if best_id is not None and best_id in tree else None
    winner = {n.id for n in tree.path_to_root(best.id)} if best is not None else set()
    root = _build(tree, tree.root, timings or {}, winner)
    _place(root, 0, [float(MARGIN)])
    boxes = _all(root)
    width = max(b.x for b in boxes) + BOX_W + MARGIN
    height = max(b.depth for b in boxes) * (BOX_H + GAP_Y) + BOX_H + 2 * MARGIN

    def y(b: _Box) -> float:
        return MARGIN + b.depth * (BOX_H + GAP_Y)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="12">',
           f'<rect width="100%" height="100%" fill="white"/>']
    for b in boxes:
        for c in b.children:
            thick = b.on_best_path and c.on_best_path
            out.append(f'<line x1="{b.x + BOX_W / 2:.1f}" y1="{y(b) + BOX_H:.1f}" x2="{c.x + BOX_W / 2:.1f}" '
                       f'y2="{y(c):.1f}" stroke="{BEST_STROKE if thick else STROKE}" '
                       f'stroke-width="{3 if thick else 1}"/>')
    for b in boxes:
        stroke = BEST_STROKE if b.on_best_path else STROKE
        dash = ' stroke-dasharray="5,3"' if b.dashed else ""
        out.append(f'<g><title>{escape(b.tooltip)}</title>'
                   f'<rect x="{b.x:.1f}" y="{y(b):.1f}" width="{BOX_W}" height="{BOX_H}" rx="5" fill="{b.fill}" '
                   f'stroke="{stroke}" stroke-width="{3 if b.on_best_path else 1}"{dash}/>')
        for i, text in enumerate(b.lines[:2]):
            weight = ' font-weight="bold"' if i == 0 else ""
            out.append(f'<text x="{b.x + BOX_W / 2:.1f}" y="{y(b) + 20 + 17 * i:.1f}" text-anchor="middle"'
                       f'{weight}>{escape(text)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_tree_svg(tree: Tree, path: Path, best_id: str | None = None,
                   timings: Mapping[str, str] | None = None) -> Path:
    from kernelpro.rundir import write_atomic

    write_atomic(Path(path), render_tree_svg(tree, best_id, timings))
    return Path(path)


def main(argv: list[str] | None = None) -> int:
    import json

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kernelpro.tree_svg RUN_DIR", file=sys.stderr)
        return 2
    run = Path(args[0])
    try:
        tree = Tree.load(run / "tree.json")
        summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").exists() else {}
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {run}: cannot read the tree: {exc}", file=sys.stderr)
        return 2
    from kernelpro.report import fmt_ms, read_records

    timings = {r["id"]: f"{fmt_ms(r['baseline_ms'])} / {fmt_ms(r['runtime_ms'])} ms"
               for r in read_records(run) if r.get("correct") and r.get("runtime_ms") and r.get("baseline_ms")}
    print(write_tree_svg(tree, run / "tree.svg", summary.get("best_id"), timings))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
