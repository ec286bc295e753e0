"""Search memory over SQLite: notes from recorded outcomes, concurrency, bad databases."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading

import pytest

from kernelpro.search.memory import SearchMemory, SearchMemoryError, default_path


def rec(mem: SearchMemory, problem: str, node: str, parent: str, description: str, verdict: str,
        speedup: float | None, run: str = "r1", bottleneck: str | None = "memory",
        findings=("uncoalesced global loads",)) -> None:
    mem.record(problem_digest=problem, problem_name=f"name-{problem}", node_id=node, parent_id=parent,
               generator="llm", description=description, params={"tile": 128}, bottleneck=bottleneck,
               findings=list(findings), verdict=verdict, speedup=speedup, run_id=run)


def test_default_path_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_path() == tmp_path / "kernelpro" / "memory.sqlite"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_path().parts[-4:] == (".local", "share", "kernelpro", "memory.sqlite")


def test_repeated_failures_on_this_problem(tmp_path):
    mem = SearchMemory(tmp_path / "m.sqlite")
    rec(mem, "p1", "c1", "root", "128x128 tiles", "incorrect", None)
    rec(mem, "p1", "c2", "root", "128x128  tiles ", "incorrect", None)
    rec(mem, "p1", "c3", "root", "split-K", "compile_error", None)
    notes = mem.notes("p1")
    assert '"128x128 tiles" failed verification 2 times on this problem' in notes
    assert not any("split-K" in n for n in notes)  # failed once: not repeated
    assert mem.notes("other-problem", bottleneck="compute") == []


def test_best_outcomes_and_regressions_on_this_problem(tmp_path):
    mem = SearchMemory(tmp_path / "m.sqlite")
    rec(mem, "p1", "c1", "root", "vectorized loads", "correct", 1.6)
    rec(mem, "p1", "c2", "c1", "unroll by 8", "correct", 1.2)  # 1.2 / 1.6 = -25%
    rec(mem, "p1", "c3", "c1", "fuse epilogue", "correct", 2.4)
    notes = mem.notes("p1")
    assert notes[0] == 'best so far on this problem: "fuse epilogue" at 2.40x over the reference (1 run)'
    assert '"unroll by 8" made this problem slower than its parent (-25%, 1 time)' in notes


def test_cross_problem_lessons_by_bottleneck_class(tmp_path):
    mem = SearchMemory(tmp_path / "m.sqlite")
    for i, problem in enumerate(("p1", "p2", "p3")):
        rec(mem, problem, "c1", "root", "vectorized loads", "correct", 1.3, run=f"r{i}")
    rec(mem, "p4", "c1", "root", "tensor cores", "correct", 2.0, run="r9", bottleneck="compute")
    notes = mem.notes("p9", bottleneck="memory")
    assert notes == ['"vectorized loads" gave +30% on memory-bound problems (3 runs, 3 problems)']
    everything = mem.notes("p9")
    assert any("compute-bound" in n for n in everything)
    # the problem's own results are not counted as lessons from elsewhere
    assert ('"vectorized loads" gave +30% on memory-bound problems (2 runs, 2 problems)'
            in mem.notes("p1", bottleneck="memory"))


def test_unprofiled_outcomes_are_general_lessons(tmp_path):
    mem = SearchMemory(tmp_path / "m.sqlite")
    rec(mem, "p1", "c1", "root", "fuse the epilogue", "correct", 1.5, bottleneck=None, findings=())
    assert mem.notes("p2") == ['"fuse the epilogue" gave +50% on other problems (1 run, 1 problem)']
    assert mem.notes("p2", bottleneck="memory") == []


def test_small_gains_are_not_lessons(tmp_path):
    mem = SearchMemory(tmp_path / "m.sqlite")
    rec(mem, "p1", "c1", "root", "reorder loops", "correct", 1.02)
    assert mem.notes("p2") == []


def test_notes_limit(tmp_path):
    mem = SearchMemory(tmp_path / "m.sqlite")
    for i in range(6):
        rec(mem, "p1", f"a{i}", "root", f"change {i}", "incorrect", None)
        rec(mem, "p1", f"b{i}", "root", f"change {i}", "incorrect", None)
    assert len(mem.notes("p1", limit=3)) == 3


def test_record_is_idempotent_per_run_and_node(tmp_path):
    mem = SearchMemory(tmp_path / "m.sqlite")
    rec(mem, "p1", "c1", "root", "x", "correct", 1.5)
    rec(mem, "p1", "c1", "root", "x", "correct", 1.5)  # replayed after a resume
    assert mem.count() == 1


def test_memory_persists_across_instances(tmp_path):
    path = tmp_path / "m.sqlite"
    with SearchMemory(path) as mem:
        rec(mem, "p1", "c1", "root", "x", "incorrect", None, run="r1")
    with SearchMemory(path) as mem:
        rec(mem, "p1", "c1", "root", "x", "incorrect", None, run="r2")
        assert mem.notes("p1") == ['"x" failed verification 2 times on this problem']


def _writer(path: str, tag: str, n: int) -> None:
    mem = SearchMemory(path)
    for i in range(n):
        rec(mem, "p1", f"{tag}-{i}", "root", f"change {i % 3}", "correct", 1.0 + i / 100, run=tag)
    mem.close()


def test_concurrent_writers(tmp_path):
    path = str(tmp_path / "m.sqlite")
    SearchMemory(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, f"proc{i}", 40)) for i in range(3)]
    for p in procs:
        p.start()
    threads = [threading.Thread(target=_writer, args=(path, f"thread{i}", 40)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with SearchMemory(path) as mem:
        assert mem.count() == 5 * 40


def test_shared_instance_across_threads(tmp_path):
    mem = SearchMemory(tmp_path / "m.sqlite")

    def work(tag):
        for i in range(30):
            rec(mem, "p1", f"{tag}-{i}", "root", "x", "correct", 1.1, run=tag)

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mem.count() == 120


def test_corrupt_database_gives_one_line(tmp_path):
    path = tmp_path / "m.sqlite"
    path.write_bytes(b"this is not sqlite" * 500)
    with pytest.raises(SearchMemoryError) as err:
        SearchMemory(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)
    assert isinstance(err.value, ValueError)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "m.sqlite"
    SearchMemory(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(SearchMemoryError, match="schema version 99"):
        SearchMemory(path)


def test_unwritable_location_gives_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SearchMemoryError):
        SearchMemory(blocker / "sub" / "m.sqlite")


def test_runs_opening_a_new_memory_at_once_all_get_it(tmp_path):
    """A bench's problems sharing a GPU start their runs together, each opening the same new
    database: its switch to WAL takes the file exclusively and SQLite does not wait for that
    lock; every opener must still get the memory (it failed in 5 of 40 rounds of four before)."""
    for round_ in range(20):
        path = tmp_path / f"m{round_}.sqlite"
        start = threading.Barrier(4)
        errors: list[str] = []

        def open_it():
            start.wait()
            try:
                SearchMemory(path).close()
            except Exception as exc:  # noqa: BLE001 - the assertion says which
                errors.append(str(exc))

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == [], errors
