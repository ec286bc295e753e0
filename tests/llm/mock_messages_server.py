"""A scripted Anthropic Messages API server on 127.0.0.1, for tests without network.

It speaks enough of ``POST /v1/messages`` for the real anthropic SDK: JSON replies and
streamed server-sent events (message_start, content_block_start / delta / stop with
text_delta, input_json_delta, thinking_delta and signature_delta, message_delta with
usage, message_stop), and error
replies (HTTP 429 with retry-after, 529 overloaded_error, 500 api_error, or an error event
inside a stream). Replies come from a script, one entry per request, in order; an entry
may be a callable that builds the reply from the request body. Every request is recorded
(path, headers, JSON body) so that tests can assert on the prompts.

Nothing here is a language model: replies are whatever the test scripted.

The server runs in a daemon thread and stops by itself after ``lifetime_s`` seconds.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

Reply = dict[str, Any]
ScriptEntry = Reply | Callable[[dict[str, Any]], Reply]


# --- script entries ----------------------------------------------------------------------


def text_reply(text: str, *, usage: dict[str, int] | None = None, stop_reason: str = "end_turn") -> Reply:
    return {"kind": "message", "content": [{"type": "text", "text": text}], "stop_reason": stop_reason,
            "usage": usage}


def tool_use_reply(
    name: str,
    tool_input: dict[str, Any],
    *,
    text: str | None = None,
    tool_id: str | None = None,
    usage: dict[str, int] | None = None,
    thinking: str | None = None,
) -> Reply:
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking, "signature": f"sig-{len(thinking)}"})
    if text:
        content.append({"type": "text", "text": text})
    content.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
    return {"kind": "message", "content": content, "stop_reason": "tool_use", "usage": usage}


def error_reply(status: int, error_type: str, message: str = "", *, retry_after: float | None = None) -> Reply:
    return {"kind": "error", "status": status, "error_type": error_type,
            "message": message or error_type, "retry_after": retry_after}


def rate_limited(retry_after: float | None = 0) -> Reply:
    return error_reply(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit",
                       retry_after=retry_after)


def overloaded() -> Reply:
    return error_reply(529, "overloaded_error", "Overloaded")


def server_error() -> Reply:
    return error_reply(500, "api_error", "Internal server error")


def malformed_body() -> Reply:
    """HTTP 200 whose JSON body is cut off (content-length matches what is sent)."""
    return {"kind": "malformed"}


def cut_stream(framing: str = "close", after_events: int = 4) -> Reply:
    """For a streamed request: the reply's events up to ``after_events``, then the connection
    closes. ``framing`` "close": HTTP/1.0-style, the body ends at the close (no error at the
    HTTP level); "chunked": chunked encoding without its final chunk (a protocol error)."""
    return {"kind": "cut_stream", "framing": framing, "after_events": after_events}


def hang(seconds: float, then: Reply | None = None) -> Reply:
    """Say nothing for ``seconds`` (or until the client gives up), then reply ``then``."""
    return {"kind": "hang", "seconds": seconds, "then": then}


def stream_error(error_type: str = "overloaded_error") -> Reply:
    """For a streamed request: HTTP 200, message_start, then an ``error`` event."""
    return {"kind": "stream_error", "error_type": error_type}


# --- the server ----------------------------------------------------------------------------


class MockMessagesServer:
    """``with MockMessagesServer(script) as server: ... server.url ... server.requests``."""

    def __init__(self, script: Iterable[ScriptEntry] = (), *, lifetime_s: float = 120.0) -> None:
        self.script: list[ScriptEntry] = list(script)
        self.requests: list[dict[str, Any]] = []
        self.lifetime_s = lifetime_s
        self._lock = threading.Lock()
        self._count = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # lifecycle
    def start(self) -> "MockMessagesServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                server._handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="mock-messages", daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._timer is not None:
            self._timer.cancel()

    def __enter__(self) -> "MockMessagesServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def add(self, *entries: ScriptEntry) -> None:
        with self._lock:
            self.script.extend(entries)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests]

    # one request
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode(errors="replace")}
        with self._lock:
            self.requests.append({"path": h.path, "headers": dict(h.headers), "body": body})
            self._count += 1
            number = self._count
            entry = self.script.pop(0) if self.script else None
        if h.path.split("?")[0] != "/v1/messages":
            return _send_json(h, 404, _error_body("not_found_error", f"no route {h.path}"))
        if entry is None:
            return _send_json(h, 400, _error_body("invalid_request_error", "mock script exhausted"))
        reply = entry(body) if callable(entry) else entry
        if reply["kind"] == "hang":
            import time

            time.sleep(reply["seconds"])
            if reply.get("then") is None:
                return None
            reply = reply["then"]
        if reply["kind"] == "malformed":
            payload = json.dumps(_message(text_reply("cut"), body, number)).encode()[:-20]
            h.send_response(200)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            return None
        if reply["kind"] == "cut_stream":
            return _send_cut_stream(h, _message(text_reply("Change: cut\n```python\n" + "x = 1\n" * 40),
                                                body, number), reply["framing"], reply["after_events"])
        if reply["kind"] == "error":
            headers = {}
            if reply.get("retry_after") is not None:
                headers["retry-after"] = str(reply["retry_after"])
            return _send_json(h, reply["status"], _error_body(reply["error_type"], reply["message"]), headers)
        message = _message(reply, body, number)
        if reply["kind"] == "stream_error":
            return _send_stream(h, message, error_type=reply["error_type"])
        if body.get("stream"):
            return _send_stream(h, message)
        return _send_json(h, 200, message)


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _message(reply: Reply, body: dict[str, Any], number: int) -> dict[str, Any]:
    content = []
    for i, block in enumerate(reply.get("content", [])):
        block = dict(block)
        if block["type"] == "tool_use" and not block.get("id"):
            block["id"] = f"toolu_mock_{number:03d}_{i}"
        content.append(block)
    usage = {
        "input_tokens": len(json.dumps(body)) // 4,
        "output_tokens": 1 + sum(len(json.dumps(b)) for b in content) // 4,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    usage.update(reply.get("usage") or {})
    return {
        "id": f"msg_mock_{number:03d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "mock"),
        "content": content,
        "stop_reason": reply.get("stop_reason", "end_turn"),
        "stop_sequence": None,
        "usage": usage,
    }


def _send_json(h: BaseHTTPRequestHandler, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
    payload = json.dumps(data).encode()
    h.send_response(status)
    h.send_header("content-type", "application/json")
    h.send_header("content-length", str(len(payload)))
    h.send_header("request-id", "req_mock")
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(payload)


def _event(h: BaseHTTPRequestHandler, name: str, data: dict[str, Any]) -> None:
    h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    h.wfile.flush()


def _chunks(text: str, size: int = 40) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _send_stream(h: BaseHTTPRequestHandler, message: dict[str, Any], error_type: str | None = None) -> None:
    h.send_response(200)
    h.send_header("content-type", "text/event-stream")
    h.send_header("cache-control", "no-cache")
    h.send_header("request-id", "req_mock")
    h.end_headers()
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}
    _event(h, "message_start", {"type": "message_start", "message": start})
    if error_type is not None:
        _event(h, "error", {"type": "error", "error": {"type": error_type, "message": error_type}})
        return
    _event(h, "ping", {"type": "ping"})
    for index, block in enumerate(message["content"]):
        if block["type"] == "thinking":
            _event(h, "content_block_start", {"type": "content_block_start", "index": index,
                                              "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            for piece in _chunks(block["thinking"]):
                _event(h, "content_block_delta", {"type": "content_block_delta", "index": index,
                                                  "delta": {"type": "thinking_delta", "thinking": piece}})
            _event(h, "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "signature_delta", "signature": block["signature"]}})
        elif block["type"] == "text":
            _event(h, "content_block_start",
                   {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            for piece in _chunks(block["text"]):
                _event(h, "content_block_delta", {"type": "content_block_delta", "index": index,
                                                  "delta": {"type": "text_delta", "text": piece}})
        elif block["type"] == "tool_use":
            _event(h, "content_block_start", {
                "type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
            })
            for piece in _chunks(json.dumps(block["input"]), 16):
                _event(h, "content_block_delta", {"type": "content_block_delta", "index": index,
                                                  "delta": {"type": "input_json_delta", "partial_json": piece}})
        _event(h, "content_block_stop", {"type": "content_block_stop", "index": index})
    _event(h, "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": usage,
    })
    _event(h, "message_stop", {"type": "message_stop"})


def _send_cut_stream(h: BaseHTTPRequestHandler, message: dict[str, Any], framing: str, after_events: int) -> None:
    """The first ``after_events`` events of a streamed reply, then the connection closes."""
    events = [("message_start", {"type": "message_start", "message": {**message, "content": [],
                                                                          "stop_reason": None}}),
              ("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})]
    for piece in _chunks(message["content"][0]["text"]):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": piece}}))
    data = [f"event: {name}\ndata: {json.dumps(ev)}\n\n".encode() for name, ev in events[:after_events]]
    if framing == "chunked":
        h.protocol_version = "HTTP/1.1"
    h.send_response(200)
    h.send_header("content-type", "text/event-stream")
    if framing == "chunked":
        h.send_header("transfer-encoding", "chunked")
    h.send_header("connection", "close")
    h.end_headers()
    for piece in data:
        if framing == "chunked":
            h.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        else:
            h.wfile.write(piece)
        h.wfile.flush()
    if framing == "chunked":  # half of the next chunk, then nothing
        h.wfile.write(b"400\r\nevent: content_block_delta\n")
        h.wfile.flush()
    h.close_connection = True
