"""The anthropic generator inside the optimization loop, on CPU: the scripted server
answers with PyTorch-only candidates written for the test (a plumbing test of the loop
and the generator, not a model's result)."""

from __future__ import annotations

import json

import pytest

from llm_helpers import user_text
from mock_messages_server import text_reply, tool_use_reply

from kernelpro import config as cfg
from kernelpro import llm_tools
from kernelpro.generate import anthropic_gen
from kernelpro.loop import optimize
from kernelpro.plugins import Plugins
from kernelpro.problem import parse_problem

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return [1.5]
"""

CANDIDATE = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.clamp_min(x, 0.0) * self.scale
"""


def plugins_with_anthropic() -> Plugins:
    plugins = Plugins()
    if "anthropic" in plugins.names("generator"):
        return plugins
    # core does not declare the entry points yet: register the modules by hand
    return Plugins(extra=[("core_anthropic", anthropic_gen), ("core_llm_tools", llm_tools)])


def test_loop_runs_the_generator_with_tools_and_records_usage(server, tmp_path):
    server.add(
        text_reply(f"Change: clamp then scale\n```python\n{CANDIDATE}```"),
        tool_use_reply("list_micro_profilers", {}),
        text_reply(f"Change: the same, refined\n```python\n{CANDIDATE}```"),
    )
    config_path = tmp_path / "config.yaml"
    config_path.write_text(
        "generator:\n  name: anthropic\n  params:\n"
        f"    base_url: {server.url}\n    enforce_language: false\n    retry_base_delay_s: 0.01\n"
        "budget: 2\nprofiling:\n  enabled: false\n  block_micro_profilers: [sass_instruction_mix]\n"
        f"memory:\n  enabled: false\nevaluator:\n  trials: 1\n  rep_ms: 5\n  warmup_ms: 1\n  rounds: 1\n"
    )
    config = cfg.load_config(config_path)
    run = tmp_path / "run"
    summary = optimize(parse_problem(PROBLEM, name="relu_scale"), config, plugins_with_anthropic(), run, "cpu")

    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in records] == ["correct", "correct"], [r["reason"] for r in records]
    assert summary["evaluated"] == 2
    assert records[0]["usage"]["calls"] == 1
    assert records[1]["usage"]["calls"] == 2 and records[1]["usage"]["tool_calls"] == 1
    assert records[1]["parent"] == records[0]["id"]
    # the loop offered the built-in tools, and the refinement carried the parent's evaluation
    first, tool_round, _ = server.bodies
    # on the CPU, without a parent, profiling tools cannot work: they are not offered
    offered = {t["name"] for t in first["tools"]}
    assert "compile_check" in offered
    assert not offered & {"run_micro_profiler", "list_micro_profilers"}
    assert f"Version to improve: {records[0]['id']}" in user_text(tool_round)
    assert f"Runtime: {records[0]['runtime_ms']:.4g} ms" in user_text(tool_round)
    # a call of a tool that was not offered goes back as an error
    result = server.bodies[2]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    report = (run / "report.md").read_text()
    assert "## LLM usage (anthropic)" in report
    assert "3 calls (0 retried), 2 drafts, 1 tool calls." in report
