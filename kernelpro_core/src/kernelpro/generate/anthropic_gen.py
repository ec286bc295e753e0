"""The ``anthropic`` code generator: Claude writes and rewrites kernels through the
Messages API, guided by the evaluation and the micro-profilers' findings.

One draft is one conversation:

1. The system prompt (``system.j2``: role, GPU ceilings, output format, integrity rules,
   tools) and a user turn made of the static problem block (``problem.j2``) and the task:
   ``first.j2`` without a parent, ``refine.j2`` for a correct parent (its source,
   evaluation, bottleneck and findings), ``repair.j2`` for a parent that failed to
   compile, verify or run (its source and error).
2. While the model asks for tools (``stop_reason == "tool_use"``) and rounds are left
   (``max_tool_rounds``), the tools of ``request.tools`` (a
   :class:`kernelpro.llm_tools.ToolBox`) run and their results go back as
   ``tool_result`` blocks. The last round tells the model to answer and later calls send
   ``tool_choice: none``.
3. The reply must hold a ``Change:`` line and one Python block with ``ModelNew``
   (:mod:`kernelpro.generate.llm.contract`). A reply that breaks the contract gets
   ``contract_repair.j2``, up to ``max_repairs`` times; after that the last reply is
   returned as a draft that the evaluator will reject, so that its cost stays on record.

Prompt caching: ``cache_control`` marks the system prompt, the problem block and the last
turn, so tool rounds and repairs re-read the prefix from the cache. Every call goes
through the run's :class:`~kernelpro.generate.llm.accounting.Ledger` (budget, totals) and
:func:`~kernelpro.generate.llm.retry.with_retries`. With a run directory, each draft's
conversation is written to ``llm/draft-NNNN.json`` and the run totals to
``llm/usage.json``, which the report section reads.
"""

from __future__ import annotations

import functools
import json
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable

import attrs

from kernelpro.api import GenerationBudgetExhausted, GenerationRequest, Generator
from kernelpro.generate.llm.accounting import Budget, Ledger, Usage, call_usage, estimate_tokens, resolve_prices
from kernelpro.generate.llm.client import (
    assistant_content,
    effective_base_url,
    make_client,
    reply_text,
    send,
    tool_uses,
)
from kernelpro.generate.llm.contract import ContractError, change_line, code_blocks, parse_answer, refusal
from kernelpro.generate.llm.prompts import prompt_variables, render
from kernelpro.generate.llm.retry import LLMError, with_retries
from kernelpro.hookspecs import hookimpl
from kernelpro.problem import detect_language
from kernelpro.records import CandidateDraft
from kernelpro.rundir import write_atomic

#: the smallest output allowance worth a call: a small kernel file is 600-1500 tokens
MIN_ANSWER_TOKENS = 1024
#: the API's lower limit on an extended-thinking budget
MIN_THINKING_BUDGET = 1024
LANGUAGES = ("cuda", "triton", "cute")

FINAL_ROUND_NOTE = "That was the last round of tool calls. Answer now in the output format."
NO_ROUNDS_LEFT = "No tool rounds are left; this call was not run. Answer now in the output format."

_EPHEMERAL = {"type": "ephemeral"}


def _non_negative(_: Any, attribute: attrs.Attribute, value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


def _positive(_: Any, attribute: attrs.Attribute, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value}")


def _language(_: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, got {value!r}")


def _optional_non_negative(_: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


@attrs.frozen
class AnthropicSettings:
    """``generator.params`` of the anthropic generator. Budgets: 0 means unlimited."""

    model: str = "claude-sonnet-4-6"
    base_url: str | None = None  # None: ANTHROPIC_BASE_URL, else the SDK default
    api_key_env: str = "ANTHROPIC_API_KEY"
    max_tokens: int = attrs.field(default=16000, validator=_non_negative)
    # sent only when set, and never with thinking (which requires the default)
    temperature: float | None = attrs.field(default=None, validator=_optional_non_negative)
    thinking_budget: int = attrs.field(default=0, validator=_non_negative)  # 0: off
    # drafts per expansion; the loop asks for this many, and a larger request is capped
    candidates_per_expansion: int = attrs.field(default=1, validator=_non_negative)
    language: str = attrs.field(default="cuda", validator=_language)
    enforce_language: bool = True  # refuse replies without a kernel in ``language``
    max_tool_rounds: int = attrs.field(default=4, validator=_non_negative)
    max_repairs: int = attrs.field(default=2, validator=_non_negative)
    timeout_s: float = attrs.field(default=600.0, validator=_positive)  # longest wait for one read
    # all attempts of one call (retries and their waits included) end by this many seconds
    call_deadline_s: float = attrs.field(default=900.0, validator=_positive)
    max_retries: int = attrs.field(default=6, validator=_non_negative)
    retry_base_delay_s: float = attrs.field(default=2.0, validator=_non_negative)
    retry_max_delay_s: float = attrs.field(default=60.0, validator=_non_negative)
    budget_calls: int = attrs.field(default=0, validator=_non_negative)
    budget_input_tokens: int = attrs.field(default=0, validator=_non_negative)
    budget_output_tokens: int = attrs.field(default=0, validator=_non_negative)
    budget_dollars: float = attrs.field(default=0.0, validator=_non_negative)
    # US dollars per million tokens; None: the list price of ``model`` when known
    price_input_per_mtok: float | None = attrs.field(default=None, validator=_optional_non_negative)
    price_output_per_mtok: float | None = attrs.field(default=None, validator=_optional_non_negative)
    price_cache_write_per_mtok: float | None = attrs.field(default=None, validator=_optional_non_negative)
    price_cache_read_per_mtok: float | None = attrs.field(default=None, validator=_optional_non_negative)
    stream: bool = True
    prompt_cache: bool = True
    save_transcripts: bool = True

    def __attrs_post_init__(self) -> None:
        if self.thinking_budget and not (MIN_THINKING_BUDGET <= self.thinking_budget < self.max_tokens):
            raise ValueError(
                f"thinking_budget must be 0 (off) or between {MIN_THINKING_BUDGET} and "
                f"max_tokens - 1 ({self.max_tokens - 1}), got {self.thinking_budget}"
            )
        if self.max_tokens < MIN_ANSWER_TOKENS:
            raise ValueError(f"max_tokens must be at least {MIN_ANSWER_TOKENS}, got {self.max_tokens}")


class AnthropicGenerator(Generator):
    """Claude through the official anthropic SDK (any Anthropic-compatible endpoint)."""

    name = "anthropic"
    Settings = AnthropicSettings
    description = (
        "Claude writes and rewrites kernels through the Messages API, guided by the "
        "evaluation and the micro-profilers' findings, with tool calls"
    )

    def __init__(
        self,
        settings: AnthropicSettings | None = None,
        *,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(settings)
        s: AnthropicSettings = self.settings
        self.prices = resolve_prices(
            s.model,
            s.price_input_per_mtok,
            s.price_output_per_mtok,
            s.price_cache_write_per_mtok,
            s.price_cache_read_per_mtok,
        )
        self.ledger = Ledger(
            Budget(s.budget_calls, s.budget_input_tokens, s.budget_output_tokens, s.budget_dollars),
            self.prices,
        )
        self.client = client if client is not None else make_client(
            base_url=s.base_url, api_key_env=s.api_key_env, timeout_s=s.timeout_s
        )
        self.retries = 0
        self._sleep = sleep
        self._rng = random.Random(0x5EED)
        self._lock = threading.Lock()
        self._drafts = 0

    # --- the Generator interface ---------------------------------------------------------

    def generate(self, request: GenerationRequest) -> list[CandidateDraft]:
        """Up to ``request.n`` drafts (capped by ``candidates_per_expansion``), each from
        its own conversation. Raises GenerationBudgetExhausted when the budget is spent
        before the first draft; drafts finished before that are returned."""
        s: AnthropicSettings = self.settings
        n = min(request.n, s.candidates_per_expansion) if s.candidates_per_expansion else request.n
        drafts: list[CandidateDraft] = []
        try:
            for _ in range(n):
                drafts.append(self._draft(request, [d.description for d in drafts]))
        except (GenerationBudgetExhausted, LLMError):
            # keep the drafts already paid for; a lasting failure raises on the next call
            if not drafts:
                raise
        finally:
            self._save_usage(request.run_dir)
        return drafts

    # --- one conversation ------------------------------------------------------------------

    def _draft(self, request: GenerationRequest, siblings: list[str]) -> CandidateDraft:
        s: AnthropicSettings = self.settings
        offered = request.tools is not None and len(request.tools) and s.max_tool_rounds > 0
        toolbox = request.tools if offered else None
        tool_defs = toolbox.definitions() if toolbox is not None else []
        variables_for = functools.partial(
            prompt_variables,
            request,
            language=s.language,
            language_required=s.enforce_language,
            tools=tool_defs,
            max_tool_rounds=s.max_tool_rounds,
            siblings=siblings,
        )
        variables = variables_for()
        mode = variables["mode"]
        # on a CPU run no GPU kernel can run: the language is neither asked for nor required
        language, enforce = s.language, bool(variables["language_required"])
        system = render("system.j2", variables)
        messages: list[dict[str, Any]] = [
            {
                "role": "user",
                "content": [
                    self._cached({"type": "text", "text": render("problem.j2", variables)}),
                    {"type": "text", "text": render(f"{mode}.j2", variables)},
                ],
            }
        ]
        usage = Usage(dollars=0.0 if self.prices else None)
        trace: dict[str, Any] = {"tools": [], "stop_reasons": [], "repairs": 0, "retries": 0}
        rounds = 0
        contract_error = "the model kept calling tools and gave no answer"
        text = ""
        for _turn in range(s.max_tool_rounds + s.max_repairs + 2):
            tools_open = toolbox is not None and rounds < s.max_tool_rounds
            message = self._call(system, messages, tool_defs, tools_open, usage, trace)
            trace["stop_reasons"].append(message.stop_reason)
            messages.append({"role": "assistant", "content": assistant_content(message)})
            uses = tool_uses(message)
            if uses:
                rounds += 1
                results: list[dict[str, Any]] = []
                for use in uses:
                    t0 = time.monotonic()
                    if tools_open and toolbox is not None:
                        out, is_error = toolbox.call(use.name, use.input)
                    else:
                        out, is_error = NO_ROUNDS_LEFT, True
                    trace["tools"].append({"name": use.name, "input": use.input, "is_error": is_error,
                                           "seconds": round(time.monotonic() - t0, 3)})
                    usage.tool_calls += 1
                    self.ledger.record(Usage(tool_calls=1))
                    results.append(
                        {"type": "tool_result", "tool_use_id": use.id, "content": out, "is_error": is_error}
                    )
                if rounds >= s.max_tool_rounds:
                    results.append({"type": "text", "text": FINAL_ROUND_NOTE})
                messages.append({"role": "user", "content": results})
                continue
            text = reply_text(message)
            declined = refusal(text, message.stop_reason)
            if declined is not None:
                # asking again with the same request would get the same answer
                contract_error = declined
                break
            try:
                answer = parse_answer(text, request.problem, language if enforce else None)
            except ContractError as exc:
                contract_error = str(exc)
                if message.stop_reason == "max_tokens":
                    contract_error += f" (the reply stopped at max_tokens = {s.max_tokens})"
                elif message.stop_reason not in ("end_turn", "stop_sequence", None):
                    contract_error += f" (stop_reason: {message.stop_reason})"
                if trace["repairs"] >= s.max_repairs:
                    break
                trace["repairs"] += 1
                repair = render("contract_repair.j2", variables_for(contract_error=contract_error))
                messages.append({"role": "user", "content": [{"type": "text", "text": repair}]})
                continue
            return self._finish(request, mode, answer.source, answer.description, None, usage, trace,
                                system, messages)
        # The contract was not met: hand back the last reply, marked, so that the loop
        # records it as a contract violation with its cost (it is never evaluated). The
        # description stays the model's own, or none.
        blocks = [body for _, body in code_blocks(text)]
        source = blocks[-1] if blocks else text
        said = change_line(text)
        return self._finish(request, mode, source, said, contract_error, usage, trace, system, messages)

    def _call(
        self,
        system: str,
        messages: list[dict[str, Any]],
        tool_defs: list[dict[str, Any]],
        tools_open: bool,
        usage: Usage,
        trace: dict[str, Any],
    ) -> Any:
        """One Messages call within the budget, with retries; adds its usage."""
        s: AnthropicSettings = self.settings
        params: dict[str, Any] = {
            "model": s.model,
            "system": [self._cached({"type": "text", "text": system})],
            "messages": self._with_last_turn_cached(messages),
        }
        if tool_defs:
            # always sent when a toolbox exists: earlier tool_use blocks need their tools,
            # and an unchanged tools list keeps the cached prefix valid
            params["tools"] = tool_defs
            if not tools_open:
                params["tool_choice"] = {"type": "none"}
        min_output = MIN_ANSWER_TOKENS
        if s.thinking_budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": s.thinking_budget}
            min_output += s.thinking_budget
        elif s.temperature is not None:
            # this SDK's messages.create has no temperature argument (current models fix
            # it); endpoints that still take one get it as an extra body field
            params["extra_body"] = {"temperature": s.temperature}
        estimate = estimate_tokens(len(json.dumps([params["system"], params["messages"], tool_defs])))
        params["max_tokens"] = self.ledger.reserve(estimate, s.max_tokens, min_output)

        def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
            trace["retries"] += 1
            with self._lock:
                self.retries += 1

        deadline = time.monotonic() + s.call_deadline_s
        message = with_retries(
            lambda: send(self.client, params, stream=s.stream, deadline=deadline, timeout_s=s.timeout_s),
            max_retries=s.max_retries,
            base_delay_s=s.retry_base_delay_s,
            max_delay_s=s.retry_max_delay_s,
            rng=self._rng,
            sleep=self._sleep,
            on_retry=on_retry,
            deadline=deadline,
        )
        call = call_usage(message.usage, self.prices)
        usage.add(call)
        self.ledger.record(call)
        return message

    def _cached(self, block: dict[str, Any]) -> dict[str, Any]:
        return {**block, "cache_control": _EPHEMERAL} if self.settings.prompt_cache else block

    def _with_last_turn_cached(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages with a cache breakpoint on the last block of the last turn (the
        stored conversation is not changed, so at most three breakpoints are sent)."""
        if not self.settings.prompt_cache or len(messages) < 2:
            return messages
        last = messages[-1]
        content = list(last["content"])
        content[-1] = self._cached(content[-1])
        return [*messages[:-1], {**last, "content": content}]

    # --- results and files -----------------------------------------------------------------

    def _finish(
        self,
        request: GenerationRequest,
        mode: str,
        source: str,
        description: str,
        contract_error: str | None,
        usage: Usage,
        trace: dict[str, Any],
        system: str,
        messages: list[dict[str, Any]],
    ) -> CandidateDraft:
        s: AnthropicSettings = self.settings
        with self._lock:
            self._drafts += 1
            number = self._drafts
        params: dict[str, Any] = {
            "model": s.model,
            "mode": mode,
            "parent": request.parent.id if request.parent else None,
            "tool_calls": [t["name"] for t in trace["tools"]],
            "contract_repairs": trace["repairs"],
            "retries": trace["retries"],
            "stop_reason": trace["stop_reasons"][-1] if trace["stop_reasons"] else None,
        }
        if contract_error:
            params["contract_error"] = contract_error
        if request.run_dir is not None and s.save_transcripts:
            name = f"llm/draft-{number:04d}.json"
            params["transcript"] = name
            _write_json(
                Path(request.run_dir) / name,
                {"params": params, "usage": usage.as_dict(), "tools": trace["tools"],
                 "stop_reasons": trace["stop_reasons"], "system": system, "messages": messages},
            )
        return CandidateDraft(
            source=source,
            generator=self.name,
            language=detect_language(source),
            description=description or f"{mode} version by {s.model}",
            params=params,
            usage=usage.as_dict(),
            contract_error=contract_error,
        )

    def _save_usage(self, run_dir: Path | None) -> None:
        if run_dir is None:
            return
        s: AnthropicSettings = self.settings
        b = self.ledger.budget
        _write_json(
            Path(run_dir) / "llm" / "usage.json",
            {
                "generator": self.name,
                "model": s.model,
                "base_url": effective_base_url(s.base_url) or "https://api.anthropic.com",
                "totals": self.ledger.total.as_dict(),
                "drafts": self._drafts,
                "retries": self.retries,
                "budget": attrs.asdict(b),
                "stopped_because": self.ledger.stopped_because,
                "prices_per_mtok": attrs.asdict(self.prices) if self.prices else None,
            },
        )


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=1, default=str))


# --- report ------------------------------------------------------------------------------


def usage_section(run_dir: Path, records: list) -> str | None:
    """The report's LLM section from ``llm/usage.json`` and the records' ``usage``; None
    when this run made no LLM calls."""
    path = Path(run_dir) / "llm" / "usage.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    t = data["totals"]
    dollars = f"${t['dollars']:.4f}" if "dollars" in t else "not priced (set the price_* params)"
    lines = [
        "## LLM usage (anthropic)",
        "",
        f"Model `{data['model']}` at {data['base_url']}: {t['calls']} calls "
        f"({data['retries']} retried), {data['drafts']} drafts, {t['tool_calls']} tool calls.",
        "",
        "| input tokens | cache writes | cache reads | output tokens | cost |",
        "|---:|---:|---:|---:|---:|",
        f"| {t['input_tokens']} | {t['cache_creation_input_tokens']} | "
        f"{t['cache_read_input_tokens']} | {t['output_tokens']} | {dollars} |",
    ]
    budget = {k: v for k, v in data["budget"].items() if v}
    if budget:
        lines += ["", "Budget: " + ", ".join(f"{k} {v}" for k, v in budget.items()) + "."]
    if data.get("stopped_because"):
        lines += ["", f"Generation stopped: {data['stopped_because']}."]
    rows = [
        (r.get("id", "?"), r["usage"])
        for r in records
        if isinstance(r, dict) and isinstance(r.get("usage"), dict) and r["usage"].get("calls")
    ]
    if rows:
        lines += [
            "",
            "| candidate | calls | tool calls | input | cache writes | cache reads | output | cost |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for cid, u in rows:
            cost = f"${u['dollars']:.4f}" if "dollars" in u else "-"
            lines.append(
                f"| {cid} | {int(u.get('calls', 0))} | {int(u.get('tool_calls', 0))} | "
                f"{int(u.get('input_tokens', 0))} | {int(u.get('cache_creation_input_tokens', 0))} | "
                f"{int(u.get('cache_read_input_tokens', 0))} | {int(u.get('output_tokens', 0))} | {cost} |"
            )
    return "\n".join(lines) + "\n"


@hookimpl
def kernelpro_register_generators(register):
    register(AnthropicGenerator)


@hookimpl
def kernelpro_report_sections(run, records):
    section = usage_section(run.run_dir, records)
    return [section] if section else []
