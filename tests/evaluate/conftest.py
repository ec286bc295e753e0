"""Fixtures for the evaluator's tests: a small copy of the shipped example problem, a fast
evaluator configuration, and a helper that evaluates a candidate in a worker process."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest

from kernelpro.config import EvaluatorConfig
from kernelpro.evaluate.runner import evaluate

from evaluate_paths import REPO, small_copy



def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:  # pragma: no cover
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("evaluate")


@pytest.fixture(scope="session")
def gelu_problem(session_dir) -> Path:
    return small_copy(REPO / "examples" / "fused_bias_gelu.py", session_dir / "fused_bias_gelu_small.py",
                      {"ROWS": 16, "COLS": 32})


@pytest.fixture(scope="session")
def gelu_problem_large(session_dir) -> Path:
    """Calls of about a millisecond on a CPU: long enough for the clock cross-check to see a
    candidate that reports a fraction of its time."""
    return small_copy(REPO / "examples" / "fused_bias_gelu.py", session_dir / "fused_bias_gelu_large.py",
                      {"ROWS": 1024, "COLS": 2048})


@pytest.fixture(scope="session")
def fast_config(session_dir) -> EvaluatorConfig:
    return EvaluatorConfig(trials=2, warmup_ms=1, rep_ms=5, min_reps=5, max_reps=20, rounds=0, timeout_s=60,
                           compile_timeout_s=180, time_compiled_reference=False,
                           build_cache_dir=str(session_dir / "build_cache"))


@pytest.fixture(scope="session")
def run_eval(session_dir, fast_config):
    """run_eval(candidate, problem, device="cpu", **config_overrides) -> EvalResult."""
    counter = [0]

    def run(candidate: Path, problem: Path, device: str = "cpu", **overrides):
        counter[0] += 1
        cfg = attrs.evolve(fast_config, **overrides)
        workdir = session_dir / f"eval{counter[0]:03d}_{Path(candidate).stem}"
        return evaluate(Path(problem), Path(candidate), device=device, config=cfg, workdir=workdir, seed=0)

    return run


os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
