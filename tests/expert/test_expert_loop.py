"""The expert generator driven by the real loop (greedy search, evaluator workers) on CPU,
with its Triton kernels run by Triton's interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="triton is not installed")

from expert_problems import PROBLEMS  # noqa: E402
from kernelpro import config as cfg  # noqa: E402
from kernelpro.loop import optimize  # noqa: E402
from kernelpro.plugins import Plugins  # noqa: E402
from kernelpro.problem import parse_problem  # noqa: E402

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

FAST = Path(__file__).resolve().parents[1] / "core" / "data" / "fast_config.yaml"


def test_greedy_runs_expert_candidates_through_the_evaluator(tmp_path, monkeypatch):
    # not set by hand: on a CPU device the evaluator runs Triton candidates (and their
    # profilers) under Triton's interpreter itself (kernelpro.evaluate.interpret)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    plugins = Plugins()
    config = cfg.load_config(str(FAST), {"device": "cpu", "budget": 3,
                                         "generator": {"name": "expert", "params": {}}})
    problem = parse_problem(PROBLEMS["layernorm"], name="layernorm")
    summary = optimize(problem, config, plugins, tmp_path / "run", "cpu")
    assert summary["evaluated"] == 3 and summary["correct"] == 3, summary
    records = [json.loads(line) for line in (tmp_path / "run" / "candidates.jsonl").read_text().splitlines()]
    assert all(r["generator"] == "expert" and r["language"] == "triton" for r in records)
    assert len({json.dumps(r["params"], sort_keys=True) for r in records}) == 3
    assert records[0]["parent"] == "root" and records[-1]["parent"] != "root"  # greedy refined a node


def test_unrecognized_problem_ends_the_search(tmp_path):
    plugins = Plugins()
    config = cfg.load_config(str(FAST), {"device": "cpu", "budget": 2,
                                         "generator": {"name": "expert", "params": {}}})
    problem = parse_problem(PROBLEMS["data_dependent"], name="dd")
    summary = optimize(problem, config, plugins, tmp_path / "run", "cpu")
    assert summary["evaluated"] == 0, summary
    # the stop reason says that the generator proposed nothing, and why (Generator.why_nothing)
    assert summary["stopped_because"].startswith("search exhausted: generator expert proposed no candidate "
                                                 "(no kernel template fits the problem: "), summary


# problem -> what the descriptions of its two candidates must show
TWO_CANDIDATES = {
    # the library GEMM + epilogue kernel, then the Triton GEMM
    "linear_relu_odd": lambda kinds: "pointwise(relu)" in kinds[0] and "gemm(linear+add+relu)" in kinds[1],
    "tanh_bias_max_pool": lambda kinds: "pool(tanh+mul+add+max_pool)" in kinds[0],
    # the whole loss as one Triton full reduction (partials per program, then their sum)
    "kl_div_log": lambda kinds: all("reduce_all(kl_div)" in k for k in kinds),
    "kl_div_log_target_sum": lambda kinds: all("reduce_all(kl_div)" in k for k in kinds),
    # a dense convolution alone: the implicit GEMM in tf32x3, then in ieee products
    "conv1d_dilated_strided": lambda kinds: "conv(conv1d)" in kinds[0] and "precision=tf32x3" in kinds[0]
    and "precision=ieee" in kinds[1],
}


@pytest.mark.parametrize("name", sorted(TWO_CANDIDATES))
def test_triton_gemm_pool_and_loss_candidates_pass_the_evaluator(name, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    config = cfg.load_config(str(FAST), {"device": "cpu", "budget": 2,
                                         "generator": {"name": "expert", "params": {}}})
    summary = optimize(parse_problem(PROBLEMS[name], name=name), config, Plugins(), tmp_path / name, "cpu")
    assert summary["evaluated"] == 2 and summary["correct"] == 2, (name, summary)
    records = [json.loads(line) for line in (tmp_path / name / "candidates.jsonl").read_text().splitlines()]
    kinds = [r["description"] for r in records]
    assert TWO_CANDIDATES[name](kinds), kinds
