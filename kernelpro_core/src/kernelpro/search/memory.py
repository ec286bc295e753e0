"""Search memory: what was tried and what happened, kept in a local SQLite database across
iterations of a run and across runs, and turned into short notes for code generators.

One row per evaluated candidate: the problem, the change made (``description``), the
generator's knobs, the bottleneck class the change addressed, the titles of the findings
acted on, the verdict, the speedup over the reference, and the gain over its parent.

:meth:`SearchMemory.notes` produces lines such as::

    "tile 128x128" failed verification 2 times on this problem
    best so far on this problem: "vectorized float4 loads" at 2.31x
    "vectorized float4 loads" gave +30% on memory-bound problems (3 runs)

The database lives in the user's data directory by default
(``$XDG_DATA_HOME/kernelpro/memory.sqlite``, else ``~/.local/share/kernelpro/memory.sqlite``).
Writers may be concurrent (several runs at once): the database uses write-ahead logging, a
busy timeout and one short transaction per write.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 10_000  # a writer waits this long for another's transaction to finish
# a cross-problem lesson is quoted only when the change moved time by at least this much;
# smaller gains are within typical timing noise of GPU kernels (a few percent)
MIN_LESSON_GAIN = 0.05
REPEAT_FAILURES = 2  # a change that failed this often on a problem is worth a warning

_FAILURE_PHRASE = {
    "incorrect": "failed verification",
    "compile_error": "failed to compile",
    "compile_timeout": "timed out compiling",
    "runtime_error": "raised a runtime error",
    "cuda_error": "hit a CUDA error",
    "timeout": "timed out",
    "crash": "crashed",
    "oom": "ran out of memory",
}

_BOTTLENECK_PHRASE = {
    "memory": "memory-bound",
    "compute": "compute-bound",
    "latency": "latency-bound",
    "too_little_work": "launch/overhead-bound",
    "unknown": "unclassified",
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outcomes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    recorded_at REAL NOT NULL,
    run_id TEXT NOT NULL,
    problem_digest TEXT NOT NULL,
    problem_name TEXT NOT NULL,
    node_id TEXT NOT NULL,
    parent_id TEXT,
    generator TEXT NOT NULL,
    description TEXT NOT NULL,
    change_key TEXT NOT NULL,
    params_json TEXT NOT NULL,
    bottleneck TEXT,
    findings_json TEXT NOT NULL,
    verdict TEXT NOT NULL,
    speedup REAL,
    parent_speedup REAL,
    UNIQUE (run_id, node_id)
);
CREATE INDEX IF NOT EXISTS outcomes_problem ON outcomes (problem_digest);
CREATE INDEX IF NOT EXISTS outcomes_bottleneck ON outcomes (bottleneck, change_key);
"""


class SearchMemoryError(ValueError):
    """The memory database cannot be used; the message is one line."""


def default_path() -> Path:
    """``$XDG_DATA_HOME/kernelpro/memory.sqlite`` or ``~/.local/share/kernelpro/memory.sqlite``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kernelpro" / "memory.sqlite"


def change_key(description: str, params: dict[str, Any] | None) -> str:
    """What identifies "the same change" across candidates: the description with case and
    spacing normalised, or the sorted params when there is no description."""
    text = " ".join(description.lower().split())
    if text:
        return text
    return json.dumps(params or {}, sort_keys=True, default=str)


def _quote(description: str, params: dict[str, Any] | None) -> str:
    text = " ".join(description.split())
    if not text:
        text = ", ".join(f"{k}={v}" for k, v in sorted((params or {}).items())) or "an unnamed change"
    if len(text) > 80:
        text = text[:79] + "…"
    return f'"{text}"'


def _percent(gain: float) -> str:
    return f"{gain * 100:+.0f}%"


class SearchMemory:
    """The memory database at ``path`` (created on first use)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.Lock()
        self._conn = self._open()

    # --- connection ----------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SearchMemoryError(
                f"search memory: cannot create {self.path.parent}: {exc.strerror}"
            ) from None
        # Runs opening a new database at once (a bench's problems sharing a GPU) race for
        # its creation: switching to WAL takes the file exclusively and SQLite does not wait
        # for that lock, so "locked" there means: try again, within the busy timeout.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            conn = None
            try:
                conn = sqlite3.connect(
                    self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                    check_same_thread=False,
                )
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                self._migrate(conn)
                return conn
            except sqlite3.OperationalError as exc:
                if conn is not None:
                    conn.close()
                if "locked" in str(exc) and time.monotonic() < deadline:
                    time.sleep(0.05 + random.random() * 0.1)
                    continue
                raise SearchMemoryError(
                    f"search memory: {self.path} is not a usable database ({exc}); "
                    f"move it away or set another memory path"
                ) from None
            except sqlite3.DatabaseError as exc:
                if conn is not None:
                    conn.close()
                raise SearchMemoryError(
                    f"search memory: {self.path} is not a usable database ({exc}); "
                    f"move it away or set another memory path"
                ) from None

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.strip().split(";"):
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            elif int(row[0]) > SCHEMA_VERSION:
                raise SearchMemoryError(
                    f"search memory: {self.path} has schema version {row[0]}, newer than this "
                    f"kernelpro understands ({SCHEMA_VERSION}); upgrade kernelpro or set another path"
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "SearchMemory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _query(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._conn.execute(sql, tuple(args)).fetchall()
            except sqlite3.DatabaseError as exc:
                raise SearchMemoryError(f"search memory: {self.path}: {exc}") from None

    # --- writing -------------------------------------------------------------------------

    def record(
        self,
        problem_digest: str,
        problem_name: str,
        node_id: str,
        parent_id: str | None,
        generator: str,
        description: str,
        params: dict[str, Any] | None,
        bottleneck: str | None,
        findings: Iterable[str],
        verdict: str,
        speedup: float | None,
        run_id: str,
        parent_speedup: float | None = None,
    ) -> None:
        """Record one evaluated candidate (idempotent per ``(run_id, node_id)``).

        ``bottleneck`` and ``findings`` are the parent's bottleneck class and the titles of
        the findings the generator was given (what the change set out to fix). ``speedup``
        is over the reference, None unless correct. ``parent_speedup`` defaults to the
        recorded parent's speedup in the same run, or 1.0 when the parent is the reference
        (``root``)."""
        verdict = str(getattr(verdict, "value", verdict))
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    if parent_speedup is None and parent_id is not None:
                        if parent_id == "root":
                            parent_speedup = 1.0
                        else:
                            row = self._conn.execute(
                                "SELECT speedup FROM outcomes WHERE run_id = ? AND node_id = ?",
                                (run_id, parent_id),
                            ).fetchone()
                            parent_speedup = row[0] if row else None
                    self._conn.execute(
                        "INSERT OR IGNORE INTO outcomes (recorded_at, run_id, problem_digest,"
                        " problem_name, node_id, parent_id, generator, description, change_key,"
                        " params_json, bottleneck, findings_json, verdict, speedup, parent_speedup)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            time.time(), run_id, problem_digest, problem_name, node_id, parent_id,
                            generator, description, change_key(description, params),
                            json.dumps(params or {}, sort_keys=True, default=str), bottleneck,
                            json.dumps(list(findings)), verdict,
                            speedup if verdict == "correct" else None, parent_speedup,
                        ),
                    )
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                raise SearchMemoryError(f"search memory: {self.path}: {exc}") from None

    # --- reading -------------------------------------------------------------------------

    def count(self) -> int:
        return self._query("SELECT COUNT(*) FROM outcomes")[0][0]

    def notes(
        self, problem_digest: str, bottleneck: str | None = None, limit: int = 10
    ) -> list[str]:
        """Short lines for a generator's prompt, most useful first: repeated failures on this
        problem, the best outcomes on it, changes that slowed it down, then lessons from
        other problems with the same bottleneck class (every class, and unprofiled
        candidates, when None)."""
        lines = (
            self._repeated_failures(problem_digest)
            + self._best_here(problem_digest)
            + self._regressions_here(problem_digest)
            + self._lessons_elsewhere(problem_digest, bottleneck)
        )
        return lines[: max(0, limit)]

    def _repeated_failures(self, digest: str) -> list[str]:
        rows = self._query(
            # SQLite takes bare columns from the row holding MAX(id): the latest wording
            "SELECT change_key, verdict, COUNT(*), description, params_json, MAX(id)"
            " FROM outcomes WHERE problem_digest = ? AND verdict != 'correct'"
            " GROUP BY change_key, verdict HAVING COUNT(*) >= ? ORDER BY COUNT(*) DESC, change_key",
            (digest, REPEAT_FAILURES),
        )
        out = []
        for _key, verdict, count, description, params_json, _ in rows[:4]:
            phrase = _FAILURE_PHRASE.get(verdict, f"failed ({verdict})")
            what = _quote(description, json.loads(params_json))
            out.append(f"{what} {phrase} {count} times on this problem")
        return out

    def _best_here(self, digest: str) -> list[str]:
        rows = self._query(
            # bare columns come from the row holding MAX(speedup)
            "SELECT description, params_json, MAX(speedup), COUNT(DISTINCT run_id) FROM outcomes"
            " WHERE problem_digest = ? AND verdict = 'correct' AND speedup IS NOT NULL"
            " GROUP BY change_key ORDER BY MAX(speedup) DESC LIMIT 3",
            (digest,),
        )
        out = []
        for i, (description, params_json, speedup, runs) in enumerate(rows):
            what = _quote(description, json.loads(params_json))
            lead = "best so far on this problem" if i == 0 else "next best on this problem"
            run_word = "run" if runs == 1 else "runs"
            out.append(f"{lead}: {what} at {speedup:.2f}x over the reference ({runs} {run_word})")
        return out

    def _regressions_here(self, digest: str) -> list[str]:
        rows = self._query(
            "SELECT description, params_json, AVG(speedup / parent_speedup), COUNT(*)"
            " FROM outcomes WHERE problem_digest = ? AND verdict = 'correct'"
            " AND speedup IS NOT NULL AND parent_speedup > 0"
            " GROUP BY change_key HAVING AVG(speedup / parent_speedup) < ?"
            " ORDER BY AVG(speedup / parent_speedup) LIMIT 2",
            (digest, 1.0 - MIN_LESSON_GAIN),
        )
        return [
            f"{_quote(d, json.loads(p))} made this problem slower than its parent "
            f"({_percent(ratio - 1)}, {n} {'time' if n == 1 else 'times'})"
            for d, p, ratio, n in rows
        ]

    def _lessons_elsewhere(self, digest: str, bottleneck: str | None) -> list[str]:
        where = "problem_digest != ? AND verdict = 'correct' AND speedup IS NOT NULL" \
                " AND parent_speedup > 0"
        args: list[Any] = [digest]
        if bottleneck is not None:
            where += " AND bottleneck = ?"
            args.append(bottleneck)
        rows = self._query(
            "SELECT bottleneck, MIN(description), MIN(params_json),"
            " AVG(speedup / parent_speedup), COUNT(DISTINCT run_id), COUNT(DISTINCT problem_digest)"
            f" FROM outcomes WHERE {where} GROUP BY bottleneck, change_key"
            " HAVING ABS(AVG(speedup / parent_speedup) - 1) >= ?"
            " ORDER BY COUNT(DISTINCT run_id) DESC, ABS(AVG(speedup / parent_speedup) - 1) DESC",
            (*args, MIN_LESSON_GAIN),
        )
        out = []
        for kind, description, params_json, ratio, runs, problems in rows:
            what = _quote(description, json.loads(params_json))
            # unprofiled candidates (no bottleneck class) are lessons about problems in general
            klass = "other" if kind is None else _BOTTLENECK_PHRASE.get(kind, f"{kind}-bound")
            run_word = "run" if runs == 1 else "runs"
            prob_word = "problem" if problems == 1 else "problems"
            out.append(
                f"{what} gave {_percent(ratio - 1)} on {klass} problems "
                f"({runs} {run_word}, {problems} {prob_word})"
            )
        return out
