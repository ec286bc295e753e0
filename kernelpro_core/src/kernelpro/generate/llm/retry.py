"""Retries of Messages API calls: exponential backoff with jitter.

The SDK's own retries are turned off (``max_retries=0`` on the client) so that every
attempt is counted here. Retried: HTTP 408, 429, 500, 502, 503, 504 and 529; errors that
arrive inside a stream with a retryable ``error.type``; timeouts and connection errors.
Everything else (400 invalid request, 401, 403, 404, ...) fails at once.

The delay before retry ``k`` (0-based) is ``d/2 + uniform(0, d/2)`` with
``d = min(max_delay_s, base_delay_s * 2**k)`` ("equal jitter"), unless the server sent
``retry-after`` / ``retry-after-ms``, which is honoured up to ``max_delay_s``.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING, Callable, TypeVar

if TYPE_CHECKING:  # imported on first use: the SDK takes seconds to import
    import anthropic

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 529})
#: ``error.type`` values of the Messages API that a later attempt may not meet
RETRYABLE_ERROR_TYPES = frozenset({"rate_limit_error", "overloaded_error", "api_error", "timeout_error"})


class LLMError(Exception):
    """A Messages API call failed for good; the message is one line for the user."""


def is_retryable(exc: BaseException) -> bool:
    import anthropic

    if isinstance(exc, anthropic.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code in RETRYABLE_STATUS or error_type(exc) in RETRYABLE_ERROR_TYPES
    return False


def error_type(exc: anthropic.APIStatusError) -> str | None:
    """The body's ``error.type`` (SDKs before 2.x have no ``type`` attribute)."""
    kind = getattr(exc, "type", None)
    if kind is None and isinstance(exc.body, dict):
        error = exc.body.get("error")
        kind = error.get("type") if isinstance(error, dict) else None
    return kind


def retry_after_s(exc: BaseException) -> float | None:
    """The server's requested wait from ``retry-after-ms`` or ``retry-after`` (seconds)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue  # an HTTP date: fall back to our own backoff
    return None


def backoff_delay_s(attempt: int, base_delay_s: float, max_delay_s: float, rng: random.Random) -> float:
    d = min(max_delay_s, base_delay_s * (2**attempt))
    return d / 2 + rng.uniform(0, d / 2)


def describe(exc: BaseException) -> str:
    """One line naming the failure."""
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError):
        return "request timed out"
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return f"connection error ({cause})" if cause else "connection error"
    if isinstance(exc, anthropic.APIStatusError):
        kind = error_type(exc) or type(exc).__name__
        message = (getattr(exc, "api_message", None) or str(exc)).splitlines()[0][:300]
        return f"HTTP {exc.status_code} {kind}: {message}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


def with_retries(
    call: Callable[[], T],
    *,
    max_retries: int,
    base_delay_s: float,
    max_delay_s: float,
    rng: random.Random,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
) -> T:
    """Run ``call`` and retry it on retryable errors, at most ``max_retries`` times.

    Raises :class:`LLMError` with one line when the error is not retryable or the retries
    are spent.
    """
    import anthropic

    attempt = 0
    while True:
        try:
            return call()
        except anthropic.AnthropicError as exc:
            if not is_retryable(exc):
                raise LLMError(f"anthropic: {describe(exc)}") from exc
            if attempt >= max_retries:
                raise LLMError(
                    f"anthropic: {describe(exc)} (gave up after {attempt + 1} attempts)"
                ) from exc
            hinted = retry_after_s(exc)
            delay = (
                min(hinted, max_delay_s)
                if hinted is not None
                else backoff_delay_s(attempt, base_delay_s, max_delay_s, rng)
            )
            log.warning("anthropic: %s; retry %d of %d in %.1f s", describe(exc), attempt + 1, max_retries, delay)
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            sleep(delay)
            attempt += 1
