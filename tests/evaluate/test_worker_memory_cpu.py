"""The worker must not keep the outputs of timed calls alive: on a GPU each one can be
gigabytes (a 6 GiB output per call ran an H200 out of memory in the timing stage when a
reference cycle through the thread check's frames kept every call's output)."""

from __future__ import annotations

import gc

import torch

import kernelpro.evaluate.timing as timing
import kernelpro.evaluate.worker as worker
from kernelpro.config import EvaluatorConfig, unstructure

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)

def get_inputs():
    return [torch.randn(256, 4096)]

def get_init_inputs():
    return []
"""

CANDIDATE = """import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.tanh(x)
"""


def _big_tensors() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is torch.Tensor and o.numel() >= 256 * 4096)


def test_timed_calls_do_not_keep_their_outputs_alive(tmp_path, monkeypatch):
    (tmp_path / "problem.py").write_text(PROBLEM)
    (tmp_path / "cand.py").write_text(CANDIDATE)
    alive: list[int] = []
    once2 = timing.Timer.once2

    def counting_once2(self, fn):
        result = once2(self, fn)
        if len(alive) < 400:
            alive.append(_big_tensors())
        return result

    monkeypatch.setattr(timing.Timer, "once2", counting_once2)
    ev = unstructure(EvaluatorConfig())
    ev.update(warmup_ms=2, rep_ms=40, min_reps=60, max_reps=60, rounds=1)
    job = {"device": "cpu", "evaluator": ev, "seed": 0, "problem": str(tmp_path / "problem.py"),
           "candidate": str(tmp_path / "cand.py"), "status": str(tmp_path / "status"), "compile": {},
           "measurements": [], "language": "pytorch"}
    gc_was = gc.isenabled()
    gc.disable()  # the leak showed only while the cyclic collector did not run: make that certain
    try:
        result = worker.run(job)
    finally:
        if gc_was:
            gc.enable()
    assert result.correct, result.reason
    assert len(alive) > 100
    # what may legitimately grow during timing: the re-check reservoir's host copies (8)
    assert max(alive) - alive[0] <= ev["recheck_calls"] + 2, (alive[0], max(alive))
