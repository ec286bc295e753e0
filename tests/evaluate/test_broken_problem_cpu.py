"""A problem file that fails on its own is the problem's failure (problem_error; exit 2 from
`eval` and `optimize`), never a crash of the evaluator or a timeout blamed on the candidate."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelpro.records import Verdict

pytestmark = pytest.mark.slow  # evaluations: several seconds each on a 2-core CPU (tests/README.md)

HEAD = """import torch
import torch.nn as nn
"""
BODY = """class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""
CANDIDATE = """import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2
"""


def _files(tmp_path: Path, problem: str) -> tuple[Path, Path]:
    tmp_path.joinpath("problem").mkdir()
    tmp_path.joinpath("candidate").mkdir()
    p = tmp_path / "problem" / "problem.py"
    p.write_text(problem)
    c = tmp_path / "candidate" / "cand.py"
    c.write_text(CANDIDATE)
    return p, c


def test_sys_exit_in_the_problem_file_is_a_problem_error(run_eval, tmp_path):
    # sys.exit() at module level raises SystemExit, which `except Exception` let through to
    # the judge's last resort: "crash, the evaluator failed: SystemExit: 0" (exit 1)
    problem, cand = _files(tmp_path, HEAD + "import sys\n" + BODY + "sys.exit(0)\n")
    result = run_eval(cand, problem)
    assert result.verdict is Verdict.PROBLEM_ERROR, (result.verdict, result.reason)
    assert "SystemExit" in result.reason and "evaluator failed" not in result.reason


@pytest.mark.parametrize("status", [0, 1])
def test_os_exit_in_the_problem_file_is_a_problem_error(run_eval, tmp_path, status):
    # os._exit() ends the judge's process at once, which read as the evaluator exiting
    # ("exited", exit 1), as if the candidate or KernelPro were at fault
    problem, cand = _files(tmp_path, HEAD + "import os\n" + BODY + f"os._exit({status})\n")
    result = run_eval(cand, problem)
    assert result.verdict is Verdict.PROBLEM_ERROR, (result.verdict, result.reason)
    assert "problem file ended" in result.reason


def test_sys_exit_in_get_inputs_is_a_problem_error(run_eval, tmp_path):
    body = BODY.replace("    return [torch.randn(4, 4)]", "    raise SystemExit('no data')")
    problem, cand = _files(tmp_path, HEAD + body)
    result = run_eval(cand, problem)
    assert result.verdict is Verdict.PROBLEM_ERROR, (result.verdict, result.reason)
    assert "get_inputs" in result.reason and "SystemExit" in result.reason


def test_a_problem_import_that_never_ends_is_a_problem_error_after_the_load_limit(run_eval, tmp_path):
    # the judge imports the problem itself: a loop at module level ran until the backstop
    # (timeout_s, 600 s by default) and came out as "timeout (stage: reference)", exit 1
    problem, cand = _files(tmp_path, HEAD + "while True:\n    pass\n" + BODY)
    t0 = time.monotonic()
    result = run_eval(cand, problem, load_timeout_s=5, timeout_s=120)
    assert result.verdict is Verdict.PROBLEM_ERROR, (result.verdict, result.reason)
    assert "longer than 5 s" in result.reason
    assert time.monotonic() - t0 < 60


def test_optimize_exits_2_when_the_problem_fails_on_its_own(tmp_path):
    body = BODY.replace("    return [torch.randn(4, 4)]", "    raise RuntimeError('dataset not found')")
    problem, _ = _files(tmp_path, HEAD + body)
    proc = subprocess.run([sys.executable, "-m", "kernelpro.cli", "optimize", str(problem), "--budget", "1", "--generator", "torch_compile",
                           "--device", "cpu", "-o", str(tmp_path / "run"), "--quiet", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "dataset not found" in errors[0] and str(problem) in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "run" / "problem.py").exists()  # what the run wrote is kept
    if proc.stdout.strip():
        json.loads(proc.stdout)


def test_get_init_inputs_returning_a_dict_is_named(run_eval, tmp_path):
    # Model(*{"dim": 8}) is Model("dim"): the keys passed as arguments, silently or with an
    # error about something else
    body = BODY.replace("    def forward(self, x):\n        return x * 2",
                        "    def __init__(self, dim=8):\n        super().__init__()\n        self.dim = dim\n\n"
                        "    def forward(self, x):\n        return x[:, : self.dim] * 2")
    body = body.replace("def get_init_inputs():\n    return []", "def get_init_inputs():\n    return {'dim': 2}")
    problem, cand = _files(tmp_path, HEAD + body)
    result = run_eval(cand, problem)
    assert result.verdict is Verdict.PROBLEM_ERROR, (result.verdict, result.reason)
    assert "get_init_inputs() returned a dict" in result.reason, result.reason
