"""The anthropic SDK client: credentials, one Messages call (streamed or not), and the
conversion of a reply back into request content.

Credentials: the API key comes from the environment variable the config names
(``api_key_env``, default ``ANTHROPIC_API_KEY``); ``ANTHROPIC_AUTH_TOKEN`` (a bearer
token) is used when no key is set. A server on the local machine (``localhost``,
``127.0.0.1``, ``::1``) needs neither: local Anthropic-compatible servers usually do not
check keys, so a placeholder key is sent. The base URL is the config's ``base_url``, else
the SDK's ``ANTHROPIC_BASE_URL`` variable, else the SDK default.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:  # imported on first use: the SDK takes seconds to import
    import anthropic

from kernelpro.generate.llm.retry import DeadlineExceeded, IncompleteReply

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: sent to local servers when no key is configured
LOCAL_PLACEHOLDER_KEY = "kernelpro-local-no-key"


def effective_base_url(base_url: str | None) -> str | None:
    return base_url or os.environ.get("ANTHROPIC_BASE_URL") or None


def is_local(base_url: str | None) -> bool:
    if not base_url:
        return False
    host = urlparse(base_url).hostname
    return host in LOCAL_HOSTS


def make_client(*, base_url: str | None, api_key_env: str, timeout_s: float) -> anthropic.Anthropic:
    """An SDK client with the SDK's retries off (retries are ours).

    Raises ValueError with one line when no credential is available for a remote server.
    """
    import anthropic

    url = effective_base_url(base_url)
    key = os.environ.get(api_key_env) or None
    token = None if key else (os.environ.get("ANTHROPIC_AUTH_TOKEN") or None)
    if key is None and token is None:
        if not is_local(url):
            raise ValueError(
                f"{api_key_env} is not set: export {api_key_env}=... "
                "or set generator.params.api_key_env"
            )
        key = LOCAL_PLACEHOLDER_KEY
    return anthropic.Anthropic(
        api_key=key,
        auth_token=token if key is None else None,
        base_url=url,
        max_retries=0,
        timeout=timeout_s,
    )


def send(client: anthropic.Anthropic, params: dict[str, Any], *, stream: bool, deadline: float | None = None,
         timeout_s: float | None = None) -> Any:
    """One Messages API call; returns the final ``Message``. Streaming accumulates the
    server-sent events into the same message object, and a stream that ends without
    ``message_stop`` raises :class:`IncompleteReply` (however the connection closed).

    ``timeout_s`` is the longest wait for any one read; ``deadline`` (a monotonic time)
    bounds the whole call: the read timeout shrinks to what is left of it, and a stream
    still running at the deadline is abandoned.
    """
    timeout = timeout_s
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded("the call deadline passed")
        timeout = left if timeout is None else min(timeout, left)
    call: dict[str, Any] = {**params, "timeout": timeout} if timeout is not None else params
    if stream:
        with client.messages.stream(**call) as events:
            stopped = False
            for event in events:
                if event.type == "message_stop":
                    stopped = True
                if deadline is not None and time.monotonic() > deadline:
                    raise DeadlineExceeded("the call deadline passed while the reply was streaming")
            if not stopped:
                raise IncompleteReply("the stream ended without message_stop")
            return events.get_final_message()
    return client.messages.create(**call)


def assistant_content(message: Any) -> list[dict[str, Any]]:
    """The reply's content blocks as request parameters, to send back in the next turn.

    Thinking blocks are kept with their signatures (the API requires them back unchanged
    when tools are used); text and tool_use blocks keep only the request fields.
    """
    out: list[dict[str, Any]] = []
    for block in message.content:
        kind = block.type
        if kind == "text":
            out.append({"type": "text", "text": block.text})
        elif kind == "tool_use":
            out.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        elif kind == "thinking":
            out.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        elif kind == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": block.data})
        else:
            out.append(block.model_dump(mode="json", exclude_none=True))
    return out


def reply_text(message: Any) -> str:
    """The reply's text blocks joined (thinking excluded)."""
    return "\n".join(block.text for block in message.content if block.type == "text")


def tool_uses(message: Any) -> list[Any]:
    return [block for block in message.content if block.type == "tool_use"]
