"""Search quality on the installed nvidia-cutlass corpus: the expected file of each query
of :data:`kernelpro_cute.quality.QUERIES` must be in the top 5 for at least 90% of them
(the issue's target). Builds the real index once per session (about 40 s on 2 cores)."""

from __future__ import annotations

import pytest

from kernelpro_cute.quality import HELD_OUT, QUERIES, evaluate

pytestmark = pytest.mark.slow


def test_the_query_set_is_large_enough_and_points_at_real_files(real_index):
    assert len(QUERIES) >= 15
    for _, expected in QUERIES + HELD_OUT:
        assert (real_index.corpus.root / expected).is_file(), expected


def test_top5_share_is_at_least_90_percent(real_index):
    share, rows = evaluate(real_index)
    missed = [(r["query"], r["expected"], r["top"]) for r in rows if r["rank"] is None]
    assert share >= 0.9, missed


def test_held_out_share_does_not_regress(real_index):
    # recorded at 13/15 (86.7%) when the held-out set was first run; a regression guard
    share, _ = evaluate(real_index, queries=HELD_OUT)
    assert share >= 0.8


def test_real_index_symbol_lookup_and_shipped_examples(real_index):
    hits = real_index.lookup("make_tma_atom")
    assert hits and hits[0].path == "include/cute/atom/copy_traits_sm90_tma.hpp"
    assert "wgmma_tma_sm90.cu" in real_index.list_dir("examples/cute/tutorial/hopper")
    meta = real_index.meta()
    assert int(meta["files"]) > 1000 and int(meta["chunks"]) > 20000
