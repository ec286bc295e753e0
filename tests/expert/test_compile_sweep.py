"""The sweep that builds every candidate the generator would write for a problem, for
sm_90, on meta tensors (benchmarks/kernelbench/compile_sweep.py): it builds the project's
own problems without a failure, and says which step failed when one does. Each case runs
in a subprocess without TRITON_INTERPRET (Triton reads it once, at its first import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="triton is not installed: kernels cannot be compiled here")

pytestmark = pytest.mark.slow  # Triton compiles for sm_90 on a 2-core CPU

HERE = Path(__file__).resolve().parent
SWEEP = HERE.parents[1] / "benchmarks" / "kernelbench" / "compile_sweep.py"

CODE = """
import importlib.util, json, sys, tempfile
from pathlib import Path
sys.path.insert(0, {here!r})
from expert_problems import PROBLEMS
spec = importlib.util.spec_from_file_location("compile_sweep", {sweep!r})
sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep)
from kernelpro_plugins_expert import render
real = render.render_candidate
render.render_candidate = lambda *a: real(*a).replace("self.lowered(*args)", {body!r})
with tempfile.TemporaryDirectory() as tmp:
    sys.path.insert(0, tmp)
    print(json.dumps(sweep.sweep_problem(PROBLEMS[{name!r}], Path(tmp))))
"""


def _sweep(name: str, body: str = "self.lowered(*args)") -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = CODE.format(here=str(HERE), sweep=str(SWEEP), name=name, body=body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


# conv_transpose3d_scale_clamp: its fold candidates (the bias added by the kernel after the
# convolution) and channels-last ones build too
@pytest.mark.parametrize("name", ["gemm_bias_relu", "split_softmax", "max_pool2d_ceil", "conv_transpose3d_scale_clamp"])
def test_every_candidate_of_a_problem_builds(name):
    result = _sweep(name)
    assert result["recognized"] and result["failures"] == [], result
    assert result["variants"] >= 3 and result["kernels"] >= result["variants"]


def test_a_candidate_that_cannot_build_is_named_with_its_step():
    # every candidate's wrapper calls a function it does not define
    result = _sweep("softmax", body="_kp_missing(*args)")
    assert result["variants"] >= 1 and len(result["failures"]) == result["variants"], result
    assert all(f["stage"] == "forward" and "_kp_missing" in f["error"] for f in result["failures"]), result
