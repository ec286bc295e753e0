"""Fixtures of the kernelpro_cute tests: a miniature corpus copied per test, and the
real nvidia-cutlass corpus (skipped with the reason when it is not installed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelpro_cute.corpus import Corpus, CorpusError, locate

FIXTURE = Path(__file__).parent / "fixtures" / "mini_cutlass"


@pytest.fixture
def mini_corpus(tmp_path) -> Corpus:
    root = tmp_path / "cutlass"
    shutil.copytree(FIXTURE, root)
    return locate(root)


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


def real_corpus_or_skip() -> Corpus:
    try:
        return locate()
    except CorpusError as exc:
        pytest.skip(f"the real CUTLASS corpus is not installed ({exc})")


@pytest.fixture(scope="session")
def real_index(tmp_path_factory):
    """The index of the installed nvidia-cutlass tree, built once per session."""
    from kernelpro_cute.index import open_index

    corpus = real_corpus_or_skip()
    return open_index(corpus, cache=tmp_path_factory.mktemp("cute-index"))
