"""The LLM loop learns from its failures and survives its endpoint: the anthropic
generator in the optimization loop on CPU, against the scripted Messages server. The
replies are written by each test (no model is involved)."""

from __future__ import annotations

import json

from llm_helpers import user_text
from mock_messages_server import error_reply, text_reply

from kernelpro import config as cfg
from kernelpro.loop import optimize
from kernelpro.problem import parse_problem
from test_anthropic_loop import PROBLEM, plugins_with_anthropic

GOOD = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.clamp_min(x, 0.0) * self.scale
"""

# forgets the relu: wrong wherever x < 0
WRONG = GOOD.replace("torch.clamp_min(x, 0.0) * self.scale", "x * self.scale")


def reply(source: str, change: str) -> dict:
    return text_reply(f"Change: {change}\n```python\n{source}```")


def run_loop(server, tmp_path, budget: int, extra: str = "", params: str = "", memory: str = "enabled: false"):
    config_path = tmp_path / "config.yaml"
    config_path.write_text(
        "generator:\n  name: anthropic\n  params:\n"
        f"    base_url: {server.url}\n    retry_base_delay_s: 0.001\n    retry_max_delay_s: 0.01\n"
        f"    max_retries: 1\n{params}"
        f"budget: {budget}\nprofiling:\n  enabled: false\n"
        f"memory:\n  {memory}\nevaluator:\n  trials: 1\n  rep_ms: 5\n  warmup_ms: 1\n  rounds: 1\n{extra}"
    )
    run = tmp_path / "run"
    summary = optimize(parse_problem(PROBLEM, name="relu_scale"), cfg.load_config(config_path),
                       plugins_with_anthropic(), run, "cpu")
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    return summary, records, run


# --- 1. failures reach the model -----------------------------------------------------------


def test_a_wrong_candidate_is_repaired_with_its_verdict_and_code(server, tmp_path):
    server.add(reply(WRONG, "scale without the relu"), reply(GOOD, "put the relu back"))
    summary, records, _ = run_loop(server, tmp_path, budget=2, params="    enforce_language: false\n")

    assert [r["verdict"] for r in records] == ["incorrect", "correct"]
    assert records[1]["parent"] == records[0]["id"]  # the repair is a child of the failure
    first, second = (user_text(b) for b in server.bodies)
    assert first != second
    # the first draft knows the inputs and the tolerances (the loop ran get_inputs() once)
    assert "x: float32 [64, 64] contiguous" in first and "float32: atol 0.0001, rtol 0.0001" in first
    assert "The reference takes" in first
    assert f"Version that failed: {records[0]['id']}" in second
    assert "Verdict: incorrect" in second
    assert "x * self.scale" in second  # the failed code
    assert records[0]["reason"].splitlines()[0][:60] in second  # the mismatch, as the evaluator said it
    assert summary["best_id"] == records[1]["id"]


def test_a_second_refinement_sees_its_earlier_sibling(server, tmp_path):
    server.add(reply(GOOD, "clamp then scale"), reply(WRONG, "drop the clamp"), reply(GOOD, "again"))
    _, records, _ = run_loop(server, tmp_path, budget=3,
                             extra="search:\n  name: greedy\n  params:\n    repair_attempts: 0\n")
    assert [r["parent"] for r in records] == ["root", records[0]["id"], records[0]["id"]]
    third = user_text(server.bodies[2])
    assert f"Version to improve: {records[0]['id']}" in third
    assert f"- {records[1]['id']}: drop the clamp -> incorrect" in third
    assert "return x * self.scale" in third  # the sibling's code, summarised


# --- 2. a failed call is recorded and does not end the run ---------------------------------


def test_a_failed_call_is_recorded_and_the_run_goes_on(server, tmp_path):
    server.add(error_reply(400, "invalid_request_error", "prompt is too long"), reply(GOOD, "clamp then scale"))
    summary, records, run = run_loop(server, tmp_path, budget=1)

    assert summary["evaluated"] == 1 and summary["stopped_because"] == "budget reached"
    [error] = [json.loads(line) for line in (run / "errors.jsonl").read_text().splitlines()]
    assert error["parent"] == "root" and "prompt is too long" in error["error"] and error["in_a_row"] == 1
    report = (run / "report.md").read_text()
    assert "## Generator failures" in report and "prompt is too long" in report


def test_the_run_stops_after_n_failures_in_a_row_and_keeps_its_best(server, tmp_path):
    server.add(reply(GOOD, "clamp then scale"),
               *(error_reply(400, "invalid_request_error", f"bad request {i}") for i in range(2)))
    summary, records, run = run_loop(server, tmp_path, budget=5, extra="max_generator_failures: 2\n")

    assert summary["evaluated"] == 1 and summary["best_id"] == records[0]["id"]
    assert (run / "best.py").exists()
    assert "bad request 1" in summary["stopped_because"] and "2 times in a row" in summary["stopped_because"]
    assert len((run / "errors.jsonl").read_text().splitlines()) == 2


# --- 4. the contract is enforced before evaluation -----------------------------------------


def test_refusals_and_replies_without_code_are_contract_violations(server, tmp_path):
    memory_path = tmp_path / "memory.sqlite"
    server.add(text_reply("I can't help with that.", stop_reason="refusal"),
               *(text_reply("Change: fuse it\nI would fuse the two operations.") for _ in range(3)),
               reply(GOOD, "clamp then scale"))
    summary, records, run = run_loop(server, tmp_path, budget=3, params="    max_repairs: 2\n",
                                     memory=f"enabled: true\n  path: {memory_path}")

    assert [r["verdict"] for r in records] == ["contract_violation", "contract_violation", "correct"]
    assert "refused" in records[0]["reason"]
    assert "no ```python code block" in records[1]["reason"]
    assert records[1]["description"] == "fuse it"  # the model's own line, not the error
    assert records[0]["runtime_ms"] is None and not (run / "evals" / records[0]["id"]).exists()
    assert len(server.requests) == 5  # the refusal was not asked again; the other had 2 repairs
    assert summary["best_id"] == records[2]["id"]
    from kernelpro.search.memory import SearchMemory

    with SearchMemory(memory_path) as memory:
        assert memory.count() == 1  # only the evaluated candidate taught it something
