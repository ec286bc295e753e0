"""Fixtures for the LLM generator tests: a scripted Messages server on 127.0.0.1 and the
real anthropic SDK talking to it. The replies are scripted by each test, not written by a
model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from llm_helpers import PROBLEM_SOURCE  # noqa: E402
from mock_messages_server import MockMessagesServer  # noqa: E402

from kernelpro.generate.anthropic_gen import AnthropicGenerator, AnthropicSettings  # noqa: E402
from kernelpro.problem import parse_problem  # noqa: E402


@pytest.fixture
def problem():
    return parse_problem(PROBLEM_SOURCE, name="scaled_relu")


@pytest.fixture
def server():
    with MockMessagesServer(lifetime_s=120) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch):
    """Tests never see a real key or endpoint from the environment."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_generator(server):
    """``make_generator(**settings)``: a generator pointed at the scripted server, with
    millisecond retry delays; ``gen.slept`` lists the delays it waited."""

    def make(**overrides) -> AnthropicGenerator:
        params = {"base_url": server.url, "retry_base_delay_s": 0.001, "retry_max_delay_s": 0.01,
                  "timeout_s": 30.0}
        params.update(overrides)
        slept: list[float] = []
        gen = AnthropicGenerator(AnthropicSettings(**params), sleep=slept.append)
        gen.slept = slept  # type: ignore[attr-defined]
        return gen

    return make
