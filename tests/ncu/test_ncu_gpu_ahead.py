"""The ncu pass started ahead on a GPU, with the real Nsight Compute: it profiles the same
kernels as a pass started for its job, and its start and torch import are paid before
the profile is asked for (the seconds of both are printed for the validation record)."""

from __future__ import annotations

import json
import sys

import pytest

from kernelpro.api import ProfileTarget
from kernelpro_plugins_ncu import collector as C
from kernelpro_plugins_ncu.collector import NcuCollector, NcuSettings, find_ncu

pytestmark = pytest.mark.gpu

PROBLEM = """import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
def get_inputs():
    return [torch.randn(1 << 24)]
def get_init_inputs():
    return []
"""

CANDIDATE = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0).mul_(2.0)
"""


def test_a_pass_started_ahead_profiles_what_a_fresh_one_does(tmp_path):
    if find_ncu() is None:
        pytest.skip("ncu not found")
    problem, cand = tmp_path / "problem.py", tmp_path / "cand.py"
    problem.write_text(PROBLEM)
    cand.write_text(CANDIDATE)

    def target(name):
        return ProfileTarget(problem_path=problem, candidate_path=cand, device="cuda", workdir=tmp_path / name,
                             python=sys.executable, env={"MY_VAR": name})

    C.discard_ahead()
    fresh = NcuCollector(NcuSettings(start_ahead=False)).collect(target("fresh"), 1)
    col = NcuCollector(NcuSettings())
    col.start_ahead(target("ahead"), 1)
    with C._AHEAD_GUARD:
        (waiting,) = C._AHEAD.values()
    import time

    time.sleep(15)  # what a run does meanwhile: generate, evaluate
    assert waiting.alive()
    ahead = col.collect(target("taken"), 1)
    print("fresh pass s:", json.dumps({k: round(v, 2) for k, v in fresh.seconds.items()}))
    print("ahead pass s:", json.dumps({k: round(v, 2) for k, v in ahead.seconds.items()}))
    assert [k.name for k in ahead.kernels] == [k.name for k in fresh.kernels] and ahead.kernels
    sidecar = json.loads((tmp_path / "taken" / "ncu_stage1.json").read_text())
    assert "--job-on-stdin" in sidecar["command"]
    assert ahead.seconds["start"] + ahead.seconds["import"] < fresh.seconds["start"] + fresh.seconds["import"]
    assert not waiting.alive()
    C.discard_ahead()
