"""Prices, the ledger's budget checks, and the retry policy, without a server."""

from __future__ import annotations

import random

import anthropic
import httpx2
import pytest

from kernelpro.api import GenerationBudgetExhausted
from kernelpro.generate.llm.accounting import Budget, Ledger, Prices, Usage, cost_dollars, resolve_prices
from kernelpro.generate.llm.retry import LLMError, backoff_delay_s, is_retryable, retry_after_s, with_retries

SONNET = Prices(3.0, 15.0, 3.75, 0.30)


def status_error(status: int, error_type: str, headers: dict | None = None) -> anthropic.APIStatusError:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
    body = {"type": "error", "error": {"type": error_type, "message": error_type}}
    response = httpx2.Response(status, json=body, headers=headers or {}, request=request)
    from anthropic._error_classes import make_status_error

    return make_status_error(error_type, body=body, response=response)


def test_prices_come_from_the_table_or_the_config():
    assert resolve_prices("claude-sonnet-4-6", None, None, None, None) == SONNET
    assert resolve_prices("claude-sonnet-4-6", 1.0, None, None, None) == Prices(1.0, 15.0, 3.75, 0.30)
    assert resolve_prices("local-model", 1.0, 2.0, None, None) is None
    assert resolve_prices("local-model", 0, 0, 0, 0) == Prices(0, 0, 0, 0)


def test_cost_of_every_token_kind():
    u = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_creation_input_tokens=1_000_000,
              cache_read_input_tokens=1_000_000)
    assert cost_dollars(u, SONNET) == pytest.approx(3 + 15 + 3.75 + 0.30)
    assert cost_dollars(u, None) is None
    total = Usage()
    total.add(Usage(calls=1, dollars=None))
    assert total.dollars is None and "dollars" not in total.as_dict()


def test_call_budget_is_exact():
    ledger = Ledger(Budget(calls=2), SONNET)
    for _ in range(2):
        ledger.reserve(100, 4000, 1024)
        ledger.record(Usage(calls=1))
    with pytest.raises(GenerationBudgetExhausted, match=r"2 of 2 calls"):
        ledger.reserve(100, 4000, 1024)
    assert ledger.stopped_because.startswith("LLM call budget spent")


def test_input_budget_refuses_a_call_that_would_exceed_it():
    ledger = Ledger(Budget(input_tokens=10_000), SONNET)
    ledger.reserve(9_000, 4000, 1024)
    ledger.record(Usage(input_tokens=1000, cache_read_input_tokens=8000, calls=1))
    with pytest.raises(GenerationBudgetExhausted, match="input-token budget"):
        ledger.reserve(2_000, 4000, 1024)


def test_output_budget_lowers_max_tokens_then_stops():
    ledger = Ledger(Budget(output_tokens=6000), None)
    assert ledger.reserve(10, 4000, 1024) == 4000
    ledger.record(Usage(output_tokens=4000, calls=1, dollars=None))
    assert ledger.reserve(10, 4000, 1024) == 2000
    ledger.record(Usage(output_tokens=1500, calls=1, dollars=None))
    with pytest.raises(GenerationBudgetExhausted, match="output-token budget"):
        ledger.reserve(10, 4000, 1024)


def test_dollar_budget_needs_prices():
    with pytest.raises(ValueError, match="budget_dollars needs prices"):
        Ledger(Budget(dollars=1.0), None)


def test_backoff_doubles_with_jitter_and_a_cap():
    rng = random.Random(1)
    for attempt in range(8):
        d = min(30.0, 1.0 * 2**attempt)
        delay = backoff_delay_s(attempt, 1.0, 30.0, rng)
        assert d / 2 <= delay <= d


def test_which_errors_are_retried():
    assert is_retryable(status_error(429, "rate_limit_error"))
    assert is_retryable(status_error(529, "overloaded_error"))
    assert is_retryable(status_error(500, "api_error"))
    assert is_retryable(status_error(200, "overloaded_error"))  # an error event inside a stream
    assert not is_retryable(status_error(400, "invalid_request_error"))
    assert not is_retryable(status_error(401, "authentication_error"))
    req = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
    assert is_retryable(anthropic.APITimeoutError(request=req))
    assert is_retryable(anthropic.APIConnectionError(request=req))


def test_retry_after_headers():
    assert retry_after_s(status_error(429, "rate_limit_error", {"retry-after": "7"})) == 7.0
    assert retry_after_s(status_error(429, "rate_limit_error", {"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(status_error(429, "rate_limit_error")) is None
    slept = []
    errors = [status_error(429, "rate_limit_error", {"retry-after": "120"})]

    def call():
        if errors:
            raise errors.pop()
        return "ok"

    assert with_retries(call, max_retries=1, base_delay_s=1, max_delay_s=30, rng=random.Random(0),
                        sleep=slept.append) == "ok"
    assert slept == [30]  # the server's hint, capped


def test_timeouts_are_retried_then_reported():
    req = httpx2.Request("POST", "http://127.0.0.1/v1/messages")

    def call():
        raise anthropic.APITimeoutError(request=req)

    with pytest.raises(LLMError, match=r"^anthropic: request timed out \(gave up after 3 attempts\)$"):
        with_retries(call, max_retries=2, base_delay_s=0, max_delay_s=0, rng=random.Random(0),
                     sleep=lambda s: None)
