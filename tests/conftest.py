"""Shared test set-up: the ``gpu`` marker skips tests when no CUDA GPU is visible."""

from __future__ import annotations

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the H200 via the device tool)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
