"""Turning code and queries into index terms.

Every identifier yields: its lowercase form (``make_tiled_copy``), its underscore-folded
form (``maketiledcopy``, which also equals the folded ``MakeTiledCopy``), and its parts
split at underscores, camelCase humps and digit-to-capital boundaries
(``SM90_64x128x16_F32BF16BF16_SS`` -> ``sm90``, ``64x128x16``, ``64x128``, ``f32``,
``bf16``, ``bf16``, ``ss``). Shape tokens keep their ``x`` form and also give their
two-dimension prefix, so ``64x128`` finds ``64x128x16``.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z0-9_]+")
_SHAPE = re.compile(r"\d+(?:x\d+)+")
# camelCase humps, capital runs, and digit runs attached to the letters before them:
# "TiledCopy" -> Tiled, Copy; "F32BF16BF16" -> F32, BF16, BF16; "SM90" -> SM90
_PART = re.compile(r"[A-Z]+\d+|[A-Z]?[a-z]+\d*|[A-Z]+(?![a-z])|\d+(?:x\d+)*|[a-z]+")

#: words too common in C++/CUTLASS sources or in questions to discriminate
STOPWORDS = frozenset("""
a an the of to in on for and or is are be by with from as at it its this that how what
where which do does use using used example examples show me find i want
const auto return template typename class struct static constexpr inline void int
cute cutlass namespace if else true false nullptr
cute_host_device cute_device cutlass_device cutlass_host_device
""".split())

#: domain synonyms a query term also searches for (CuTe names Hopper WGMMA "GMMA", etc.)
SYNONYMS: dict[str, tuple[str, ...]] = {
    "wgmma": ("gmma",),
    "hopper": ("sm90",),
    "h100": ("sm90",),
    "h200": ("sm90",),
    "blackwell": ("sm100",),
    "ampere": ("sm80",),
    "turing": ("sm75",),
    "volta": ("sm70",),
    "fp16": ("f16", "half"),
    "half": ("f16",),
    "bf16": ("bfloat16",),
    "bfloat16": ("bf16",),
    "fp32": ("f32",),
    "fp8": ("e4m3", "e5m2", "float8"),
    "fp64": ("f64",),
    "tf32": ("tfloat32",),
    "smem": ("shared",),
    "gmem": ("global",),
    "mbarrier": ("barrier",),
    "ldmatrix": ("ldsm",),
    "stmatrix": ("stsm",),
    "tmem": ("tmem_allocator",),
    # CuTe spells the swizzle widths SW32/SW64/SW128
    "128b": ("sw128",),
    "64b": ("sw64",),
    "32b": ("sw32",),
}


def identifier_terms(word: str) -> list[str]:
    """Terms for one identifier-like word (see the module docstring)."""
    low = word.lower()
    out = [low]
    folded = low.replace("_", "")
    if folded != low and folded:
        out.append(folded)
    pieces = [p for p in word.split("_") if p]
    for piece in pieces:
        out.extend(_piece_terms(piece, emit_piece=len(pieces) > 1))
    return out


def _piece_terms(piece: str, emit_piece: bool) -> list[str]:
    """Terms of one underscore-free piece: the piece itself (when it is not the whole
    word), shape prefixes, and its camelCase / capital-run parts."""
    low = piece.lower()
    out = [low] if emit_piece else []
    if _SHAPE.fullmatch(low):
        dims = low.split("x")
        if len(dims) > 2:
            out.append("x".join(dims[:2]))
        return out
    if piece == low:  # all lowercase: "e4m3", "async" stay whole
        return out
    parts = _PART.findall(piece)
    if len(parts) > 1:
        out.extend(p.lower() for p in parts)
    return out


def text_terms(text: str) -> list[str]:
    """Index terms of a body of code or prose, in order (repeats kept for BM25)."""
    out: list[str] = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        if len(word) > 80:  # hex blobs, long generated names
            continue
        out.extend(identifier_terms(word))
    return out


def path_terms(path: str) -> list[str]:
    """Terms of a relative path: every directory and file stem, split like identifiers."""
    stem = re.sub(r"\.[A-Za-z0-9]+$", "", path)
    return text_terms(stem.replace("/", " "))


def stem_parts(path: str) -> list[str]:
    """The parts of a file name without its suffix: ``mma_sm90_gmma.hpp`` -> mma, sm90, gmma."""
    stem = re.sub(r"\.[A-Za-z0-9]+$", "", path.rsplit("/", 1)[-1])
    parts: list[str] = []
    for piece in re.split(r"[_\W]+", stem):
        if not piece:
            continue
        sub = _PART.findall(piece) if piece != piece.lower() else [piece]
        parts.extend(p.lower() for p in (sub or [piece]))
    return parts


def query_terms(query: str) -> list[str]:
    """Distinct terms of a query, stopwords dropped, synonyms added (order kept).

    ``cp.async``-style dotted names become identifiers first (``cp_async``)."""
    q = re.sub(r"\b([A-Za-z]+)\.([A-Za-z]+)\b", r"\1_\2", query)
    seen: list[str] = []
    for term in text_terms(q):
        if term in STOPWORDS or len(term) < 2 and not term.isdigit():
            continue
        for t in (term, *SYNONYMS.get(term, ())):
            if t not in seen:
                seen.append(t)
    return seen
