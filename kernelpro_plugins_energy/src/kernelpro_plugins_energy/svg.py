"""A small SVG scatter of time against energy: the window of matched speed shaded, the front
joined, the speed winner and the chosen point marked (written next to report.md)."""

from __future__ import annotations

from typing import Sequence
from xml.sax.saxutils import escape

from kernelpro_plugins_energy import matched

W, H = 560, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 20, 50


def front_svg(cands: Sequence[matched.Measured], front_ids: Sequence[str], speed_id: str | None,
              chosen_id: str | None, limit_ms: float | None) -> str:
    pts = [c for c in cands if c.energy_j is not None]
    if not pts:
        raise ValueError("no candidate with an energy number")
    t_lo, t_hi = min(c.runtime_ms for c in pts), max(c.runtime_ms for c in pts)
    e_lo, e_hi = min(c.energy_j or 0 for c in pts) * 1000, max(c.energy_j or 0 for c in pts) * 1000
    if limit_ms is not None:
        t_hi = max(t_hi, limit_ms)
    t_pad = (t_hi - t_lo) * 0.05 or t_lo * 0.05 or 1.0
    e_pad = (e_hi - e_lo) * 0.05 or e_lo * 0.05 or 1.0
    t_lo, t_hi, e_lo, e_hi = t_lo - t_pad, t_hi + t_pad, e_lo - e_pad, e_hi + e_pad

    def x(t: float) -> float:
        return LEFT + (t - t_lo) / (t_hi - t_lo) * (W - LEFT - RIGHT)

    def y(e_mj: float) -> float:
        return H - BOTTOM - (e_mj - e_lo) / (e_hi - e_lo) * (H - TOP - BOTTOM)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    if limit_ms is not None and speed_id is not None:
        fastest = next(c.runtime_ms for c in pts if c.id == speed_id) if any(c.id == speed_id for c in pts) else t_lo
        out.append(f'<rect x="{x(fastest):.1f}" y="{TOP}" width="{max(0.0, x(limit_ms) - x(fastest)):.1f}" '
                   f'height="{H - TOP - BOTTOM}" fill="#e8f1fb"/>')
    out.append(f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="black"/>')
    for t in (t_lo + t_pad, t_hi - t_pad):
        out.append(f'<text x="{x(t):.1f}" y="{H - BOTTOM + 15}" text-anchor="middle">{t:.4g}</text>')
    for e in (e_lo + e_pad, e_hi - e_pad):
        out.append(f'<text x="{LEFT - 5}" y="{y(e) + 4:.1f}" text-anchor="end">{e:.4g}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 12}" text-anchor="middle">time per call (ms)</text>')
    out.append(f'<text x="14" y="{(TOP + H - BOTTOM) / 2:.0f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2:.0f})">energy per call (mJ)</text>')
    on_front = sorted((c for c in pts if c.id in set(front_ids)), key=lambda c: c.runtime_ms)
    if len(on_front) > 1:
        path = " ".join(f"{x(c.runtime_ms):.1f},{y((c.energy_j or 0) * 1000):.1f}" for c in on_front)
        out.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" stroke-dasharray="4 3"/>')
    for c in pts:
        cx, cy = x(c.runtime_ms), y((c.energy_j or 0) * 1000)
        fill = "#1f77b4" if c.id in set(front_ids) else "#999999"
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{fill}"><title>{escape(c.id)}: '
                   f'{c.runtime_ms:.4g} ms, {(c.energy_j or 0) * 1000:.4g} mJ</title></circle>')
        if c.id == speed_id:
            out.append(f'<rect x="{cx - 7:.1f}" y="{cy - 7:.1f}" width="14" height="14" fill="none" stroke="#d62728"/>')
            out.append(f'<text x="{cx + 9:.1f}" y="{cy - 8:.1f}" fill="#d62728">speed winner {escape(c.id)}</text>')
        if c.id == chosen_id and chosen_id != speed_id:
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="8" fill="none" stroke="#2ca02c" stroke-width="2"/>')
            out.append(f'<text x="{cx + 10:.1f}" y="{cy + 16:.1f}" fill="#2ca02c">chosen {escape(c.id)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
