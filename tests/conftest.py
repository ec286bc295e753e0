"""Shared test set-up: the ``gpu`` marker skips tests when no CUDA GPU is visible; the
``slow`` marker skips tests unless ``--runslow`` is given (or KERNELPRO_RUNSLOW=1), so the
default selection (``bash scripts/test.sh``) stays short; CI (``.ci/run``) runs them all."""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run the tests marked slow (CI does; also KERNELPRO_RUNSLOW=1)")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return torch.cuda.is_available()


def _run_slow(config) -> bool:
    return bool(config.getoption("--runslow")) or os.environ.get("KERNELPRO_RUNSLOW") == "1"


def pytest_collection_modifyitems(config, items):
    if not _run_slow(config):
        slow = pytest.mark.skip(reason="slow: run with --runslow (bash scripts/test.sh --runslow; CI runs it)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(slow)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the H200 via the device tool)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
