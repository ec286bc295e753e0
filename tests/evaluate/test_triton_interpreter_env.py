"""Triton candidates on a CPU: the evaluator chooses Triton's interpreter itself, for the
candidate's harness and its profilers, and never for the reference or other languages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelpro.evaluate import interpret
from kernelpro.evaluate.runner import profile_env

REPO = Path(__file__).resolve().parents[2]
TRITON_SOURCE = "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x):\n    pass\n"


def test_only_triton_candidates_on_a_cpu_get_the_interpreter(tmp_path):
    triton_cand = tmp_path / "t.py"
    triton_cand.write_text(TRITON_SOURCE)
    torch_cand = tmp_path / "p.py"
    torch_cand.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")
    assert interpret.interpreter_env("cpu", triton_cand) == {"TRITON_INTERPRET": "1"}
    assert interpret.interpreter_env("cpu", triton_cand, "triton") == {"TRITON_INTERPRET": "1"}
    assert interpret.interpreter_env("cuda", triton_cand) == {}
    assert interpret.interpreter_env("cuda:0", triton_cand, "triton") == {}
    assert interpret.interpreter_env("cpu", torch_cand) == {}
    assert interpret.interpreter_env("cpu", None) == {}  # the baseline job: the reference only
    assert interpret.interpreter_env("cpu", tmp_path / "missing.py") == {}
    # the profilers' environment has it too
    assert profile_env(tmp_path / "build", "cpu", triton_cand)["TRITON_INTERPRET"] == "1"
    assert "TRITON_INTERPRET" not in profile_env(tmp_path / "build", "cuda", triton_cand)


def test_the_evaluation_job_sets_it_for_the_candidate_harness_only(tmp_path, monkeypatch):
    """What the evaluator writes into the job: the candidate's sandbox environment gets
    TRITON_INTERPRET, the reference's does not (read back from job.json)."""
    from kernelpro import config as cfg
    from kernelpro.evaluate import runner
    from kernelpro.records import EvalResult, Verdict

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    problem = tmp_path / "prob" / "p.py"
    problem.parent.mkdir()
    problem.write_text((REPO / "examples" / "fused_bias_gelu_cpu.py").read_text())
    cand = tmp_path / "cand" / "c.py"
    cand.parent.mkdir()
    cand.write_text(TRITON_SOURCE)
    seen = {}

    def fake_judge(job_path, workdir, env, config, device, what="candidate", prestart=False, next_is_baseline=False):
        seen["job"] = json.loads(Path(job_path).read_text())
        seen["env"] = env
        return EvalResult(verdict=Verdict.CRASH, reason="not run", device=device)

    monkeypatch.setattr(runner, "_run_judge", fake_judge)
    config = cfg.load_config().evaluator
    runner.evaluate(problem, cand, device="cpu", config=config, workdir=tmp_path / "w", language="triton")
    assert seen["job"]["sandbox"]["env"]["TRITON_INTERPRET"] == "1"
    assert "TRITON_INTERPRET" not in seen["job"]["reference_env"] and "TRITON_INTERPRET" not in seen["env"]
    # the judge starts before its job is known: each harness is told its variables with its hello
    from kernelpro.evaluate.judge_main import hellos

    ref_hello, cand_hello = hellos(seen["job"])
    assert cand_hello is not None and cand_hello["env"]["TRITON_INTERPRET"] == "1"
    assert "TRITON_INTERPRET" not in ref_hello["env"]
    assert cand_hello["env"]["TORCH_EXTENSIONS_DIR"] == seen["job"]["build_env"]["TORCH_EXTENSIONS_DIR"]
    assert "TORCH_EXTENSIONS_DIR" not in ref_hello["env"]  # the candidate's builds are not the reference's
    assert ref_hello["env"]["TRITON_CACHE_DIR"] == seen["job"]["reference_env"]["TRITON_CACHE_DIR"]
    assert "TORCH_EXTENSIONS_DIR" not in seen["env"]  # nor in the judge's own environment
    runner.evaluate(problem, cand, device="cuda", config=config, workdir=tmp_path / "w2", language="triton")
    assert "TRITON_INTERPRET" not in seen["job"]["sandbox"]["env"]


def test_prepare_interpreter_lets_loop_bounds_come_from_arguments(tmp_path):
    """A kernel whose loop bound is a kernel argument (the expert's persistent pointwise
    form) runs under the interpreter in a process prepared as the harness prepares it."""
    pytest.importorskip("triton", reason="triton is not installed")
    script = tmp_path / "run.py"
    script.write_text(
        "import torch, triton, triton.language as tl\n"
        "from kernelpro.evaluate.interpret import prepare_interpreter\n"
        "prepare_interpreter()\n"
        "@triton.jit\n"
        "def add_one(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    for start in range(tl.program_id(0) * BLOCK, n, BLOCK * tl.num_programs(0)):\n"
        "        offs = start + tl.arange(0, BLOCK)\n"
        "        m = offs < n\n"
        "        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)\n"
        "x = torch.zeros(300)\n"
        "add_one[(2,)](x, x.numel(), BLOCK=64)\n"
        "assert bool((x == 1).all()), x\n"
        "print('ok')\n")
    import os
    import subprocess

    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
