"""Retries of Messages API calls: exponential backoff with jitter.

The SDK's own retries are turned off (``max_retries=0`` on the client) so that every
attempt is counted here. Retried: HTTP 408, 429, 500, 502, 503, 504 and 529; errors that
arrive inside a stream with a retryable ``error.type``; timeouts and connection errors;
transport failures in the middle of a reply (a chunked body cut off); a malformed JSON
body; and a stream that ends without ``message_stop`` (:class:`IncompleteReply`: a
truncated answer is never taken for a finished one). Everything else (400 invalid
request, 401, 403, 404, ...) fails at once.

A per-call deadline bounds all attempts of one call together: each attempt's timeout is
what is left of it, and no retry starts after it.

The delay before retry ``k`` (0-based) is ``d/2 + uniform(0, d/2)`` with
``d = min(max_delay_s, base_delay_s * 2**k)`` ("equal jitter"), unless the server sent
``retry-after`` / ``retry-after-ms``, which is honoured up to ``max_delay_s``.
"""

from __future__ import annotations

import functools
import importlib
import json
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


class IncompleteReply(Exception):
    """A reply that arrived cut off or malformed (a stream without ``message_stop``)."""


class DeadlineExceeded(Exception):
    """The call's deadline passed before an attempt could finish."""


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP library's transport errors (the SDK's own httpx build or httpx): raised
    unwrapped when a body breaks off in the middle of a read."""
    found: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


@functools.lru_cache(maxsize=None)
def transient() -> tuple[type[BaseException], ...]:
    """Failures that are not the SDK's errors but are transient all the same (looked up at
    the first call: importing the HTTP library costs a few tenths of a second)."""
    return (IncompleteReply, json.JSONDecodeError, *_transport_errors())


def _caught() -> tuple[type[BaseException], ...]:
    """Everything a call may raise that :func:`with_retries` judges."""
    import anthropic

    return (anthropic.AnthropicError, DeadlineExceeded, *transient())


def is_retryable(exc: BaseException) -> bool:
    import anthropic

    if isinstance(exc, transient()):
        return True
    if isinstance(exc, anthropic.APIResponseValidationError):  # a body that is not a message
        return True
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

    if isinstance(exc, IncompleteReply):
        return f"incomplete reply ({exc})"
    if isinstance(exc, DeadlineExceeded):
        return str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed response body ({exc})"
    if isinstance(exc, transient()):
        return f"transport error ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})"
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
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``call`` and retry it on retryable errors, at most ``max_retries`` times and
    never past ``deadline`` (a ``clock()`` time; None: no deadline).

    Raises :class:`LLMError` with one line when the error is not retryable, the retries
    are spent or the deadline passed.
    """
    attempt = 0
    while True:
        try:
            if deadline is not None and clock() >= deadline:
                raise DeadlineExceeded("the call deadline passed")
            return call()
        except _caught() as exc:
            if isinstance(exc, DeadlineExceeded) or (
                deadline is not None and clock() >= deadline and is_retryable(exc)
            ):
                raise LLMError(
                    f"anthropic: {describe(exc)} (gave up: the call deadline passed after "
                    f"{attempt + 1} attempts)"
                ) from exc
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
            if deadline is not None and clock() + delay >= deadline:
                raise LLMError(
                    f"anthropic: {describe(exc)} (gave up: the call deadline passes before the next "
                    f"attempt, after {attempt + 1} attempts)"
                ) from exc
            log.warning("anthropic: %s; retry %d of %d in %.1f s", describe(exc), attempt + 1, max_retries, delay)
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            sleep(delay)
            attempt += 1
