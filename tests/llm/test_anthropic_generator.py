"""The anthropic generator end to end against the scripted Messages server (real SDK,
real HTTP on 127.0.0.1). Replies are scripted by the tests; no model is involved."""

from __future__ import annotations

import json

import pytest
from llm_helpers import CUDA_KERNEL, answer, request_for, user_text
from mock_messages_server import (
    cut_stream,
    error_reply,
    hang,
    malformed_body,
    overloaded,
    rate_limited,
    server_error,
    stream_error,
    text_reply,
    tool_use_reply,
)

from kernelpro.api import GenerationBudgetExhausted, ParentInfo, ToolContext
from kernelpro.generate.anthropic_gen import (
    FINAL_ROUND_NOTE,
    NO_ROUNDS_LEFT,
    AnthropicGenerator,
    AnthropicSettings,
    usage_section,
)
from kernelpro.generate.llm.retry import LLMError
from kernelpro.gpus import SPECS
from kernelpro.llm_tools import RunMicroProfiler, ToolBox
from kernelpro.records import (
    Analysis,
    Bottleneck,
    CompileResult,
    CorrectnessResult,
    EvalResult,
    Finding,
    TimingStats,
    Verdict,
)

H200 = next(s for s in SPECS if s.name.startswith("H200"))


def timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.01, mean_ms=ms, min_ms=ms, max_ms=ms, cv=0.01, n=50,
                       method="cuda_event+l2_flush")


def correct_parent() -> ParentInfo:
    result = EvalResult(verdict=Verdict.CORRECT, timing=timing(0.8125), baseline=timing(0.4062),
                        correctness=CorrectnessResult(passed=True, trials=5, max_abs_err=1.2e-7),
                        device="cuda", gpu_name="NVIDIA H200")
    analysis = Analysis(
        bottleneck=Bottleneck(kind="memory", summary="DRAM throughput at 31% of peak with 12.5% sector efficiency",
                              roofline_fraction=0.31, evidence={"dram_throughput_pct": 31.0}, classifier="roofline"),
        findings=(
            Finding(tool="coalescing", severity="high", title="Uncoalesced global loads",
                    message="Each warp touches 32 sectors per load instead of 4 (12.5% efficiency).",
                    action="Make consecutive threads read consecutive addresses (row-major index).",
                    estimated_gain=0.55, kernel="scaled_relu_strided",
                    evidence={"sectors_per_request": 32.0}),
            Finding(tool="vectorization", severity="low", title="Scalar 4-byte loads",
                    message="All global loads are LDG.E.32.", action="Load float4.", estimated_gain=0.05),
        ),
    )
    return ParentInfo(id="c0001", source=CUDA_KERNEL.replace("scaled_relu", "scaled_relu_strided"),
                      result=result, analysis=analysis, description="strided first version")


# --- a good kernel -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_good_kernel_becomes_a_draft(server, make_generator, problem, stream):
    server.add(text_reply(answer(), usage={"input_tokens": 1200, "output_tokens": 400}))
    gen = make_generator(stream=stream)
    drafts = gen.generate(request_for(problem, gpu=H200))

    assert len(drafts) == 1
    draft = drafts[0]
    assert draft.source == CUDA_KERNEL
    assert draft.generator == "anthropic"
    assert draft.language == "cuda"
    assert draft.description == "one thread per element, fused relu and scale"
    assert draft.params["mode"] == "first" and draft.params["contract_repairs"] == 0
    assert draft.usage["calls"] == 1 and draft.usage["input_tokens"] == 1200
    body = server.bodies[0]
    assert body["model"] == "claude-sonnet-4-6"
    assert body.get("stream", False) is stream
    assert "tools" not in body
    assert "H200" in body["system"][0]["text"] and "4800 GB/s" in body["system"][0]["text"]
    assert "class Model(nn.Module)" in body["messages"][0]["content"][0]["text"]
    assert "first optimized version" in body["messages"][0]["content"][1]["text"]


def test_prompt_cache_breakpoints(server, make_generator, problem):
    server.add(text_reply("no code here"), text_reply(answer()), text_reply(answer()))
    make_generator().generate(request_for(problem))
    make_generator(prompt_cache=False).generate(request_for(problem))
    first, second, uncached = server.bodies
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    # the follow-up marks its last turn too, and never more than the API's four breakpoints
    assert second["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert json.dumps(second).count('"cache_control"') <= 4
    assert "cache_control" not in json.dumps(uncached)


def test_thinking_and_temperature_params(server, make_generator, problem):
    server.add(text_reply(answer()), text_reply(answer()))
    make_generator(thinking_budget=2048, temperature=0.5).generate(request_for(problem))
    make_generator(temperature=0.5).generate(request_for(problem))
    thinking, plain = server.bodies
    assert thinking["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in thinking  # the API allows only the default with thinking
    assert plain["temperature"] == 0.5 and "thinking" not in plain


# --- a broken answer and its repair ----------------------------------------------------------


@pytest.mark.parametrize(
    "bad_reply, reason",
    [
        ("I would fuse the two operations.", "no ```python code block"),
        ("Change: x\n```python\nimport torch\nclass ModelNew(:\n    pass\n```", "syntax error"),
        ("Change: x\n```python\nimport torch\nclass Faster:\n    pass\n```", "does not define class ModelNew"),
        ("Change: x\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
         "    def __init__(self, scale):\n        super().__init__()\n"
         "    def forward(self, x):\n        return torch.relu(x)\n```", "no cuda kernel"),
    ],
)
def test_contract_violation_gets_a_repair_prompt(server, make_generator, problem, bad_reply, reason):
    server.add(text_reply(bad_reply), text_reply(answer()))
    drafts = make_generator().generate(request_for(problem))

    assert drafts[0].source == CUDA_KERNEL
    assert drafts[0].params["contract_repairs"] == 1
    assert drafts[0].usage["calls"] == 2
    repair_turn = server.bodies[1]["messages"][-1]["content"][-1]["text"]
    assert "could not be used" in repair_turn and reason in repair_turn
    # the broken reply is part of the conversation the model sees
    assert server.bodies[1]["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": bad_reply}]}


def test_truncated_replies_say_why(server, make_generator, problem):
    server.add(text_reply("Change: x\n```python\nimport torch\n", stop_reason="max_tokens"), text_reply(answer()))
    make_generator(max_tokens=2000).generate(request_for(problem))
    cut = server.bodies[1]["messages"][-1]["content"][-1]["text"]
    assert "the code block is not closed (the answer was cut off?) (the reply stopped at max_tokens = 2000)" in cut


@pytest.mark.parametrize("reply, stop", [("I can't help with that.", "refusal"),
                                         ("I'm sorry, but I can't assist with this request.", "end_turn")])
def test_a_refusal_is_not_asked_again(server, make_generator, problem, reply, stop):
    server.add(text_reply(reply, stop_reason=stop), text_reply(answer()))
    [draft] = make_generator(max_repairs=2).generate(request_for(problem))
    assert len(server.requests) == 1  # the same prompt would get the same answer
    assert draft.contract_error and ("refused" in draft.contract_error or "declined" in draft.contract_error)
    assert draft.params["contract_repairs"] == 0


def test_contract_still_broken_after_max_repairs(server, make_generator, problem):
    server.add(*(text_reply("Change: x\n```python\nprint('no model')\n```") for _ in range(3)))
    drafts = make_generator(max_repairs=2).generate(request_for(problem))
    assert len(server.requests) == 3
    draft = drafts[0]
    assert draft.params["contract_error"] == "the code block does not define class ModelNew"
    assert draft.contract_error == "the code block does not define class ModelNew"
    assert draft.description == "x"  # the model's own Change line, not the error
    assert draft.source == "print('no model')\n"
    assert draft.usage["calls"] == 3


def test_failed_parent_gets_the_repair_template(server, make_generator, problem):
    log = "snippet.cu(4): error: identifier \"fmaxff\" is undefined\n1 error detected"
    parent = ParentInfo(
        id="c0003", source=CUDA_KERNEL.replace("fmaxf", "fmaxff"),
        result=EvalResult(verdict=Verdict.COMPILE_ERROR, reason="nvcc failed",
                          compile=CompileResult(ok=False, language="cuda", log=log)),
        analysis=None, description="fused kernel")
    server.add(text_reply(answer()))
    drafts = make_generator().generate(request_for(problem, parent))

    text = user_text(server.bodies[0])
    assert drafts[0].params["mode"] == "repair" and drafts[0].params["parent"] == "c0003"
    assert "Version that failed: c0003" in text and "Verdict: compile_error" in text
    assert log in text and "fmaxff(x[i]" in text
    assert "Profiler findings" not in text


def test_incorrect_parent_prompt_carries_the_verification_error(server, make_generator, problem):
    parent = ParentInfo(
        id="c0004", source=CUDA_KERNEL,
        result=EvalResult(verdict=Verdict.INCORRECT, reason="output 0 differs from the reference",
                          correctness=CorrectnessResult(passed=False, trials=5, max_abs_err=3.5, max_rel_err=0.9,
                                                        message="trial 0: 12 of 16777216 elements differ")),
        analysis=None)
    server.add(text_reply(answer()))
    make_generator().generate(request_for(problem, parent))
    text = user_text(server.bodies[0])
    assert "Verdict: incorrect" in text and "largest absolute error 3.5" in text
    assert "12 of 16777216 elements differ" in text


# --- refinement carries the evaluation and the findings ------------------------------------


def test_refinement_prompt_carries_evaluation_and_findings(server, make_generator, problem):
    server.add(text_reply(answer()))
    request = request_for(problem, correct_parent(), gpu=H200,
                          memory=("c0001 strided loads: 0.5x (memory bound)",),
                          heuristic_notes=("sm_90: 128-byte aligned vector loads reach full DRAM bandwidth",))
    drafts = make_generator().generate(request)

    text = user_text(server.bodies[0])
    assert drafts[0].params["mode"] == "refine"
    assert "Version to improve: c0001" in text and "scaled_relu_strided" in text
    assert "Runtime: 0.8125 ms" in text and "Reference (PyTorch eager): 0.4062 ms" in text
    assert "speedup 0.5x" in text
    assert "memory: DRAM throughput at 31% of peak with 12.5% sector efficiency" in text
    assert "31% of the roofline" in text
    assert "[high] Uncoalesced global loads (kernel scaled_relu_strided) (coalescing)" in text
    assert "Each warp touches 32 sectors per load instead of 4" in text
    assert "Action: Make consecutive threads read consecutive addresses" in text
    assert "Estimated gain: about 55% of the runtime." in text
    assert "sectors_per_request = 32" in text
    assert "c0001 strided loads: 0.5x (memory bound)" in text
    assert "128-byte aligned vector loads" in text
    assert "DRAM 4800 GB/s" in text
    # findings in order of severity: the high one comes first
    assert text.index("Uncoalesced") < text.index("Scalar 4-byte loads")


def test_several_candidates_per_expansion_are_told_apart(server, make_generator, problem):
    server.add(text_reply(answer(change="float4 loads")), text_reply(answer(change="grid-stride loop")))
    drafts = make_generator(candidates_per_expansion=2).generate(request_for(problem, n=3))
    assert [d.description for d in drafts] == ["float4 loads", "grid-stride loop"]
    assert "float4 loads" not in user_text(server.bodies[0])
    assert "Take a different approach from these:\n- float4 loads" in user_text(server.bodies[1])


# --- tool use --------------------------------------------------------------------------------


def toolbox_for(problem, parent, calls):
    def profile_parent(names):
        calls.append(list(names))
        return Analysis(bottleneck=parent.analysis.bottleneck, findings=(
            Finding(tool="bank_conflicts", severity="medium", title="Shared-memory bank conflicts",
                    message="4.0-way conflicts on 60% of shared loads.", action="Pad the tile by one column.",
                    estimated_gain=0.12),))

    ctx = ToolContext(problem=problem, parent=parent, device="cuda", gpu=H200, run_dir=None,
                      profile_parent=profile_parent)
    return ToolBox([RunMicroProfiler()], ctx)


@pytest.mark.parametrize("stream", [True, False])
def test_tool_use_round_trip(server, make_generator, problem, stream):
    parent = correct_parent()
    calls: list[list[str]] = []
    server.add(
        tool_use_reply("run_micro_profiler", {"names": ["bank_conflicts"]}, text="Let me check shared memory.",
                       tool_id="toolu_01"),
        text_reply(answer()),
    )
    gen = make_generator(stream=stream)
    drafts = gen.generate(request_for(problem, parent, tools=toolbox_for(problem, parent, calls)))

    assert calls == [["bank_conflicts"]]
    first, second = server.bodies
    assert [t["name"] for t in first["tools"]] == ["run_micro_profiler"]
    assert "tool_choice" not in first
    assert "run_micro_profiler:" in first["system"][0]["text"]
    assert second["messages"][1]["content"][-1] == {
        "type": "tool_use", "id": "toolu_01", "name": "run_micro_profiler", "input": {"names": ["bank_conflicts"]}}
    result = second["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01" and result["is_error"] is False
    assert "Shared-memory bank conflicts" in result["content"] and "Pad the tile by one column." in result["content"]
    assert drafts[0].usage["tool_calls"] == 1 and drafts[0].usage["calls"] == 2
    assert drafts[0].params["tool_calls"] == ["run_micro_profiler"]
    assert gen.ledger.total.tool_calls == 1 and gen.ledger.total.calls == 2


@pytest.mark.parametrize("stream", [True, False])
def test_thinking_blocks_go_back_unchanged_in_tool_rounds(server, make_generator, problem, stream):
    parent = correct_parent()
    server.add(tool_use_reply("run_micro_profiler", {"names": ["x"]}, thinking="Is it bank conflicts?"),
               text_reply(answer()))
    make_generator(stream=stream, thinking_budget=1024).generate(
        request_for(problem, parent, tools=toolbox_for(problem, parent, [])))
    assert server.bodies[1]["messages"][1]["content"][0] == {
        "type": "thinking", "thinking": "Is it bank conflicts?", "signature": "sig-21"}


def test_tool_errors_go_back_to_the_model(server, make_generator, problem):
    parent = correct_parent()
    server.add(tool_use_reply("no_such_tool", {}), tool_use_reply("run_micro_profiler", {"names": "x"}),
               text_reply(answer()))
    make_generator().generate(request_for(problem, parent, tools=toolbox_for(problem, parent, [])))
    unknown = server.bodies[1]["messages"][2]["content"][0]
    bad_input = server.bodies[2]["messages"][4]["content"][0]
    assert unknown["is_error"] and "unknown tool 'no_such_tool'" in unknown["content"]
    assert bad_input["is_error"] and "must be of type array" in bad_input["content"]


def test_tool_rounds_are_capped(server, make_generator, problem):
    parent = correct_parent()
    calls: list[list[str]] = []
    server.add(tool_use_reply("run_micro_profiler", {"names": ["a"]}),
               tool_use_reply("run_micro_profiler", {"names": ["b"]}),
               text_reply(answer()))
    drafts = make_generator(max_tool_rounds=1).generate(
        request_for(problem, parent, tools=toolbox_for(problem, parent, calls)))

    assert calls == [["a"]]  # the call past the cap is not run
    second, third = server.bodies[1], server.bodies[2]
    assert second["messages"][-1]["content"][-1]["text"] == FINAL_ROUND_NOTE
    assert second["tool_choice"] == {"type": "none"} and third["tool_choice"] == {"type": "none"}
    refused = third["messages"][-1]["content"][0]
    assert refused["is_error"] and refused["content"] == NO_ROUNDS_LEFT
    assert drafts[0].source == CUDA_KERNEL


# --- rate limits and server errors -----------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_rate_limits_and_overload_are_retried(server, make_generator, problem, stream):
    server.add(rate_limited(retry_after=0), overloaded(), server_error(), text_reply(answer()))
    gen = make_generator(stream=stream, retry_base_delay_s=0.004, retry_max_delay_s=0.01)
    drafts = gen.generate(request_for(problem))

    assert len(server.requests) == 4
    assert drafts[0].source == CUDA_KERNEL
    assert drafts[0].params["retries"] == 3 and drafts[0].usage["calls"] == 1
    assert gen.slept[0] == 0  # retry-after: 0 honoured
    # retry k waits d/2 + U(0, d/2) with d = min(max, base * 2**k): doubling, capped
    assert 0.004 <= gen.slept[1] <= 0.008 and 0.005 <= gen.slept[2] <= 0.01
    # the SDK's own retries are off: every attempt above is ours
    assert all(r["headers"].get("x-stainless-retry-count", "0") == "0" for r in server.requests)


def test_error_inside_a_stream_is_retried(server, make_generator, problem):
    server.add(stream_error("overloaded_error"), text_reply(answer()))
    drafts = make_generator(stream=True).generate(request_for(problem))
    assert len(server.requests) == 2 and drafts[0].params["retries"] == 1


def test_retries_give_up_with_one_line(server, make_generator, problem):
    server.add(*(overloaded() for _ in range(3)))
    with pytest.raises(LLMError) as err:
        make_generator(max_retries=2).generate(request_for(problem))
    assert len(server.requests) == 3
    assert str(err.value) == "anthropic: HTTP 529 overloaded_error: Overloaded (gave up after 3 attempts)"


def test_bad_request_is_not_retried(server, make_generator, problem):
    server.add(error_reply(400, "invalid_request_error", "model: not a known model"))
    with pytest.raises(LLMError, match="HTTP 400 invalid_request_error: model: not a known model"):
        make_generator().generate(request_for(problem))
    assert len(server.requests) == 1


# --- budget ----------------------------------------------------------------------------------


def test_call_budget_stops_generation(server, make_generator, problem, tmp_path):
    server.add(text_reply(answer()), text_reply(answer()))
    gen = make_generator(budget_calls=1)
    assert len(gen.generate(request_for(problem, run_dir=tmp_path))) == 1
    with pytest.raises(GenerationBudgetExhausted, match=r"LLM call budget spent \(1 of 1 calls\)"):
        gen.generate(request_for(problem, run_dir=tmp_path))
    assert len(server.requests) == 1
    usage = json.loads((tmp_path / "llm" / "usage.json").read_text())
    assert usage["stopped_because"].startswith("LLM call budget spent")


def test_budget_keeps_drafts_already_written(server, make_generator, problem):
    server.add(text_reply(answer()), text_reply(answer()))
    gen = make_generator(budget_calls=1, candidates_per_expansion=2)
    drafts = gen.generate(request_for(problem, n=2))
    assert len(drafts) == 1 and len(server.requests) == 1


@pytest.mark.parametrize("budget, why", [
    (0.40, r"LLM dollar budget spent \(\$0.4500 of \$0.40\)"),  # crossed by the first call
    (0.46, r"next call needs at least"),  # $0.45 spent: $0.01 buys fewer than 1024 output tokens
])
def test_dollar_budget_stops_generation(server, make_generator, problem, budget, why):
    big = {"input_tokens": 100_000, "output_tokens": 10_000}  # $0.30 + $0.15 at sonnet-4-6 prices
    server.add(text_reply(answer(), usage=big), text_reply(answer(), usage=big))
    gen = make_generator(budget_dollars=budget, max_tokens=2000)
    gen.generate(request_for(problem))  # worst case before the call: about $0.04
    with pytest.raises(GenerationBudgetExhausted, match=why):
        gen.generate(request_for(problem))
    assert len(server.requests) == 1


def test_dollar_budget_lowers_max_tokens_to_what_it_allows(server, make_generator, problem, tmp_path):
    # $0.10 at sonnet-4-6 prices: the default 16000 output tokens would cost up to $0.24
    server.add(text_reply(answer(), usage={"input_tokens": 2000, "output_tokens": 800}))
    gen = make_generator(budget_dollars=0.10)
    [draft] = gen.generate(request_for(problem, run_dir=tmp_path))
    sent = server.bodies[0]["max_tokens"]
    assert 1024 <= sent < 16000
    assert sent * 15.0 / 1e6 <= 0.10  # the output it may write fits the budget
    assert draft.usage["dollars"] <= 0.10


def test_output_token_budget_lowers_max_tokens(server, make_generator, problem):
    server.add(text_reply(answer(), usage={"output_tokens": 3000}),
               text_reply(answer(), usage={"output_tokens": 1000}))
    gen = make_generator(budget_output_tokens=5000, max_tokens=4000)
    gen.generate(request_for(problem))
    gen.generate(request_for(problem))
    assert [b["max_tokens"] for b in server.bodies] == [4000, 2000]
    with pytest.raises(GenerationBudgetExhausted, match="output-token budget"):
        gen.generate(request_for(problem))


# --- accounting and the report -----------------------------------------------------------------


def test_cost_accounting_per_candidate_and_run(server, make_generator, problem, tmp_path):
    usage = {"input_tokens": 1000, "output_tokens": 500, "cache_creation_input_tokens": 2000,
             "cache_read_input_tokens": 4000}
    server.add(text_reply("no block", usage=usage), text_reply(answer(), usage=usage), text_reply(answer(), usage=usage))
    gen = make_generator()
    d1 = gen.generate(request_for(problem, run_dir=tmp_path))[0]
    d2 = gen.generate(request_for(problem, run_dir=tmp_path))[0]

    # sonnet-4-6: $3 in, $15 out, $3.75 cache write, $0.30 cache read per million tokens
    per_call = (1000 * 3 + 500 * 15 + 2000 * 3.75 + 4000 * 0.30) / 1e6
    assert d1.usage == {"input_tokens": 2000, "output_tokens": 1000, "cache_creation_input_tokens": 4000,
                        "cache_read_input_tokens": 8000, "calls": 2, "tool_calls": 0,
                        "dollars": pytest.approx(2 * per_call)}
    assert d2.usage["dollars"] == pytest.approx(per_call)
    totals = json.loads((tmp_path / "llm" / "usage.json").read_text())["totals"]
    assert totals["calls"] == 3 and totals["dollars"] == pytest.approx(3 * per_call)
    assert (tmp_path / d1.params["transcript"]).exists()

    records = [{"id": "c0001", "usage": d1.usage}, {"id": "c0002", "usage": d2.usage}]
    section = usage_section(tmp_path, records)
    assert "## LLM usage (anthropic)" in section
    assert "| 3000 | 6000 | 12000 | 1500 | $0.0576 |" in section
    assert f"| c0001 | 2 | 0 | 2000 | 4000 | 8000 | 1000 | ${2 * per_call:.4f} |" in section
    assert usage_section(tmp_path / "elsewhere", records) is None


def test_unpriced_model_reports_no_dollars(server, make_generator, problem):
    server.add(text_reply(answer()))
    draft = make_generator(model="some-local-model").generate(request_for(problem))[0]
    assert "dollars" not in draft.usage and draft.usage["calls"] == 1
    with pytest.raises(ValueError, match="budget_dollars needs prices"):
        make_generator(model="some-local-model", budget_dollars=1.0)


# --- credentials and endpoint ------------------------------------------------------------------


def test_missing_key_is_one_line(monkeypatch):
    with pytest.raises(ValueError) as err:
        AnthropicGenerator(AnthropicSettings(base_url="https://api.anthropic.com"))
    assert str(err.value) == (
        "ANTHROPIC_API_KEY is not set: export ANTHROPIC_API_KEY=... or set generator.params.api_key_env")
    with pytest.raises(ValueError, match="^MY_KEY is not set: export MY_KEY=..."):
        AnthropicGenerator(AnthropicSettings(api_key_env="MY_KEY"))


def test_key_from_the_named_variable_and_base_url_from_the_environment(server, monkeypatch, problem):
    monkeypatch.setenv("MY_KEY", "sk-test-123")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.add(text_reply(answer()))
    AnthropicGenerator(AnthropicSettings(api_key_env="MY_KEY", retry_base_delay_s=0.001)).generate(
        request_for(problem))
    headers = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
    assert "sk-test-123" in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))


def test_settings_are_validated():
    with pytest.raises(ValueError, match="thinking_budget"):
        AnthropicSettings(thinking_budget=500)
    with pytest.raises(ValueError, match="language"):
        AnthropicSettings(language="fortran")
    with pytest.raises(ValueError, match="max_retries must be >= 0"):
        AnthropicSettings(max_retries=-1)


def test_no_tools_offered_when_rounds_are_zero(server, make_generator, problem):
    parent = correct_parent()
    server.add(text_reply(answer()))
    make_generator(max_tool_rounds=0).generate(request_for(problem, parent, tools=toolbox_for(problem, parent, [])))
    assert "tools" not in server.bodies[0] and "# Tools" not in server.bodies[0]["system"][0]["text"]


# --- transport failures are retried; a hung endpoint is bounded ------------------------------


def test_a_malformed_body_is_retried(server, make_generator, problem):
    server.add(malformed_body(), text_reply(answer()))
    [draft] = make_generator(stream=False).generate(request_for(problem))
    assert draft.source == CUDA_KERNEL and draft.params["retries"] == 1 and len(server.requests) == 2


@pytest.mark.parametrize("framing", ["close", "chunked"])
def test_a_stream_cut_mid_reply_is_retried_never_accepted(server, make_generator, problem, framing):
    server.add(cut_stream(framing), text_reply(answer()))
    [draft] = make_generator(stream=True).generate(request_for(problem))
    # the cut reply (no message_stop) is an error, not an answer
    assert draft.source == CUDA_KERNEL and draft.params["retries"] == 1 and len(server.requests) == 2
    assert draft.params["contract_repairs"] == 0


def test_a_hung_endpoint_is_bounded_by_the_call_deadline(server, make_generator, problem):
    import time

    server.add(*(hang(5.0) for _ in range(5)))
    gen = make_generator(timeout_s=30.0, call_deadline_s=1.5, max_retries=6)
    t0 = time.monotonic()
    with pytest.raises(LLMError, match="deadline"):
        gen.generate(request_for(problem))
    assert time.monotonic() - t0 < 4.0
