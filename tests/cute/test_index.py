"""Index build, cache reuse, ranking, symbol look-up and safe file access on the
miniature fixture corpus."""

from __future__ import annotations

import os
import sqlite3

import pytest

from kernelpro_cute.corpus import CorpusError, locate
from kernelpro_cute.index import CorpusPathError, cache_dir, open_index


def test_fts5_is_available():
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(x)")


def test_build_then_reuse_then_rebuild_on_change(mini_corpus, cache):
    ix = open_index(mini_corpus, cache=cache)
    files = list(cache.glob("*.sqlite"))
    assert [f.name for f in files] == [ix.db_path.name]
    meta = ix.meta()
    assert int(meta["files"]) == 8 and int(meta["chunks"]) > 10
    mtime = ix.db_path.stat().st_mtime_ns
    again = open_index(mini_corpus, cache=cache)
    assert again.db_path == ix.db_path and again.db_path.stat().st_mtime_ns == mtime  # reused
    # a changed corpus gives a new index file that knows the new symbol
    (mini_corpus.root / "include/cute/new_thing.hpp").write_text("namespace cute { void brand_new_helper() { } }\n")
    changed = open_index(mini_corpus, cache=cache)
    assert changed.db_path != ix.db_path
    assert changed.lookup("brand_new_helper")[0].path == "include/cute/new_thing.hpp"
    assert not ix.lookup("brand_new_helper")


def test_pool_and_serial_chunking_agree(mini_corpus):
    from kernelpro_cute.index import _all_rows, indexed_files

    rels = [f.relative_to(mini_corpus.root).as_posix() for f in indexed_files(mini_corpus.root)]
    serial = list(_all_rows(mini_corpus.root, rels, workers=1))
    pooled = list(_all_rows(mini_corpus.root, rels, workers=2, min_files=0))
    assert pooled == serial and sum(len(rows) for _, rows in serial) > 10


def test_cache_dir_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "kernelpro" / "cute-index"


@pytest.mark.parametrize("query, path, symbol", [
    ("make_tiled_copy", "include/cute/atom/copy_atom.hpp", "cute::make_tiled_copy"),
    ("Swizzle", "include/cute/swizzle.hpp", "cute::Swizzle"),
    ("tma load", "include/cute/arch/copy_sm90_tma.hpp", "cute::SM90_TMA_LOAD_2D"),
    ("wgmma fp16 64x128", "include/cute/arch/mma_sm90_gmma.hpp", "cute::SM90::GMMA::MMA_64x128x16_F16F16F16_SS"),
    # the member is more specific than its class, which it overlaps and so replaces
    ("transaction barrier expect tx", "include/cutlass/arch/barrier.h",
     "cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx"),
    ("vectorized copy kernel tutorial", "examples/cute/tutorial/tiled_copy.cu", "copy_kernel_vectorized"),
])
def test_search_ranks_the_defining_chunk_first(mini_corpus, cache, query, path, symbol):
    results = open_index(mini_corpus, cache=cache).search(query, k=3)
    assert results[0].path == path
    assert results[0].symbol == symbol
    assert results[0].score >= results[-1].score
    assert results[0].snippet.splitlines()[0].startswith(f"{results[0].start_line}: ")


def test_results_cover_distinct_files_and_do_not_overlap(mini_corpus, cache):
    from kernelpro_cute.index import PER_FILE

    results = open_index(mini_corpus, cache=cache).search("copy", k=6)
    paths = [r.path for r in results]
    # four fixture files mention copy: each is represented before any file gets a second
    assert len(set(paths)) == 4
    assert max(paths.count(p) for p in paths) <= PER_FILE
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    for a in results:
        for b in results:
            if a is not b and a.path == b.path:
                assert a.end_line < b.start_line or b.end_line < a.start_line


def test_query_without_words_is_refused(mini_corpus, cache):
    with pytest.raises(ValueError, match="no searchable words"):
        open_index(mini_corpus, cache=cache).search("the of ?")


def test_lookup_is_case_and_underscore_insensitive(mini_corpus, cache):
    ix = open_index(mini_corpus, cache=cache)
    hits = ix.lookup("cute::warpgroup_arrive")
    assert [(h.path, h.kind) for h in hits] == [("include/cute/arch/mma_sm90_gmma.hpp", "function")]
    assert ix.lookup("WarpgroupArrive")[0].symbol.endswith("warpgroup_arrive")


def test_read_list_and_path_safety(mini_corpus, cache, tmp_path):
    ix = open_index(mini_corpus, cache=cache)
    text = ix.read("include/cute/swizzle.hpp", 5, 7)
    assert text.splitlines()[0] == "include/cute/swizzle.hpp lines 5-7 of 12"
    assert text.splitlines()[1].split()[0] == "5"
    assert ix.list_dir(".") == ["examples/", "include/", "tools/"]
    assert "swizzle.hpp" in ix.list_dir("include/cute")
    (tmp_path / "secret.txt").write_text("x")
    for bad in ("../secret.txt", "/etc/passwd", "include/../../secret.txt"):
        with pytest.raises(CorpusPathError, match="outside the CUTLASS corpus root"):
            ix.read(bad)
    os.symlink(tmp_path / "secret.txt", mini_corpus.root / "include" / "link.txt")
    with pytest.raises(CorpusPathError, match="outside"):
        ix.read("include/link.txt")
    with pytest.raises(CorpusPathError, match="no such file"):
        ix.read("include/nope.hpp")
    # absolute paths inside the corpus, and a stray leading slash, are accepted
    assert ix.read(str(mini_corpus.root / "include/cute/swizzle.hpp"), 1, 1).startswith("include/cute/swizzle.hpp lines 1-1")
    assert ix.read("/include/cute/swizzle.hpp", 1, 1).endswith("// Fixture: XOR swizzle functor.")
    with pytest.raises(CorpusPathError, match="past the end"):
        ix.read("include/cute/swizzle.hpp", 500, 600)
    with pytest.raises(CorpusPathError, match="not a directory"):
        ix.list_dir("include/cute/swizzle.hpp")


def test_locate_order_and_errors(mini_corpus, monkeypatch, tmp_path):
    monkeypatch.delenv("CUTLASS_PATH", raising=False)
    assert locate(mini_corpus.root).origin == "argument"
    monkeypatch.setenv("CUTLASS_PATH", str(mini_corpus.root))
    found = locate()
    assert found.origin == "CUTLASS_PATH" and found.root == mini_corpus.root
    assert found.include_dirs == (mini_corpus.root / "include", mini_corpus.root / "tools/util/include")
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path / "nowhere"))
    with pytest.raises(CorpusError, match="CUTLASS_PATH=.* is not a CUTLASS tree"):
        locate()
    with pytest.raises(CorpusError, match="not a CUTLASS tree"):
        locate(tmp_path)
    monkeypatch.delenv("CUTLASS_PATH")
    monkeypatch.setattr("kernelpro_cute.corpus.package_source_dir", lambda: None)
    with pytest.raises(CorpusError) as info:
        locate()
    assert "pip install nvidia-cutlass" in str(info.value) and "\n" not in str(info.value)
