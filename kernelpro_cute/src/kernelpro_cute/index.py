"""A cached search index over a CUTLASS/CuTe tree.

Storage: one SQLite file per corpus state,
``$XDG_CACHE_HOME/kernelpro/cute-index/<corpus hash>.sqlite`` (``~/.cache`` when the
variable is unset). The hash covers the index format version, the corpus root and every
indexed file's relative path, size and mtime, so any change to the tree gives a new file
and the next open rebuilds; a build writes a temporary file and renames it into place.

Tables: ``chunks`` (path, kind, symbol, qualified name, line range, signature), the
contentless FTS5 table ``chunks_fts`` with three columns of pre-split terms (path,
symbol, body; see :mod:`kernelpro_cute.terms`), and ``symbols`` (folded name -> chunk).

Ranking of a query (``CuteIndex.search``):
1. FTS5 BM25 over the OR of the query's terms, column weights path 3, symbol 8, body 1;
   the best ``CANDIDATES`` chunks go on.
2. Each candidate's score: ``bm25 / best_bm25`` (0..1), plus 0.25 x the share of query terms
   found in the chunk's symbol terms, plus 0.35 x the share found in its path terms,
   plus 0.3 x the share of the file name's parts that the query names (``layout.hpp``
   for "layout composition" over ``layout_composed.hpp``); a case-exact symbol match
   gets 0.6, a case/underscore-folded one 0.4; x 0.6 for plain-text windows, x 0.85 for
   macros. The weights were set on the quality
   set in :mod:`kernelpro_cute.quality`.
3. Chunks overlapping a better chunk of the same file are dropped; the best chunk of
   each file is taken first, then the remaining slots are filled up to ``PER_FILE``
   chunks per file, so the top results name distinct files.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import tempfile
import time
from pathlib import Path

import attrs

from kernelpro_cute.chunker import CPP_SUFFIXES, TEXT_SUFFIXES, chunk_file
from kernelpro_cute.corpus import Corpus, locate
from kernelpro_cute.terms import (
    identifier_terms,
    path_terms,
    query_terms,
    stem_parts,
    text_terms,
)

INDEX_VERSION = 5
#: FTS5 rows re-scored per query
CANDIDATES = 300
#: results kept per file
PER_FILE = 2
#: lines of snippet per result
SNIPPET_LINES = 12
#: chunks longer than this many lines are indexed on their first part only; the lines
#: past it are bodies of huge selectors/kernels that would drown every other term
BODY_LINE_LIMIT = 400

W_SYMBOL_EXACT = 0.6
W_SYMBOL_FOLDED = 0.4
W_SYMBOL_TERMS = 0.25
W_PATH_TERMS = 0.35
W_STEM_PARTS = 0.3
KIND_FACTOR = {"text": 0.6, "macro": 0.85}


class CorpusPathError(ValueError):
    """A path outside the corpus or not in it; the message is one line."""


@attrs.frozen
class SearchResult:
    path: str  # relative to the corpus root
    start_line: int  # 1-based, inclusive
    end_line: int
    symbol: str  # qualified name, "" for text windows
    kind: str
    signature: str
    snippet: str  # numbered lines of the chunk that best match the query
    score: float

    def to_dict(self) -> dict:
        return attrs.asdict(self)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelpro" / "cute-index"


def indexed_files(root: Path) -> list[Path]:
    """Files of the corpus that get indexed (C++/CUDA sources and markdown), sorted."""
    suffixes = CPP_SUFFIXES + TEXT_SUFFIXES
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
        for name in filenames:
            if name.endswith(suffixes):
                out.append(Path(dirpath) / name)
    return sorted(out)


def corpus_hash(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256(f"v{INDEX_VERSION}\0{root}\0".encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(root).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY, path TEXT, kind TEXT, symbol TEXT, qualified TEXT,
    start_line INTEGER, end_line INTEGER, signature TEXT,
    symbol_terms TEXT, path_terms TEXT, stem_parts TEXT);
CREATE TABLE symbols (name TEXT, chunk_id INTEGER);
CREATE INDEX symbols_name ON symbols(name);
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    path_t, symbol_t, body_t, content='', tokenize="unicode61 tokenchars '_'");
"""


def _fold(name: str) -> str:
    return name.lower().replace("_", "")


def _file_rows(root: str, rel: str) -> list[tuple]:
    """Index rows of one file: (kind, symbol, qualified, start, end, signature,
    symbol terms, path terms, file-name parts, body terms). Runs in worker processes."""
    try:
        text = (Path(root) / rel).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    lines = text.splitlines()
    pterms = " ".join(path_terms(rel))
    stem = " ".join(stem_parts(rel))
    rows = []
    for ch in chunk_file(rel, text):
        end = min(ch.end_line, ch.start_line + BODY_LINE_LIMIT - 1)
        body = "\n".join(lines[ch.start_line - 1 : end])
        sterms = " ".join(identifier_terms(ch.symbol)) if ch.symbol else ""
        rows.append((ch.kind, ch.symbol, ch.qualified, ch.start_line, ch.end_line, ch.signature,
                     sterms, pterms, stem, " ".join(text_terms(body))))
    return rows


#: fewer files than this are chunked in-process (a pool costs more than it saves)
POOL_MIN_FILES = 50


def _all_rows(root: Path, rels: list[str], workers: int, min_files: int = POOL_MIN_FILES):
    """(rel, rows) per file, in file order; chunked in ``workers`` processes when > 1."""
    if workers > 1 and len(rels) >= min_files:
        try:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=workers) as pool:
                yield from zip(rels, pool.map(_file_rows, [str(root)] * len(rels), rels, chunksize=16))
            return
        except (OSError, ImportError, RuntimeError):  # no process pool here: do it serially
            pass
    for rel in rels:
        yield rel, _file_rows(str(root), rel)


def build_index(corpus: Corpus, db_path: Path, files: list[Path] | None = None,
                workers: int | None = None) -> Path:
    """Chunk and index every file of ``corpus`` into a new SQLite file at ``db_path``
    (chunking in up to ``workers`` processes; default: the CPU count, at most 8)."""
    from kernelpro.api import progress_stage  # the command's progress display, if any

    root = corpus.root
    files = indexed_files(root) if files is None else files
    rels = [f.relative_to(root).as_posix() for f in files]
    workers = workers if workers is not None else min(8, os.cpu_count() or 1)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=db_path.name + ".", suffix=".tmp", dir=db_path.parent)
    os.close(fd)
    os.unlink(tmp)
    t0 = time.perf_counter()
    con = sqlite3.connect(tmp)
    try:
        con.executescript(_SCHEMA)
        rows = syms = 0
        progress_stage(f"building the CuTe search index (first use): 0/{len(rels)} files")
        for done, (rel, file_rows) in enumerate(_all_rows(root, rels, workers), 1):
            if done % 50 == 0 or done == len(rels):
                progress_stage(f"building the CuTe search index (first use): {done}/{len(rels)} files")
            for (kind, symbol, qualified, start, end, signature, sterms, pterms, stem,
                 body_terms) in file_rows:
                cur = con.execute(
                    "INSERT INTO chunks (path, kind, symbol, qualified, start_line, end_line,"
                    " signature, symbol_terms, path_terms, stem_parts)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (rel, kind, symbol, qualified, start, end, signature, sterms, pterms, stem),
                )
                rowid = cur.lastrowid
                con.execute(
                    "INSERT INTO chunks_fts (rowid, path_t, symbol_t, body_t) VALUES (?,?,?,?)",
                    (rowid, pterms, sterms, body_terms),
                )
                rows += 1
                if symbol:
                    con.execute("INSERT INTO symbols VALUES (?,?)", (_fold(symbol), rowid))
                    syms += 1
        con.executemany(
            "INSERT INTO meta VALUES (?,?)",
            [("root", str(root)), ("version", str(INDEX_VERSION)), ("files", str(len(files))),
             ("chunks", str(rows)), ("symbols", str(syms)),
             ("build_s", f"{time.perf_counter() - t0:.1f}")],
        )
        con.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
        con.commit()
    finally:
        con.close()
    os.replace(tmp, db_path)
    return db_path


def open_index(corpus: Corpus | None = None, cache: Path | None = None) -> "CuteIndex":
    """The index of ``corpus`` (located with :func:`kernelpro_cute.corpus.locate` when
    None), built on first use and whenever the tree changed."""
    corpus = corpus or locate()
    files = indexed_files(corpus.root)
    db = (cache or cache_dir()) / f"{corpus_hash(corpus.root, files)}.sqlite"
    if not db.exists():
        build_index(corpus, db, files)
    return CuteIndex(corpus, db)


class CorpusFiles:
    """Safe reading and listing of corpus files (no index needed)."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._lines_cache: dict[str, list[str]] = {}

    def resolve(self, rel: str) -> Path:
        """Corpus-relative path -> absolute path; refuses anything outside the corpus."""
        rel = (rel or ".").strip()
        if "\0" in rel:
            raise CorpusPathError("path contains a NUL byte")
        root = self.corpus.root.resolve()
        inside = lambda p: p == root or root in p.parents  # noqa: E731
        target = (root / rel.lstrip("/")).resolve()
        if rel.startswith("/"):
            # an absolute path: fine when it lies in the corpus; a leading "/" on a
            # corpus-relative path is forgiven when that file exists
            absolute = Path(rel).resolve()
            if inside(absolute):
                target = absolute
            elif not (inside(target) and target.exists()):
                raise CorpusPathError(f"{rel}: outside the CUTLASS corpus root")
        if not inside(target):
            raise CorpusPathError(f"{rel}: outside the CUTLASS corpus root")
        if not target.exists():
            raise CorpusPathError(f"{rel}: no such file or directory in the CUTLASS corpus")
        return target

    def _lines(self, rel: str) -> list[str]:
        if rel not in self._lines_cache:
            path = self.resolve(rel)
            self._lines_cache[rel] = path.read_text(encoding="utf-8", errors="replace").splitlines()
        return self._lines_cache[rel]

    def read(self, rel: str, start: int = 1, end: int | None = None, max_lines: int = 400) -> str:
        """Lines ``start``..``end`` (1-based, inclusive) of a corpus file, numbered;
        at most ``max_lines`` lines."""
        path = self.resolve(rel)
        if path.is_dir():
            raise CorpusPathError(f"{rel}: is a directory (list it instead)")
        rel = path.relative_to(self.corpus.root.resolve()).as_posix()
        lines = self._lines(rel)
        n = len(lines)
        start = max(1, int(start))
        end = n if end is None else min(n, int(end))
        if start > n:
            raise CorpusPathError(f"{rel}: start line {start} is past the end ({n} lines)")
        if end < start:
            raise CorpusPathError(f"{rel}: end line {end} is before start line {start}")
        end = min(end, start + max_lines - 1)
        width = len(str(end))
        body = "\n".join(f"{k:>{width}}  {lines[k - 1]}" for k in range(start, end + 1))
        return f"{rel} lines {start}-{end} of {n}\n{body}"

    def list_dir(self, rel: str = ".") -> list[str]:
        """Entries of a corpus directory: subdirectories end with ``/``."""
        path = self.resolve(rel)
        if not path.is_dir():
            raise CorpusPathError(f"{rel}: not a directory")
        out = []
        for child in sorted(path.iterdir(), key=lambda p: (not p.is_dir(), p.name)):
            if child.name.startswith(".") or child.name == "__pycache__":
                continue
            out.append(child.name + ("/" if child.is_dir() else ""))
        return out



class CuteIndex(CorpusFiles):
    """Search and symbol look-up over one indexed corpus, plus its file access."""

    def __init__(self, corpus: Corpus, db_path: Path) -> None:
        super().__init__(corpus)
        self.db_path = db_path
        self._con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)

    def meta(self) -> dict[str, str]:
        return dict(self._con.execute("SELECT key, value FROM meta"))

    # --- search ------------------------------------------------------------------------

    def lookup(self, name: str, k: int = 10) -> list[SearchResult]:
        """Definitions whose symbol equals ``name`` (case and underscores ignored)."""
        rows = self._con.execute(
            "SELECT c.id, c.path, c.kind, c.symbol, c.qualified, c.start_line, c.end_line,"
            " c.signature FROM symbols s JOIN chunks c ON c.id = s.chunk_id WHERE s.name = ?"
            " ORDER BY (c.kind IN ('class','struct','function','alias')) DESC,"
            " (c.path LIKE 'include/%') DESC, c.path, c.start_line LIMIT ?",
            (_fold(name.split("::")[-1]), k),
        ).fetchall()
        terms = query_terms(name)
        return [self._result(r, terms, 1.0) for r in rows]

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        """Best ``k`` chunks for ``query`` (see the module docstring for the ranking)."""
        terms = query_terms(query)
        if not terms:
            raise ValueError("the query has no searchable words")
        match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
        rows = self._con.execute(
            "SELECT c.id, c.path, c.kind, c.symbol, c.qualified, c.start_line, c.end_line,"
            " c.signature, c.symbol_terms, c.path_terms, c.stem_parts,"
            " bm25(chunks_fts, 3.0, 8.0, 1.0) AS r"
            " FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid"
            " WHERE chunks_fts MATCH ? ORDER BY r LIMIT ?",
            (match, CANDIDATES),
        ).fetchall()
        if not rows:
            return []
        best = -rows[0][-1] or 1.0
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query))
        folded_words = {_fold(w) for w in words}
        tset = set(terms)
        scored = []
        for row in rows:
            (_id, path, kind, symbol, _q, _s, _e, _sig, sterms, pterms, stem, r) = row
            score = (-r) / best
            if symbol in words:
                score += W_SYMBOL_EXACT
            elif symbol and _fold(symbol) in folded_words:
                score += W_SYMBOL_FOLDED
            if sterms:
                score += W_SYMBOL_TERMS * len(tset & set(sterms.split())) / len(tset)
            score += W_PATH_TERMS * len(tset & set(pterms.split())) / len(tset)
            parts = stem.split()
            if parts:
                score += W_STEM_PARTS * sum(1 for p in parts if p in tset) / len(parts)
            score *= KIND_FACTOR.get(kind, 1.0)
            scored.append((score, row))
        scored.sort(key=lambda x: -x[0])
        chosen: list[tuple[float, tuple]] = []
        per_file: dict[str, int] = {}
        # first pass: the best chunk of each file; second pass: fill up to PER_FILE
        for limit in (1, PER_FILE):
            for score, row in scored:
                if len(chosen) >= k:
                    break
                path, start, end = row[1], row[5], row[6]
                if per_file.get(path, 0) >= limit:
                    continue
                if any(c[1][1] == path and not (end < c[1][5] or start > c[1][6]) for c in chosen):
                    continue
                chosen.append((score, row))
                per_file[path] = per_file.get(path, 0) + 1
        chosen.sort(key=lambda x: -x[0])
        return [self._result(row[:8], terms, score) for score, row in chosen]

    def _result(self, row: tuple, terms: list[str], score: float) -> SearchResult:
        _id, path, kind, symbol, qualified, start, end, signature = row[:8]
        return SearchResult(
            path=path, start_line=start, end_line=end, symbol=qualified or symbol, kind=kind,
            signature=signature, snippet=self._snippet(path, start, end, terms),
            score=round(float(score), 4),
        )

    def _snippet(self, path: str, start: int, end: int, terms: list[str]) -> str:
        """The ``SNIPPET_LINES`` lines of the chunk with the most query-term hits (the
        first lines win ties), numbered."""
        try:
            lines = self._lines(path)
        except (CorpusPathError, OSError):
            return ""
        end = min(end, len(lines))
        span = SNIPPET_LINES
        if end - start + 1 <= span:
            lo = start
        else:
            tset = set(terms)
            hits = [len(tset & set(text_terms(lines[k - 1]))) for k in range(start, end + 1)]
            window = sum(hits[:span])
            best_sum, best_lo = window, 0
            for i in range(1, len(hits) - span + 1):
                window += hits[i + span - 1] - hits[i - 1]
                if window > best_sum:
                    best_sum, best_lo = window, i
            lo = start + best_lo
        hi = min(end, lo + span - 1)
        return "\n".join(f"{k}: {lines[k - 1]}" for k in range(lo, hi + 1))
