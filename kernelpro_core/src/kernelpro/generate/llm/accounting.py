"""Token and cost accounting, and the run budget of an LLM generator.

Prices are US dollars per million tokens. A call's cost is
``input * p_in + output * p_out + cache_write * p_cw + cache_read * p_cr`` (tokens / 1e6),
the four counts as the Messages API reports them in ``usage``: ``input_tokens`` excludes
the tokens written to or read from the prompt cache.

The :class:`Ledger` keeps the run's totals and enforces the budget: before a call it
refuses one that would exceed a limit (calls exactly; input tokens on an estimate; output
tokens and dollars by lowering ``max_tokens`` to what is left, refusing only when less than
a useful answer is left), and once the totals reach a limit every later call is refused.
"""

from __future__ import annotations

import threading

import attrs

from kernelpro.api import GenerationBudgetExhausted

#: Characters per token used to estimate a request's input tokens before sending it.
#: A rough average for English prose and code with Claude tokenizers; only the budget's
#: pre-check uses it, the totals use the counts the API returns.
CHARS_PER_TOKEN = 4.0


@attrs.frozen
class Prices:
    """US dollars per million tokens."""

    input_per_mtok: float
    output_per_mtok: float
    cache_write_per_mtok: float  # 5-minute cache writes
    cache_read_per_mtok: float


#: List prices from Anthropic's pricing page (platform.claude.com/docs/en/about-claude/pricing,
#: read 2026-11). Models not listed here need prices in config for dollar accounting.
KNOWN_PRICES: dict[str, Prices] = {
    "claude-sonnet-4-6": Prices(3.0, 15.0, 3.75, 0.30),
    "claude-haiku-4-5": Prices(1.0, 5.0, 1.25, 0.10),
    "claude-haiku-4-5-20251001": Prices(1.0, 5.0, 1.25, 0.10),
    "claude-opus-4-5": Prices(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-5-20251101": Prices(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-6": Prices(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-7": Prices(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-8": Prices(5.0, 25.0, 6.25, 0.50),
    "claude-opus-5": Prices(5.0, 25.0, 6.25, 0.50),
}


def resolve_prices(
    model: str,
    input_per_mtok: float | None,
    output_per_mtok: float | None,
    cache_write_per_mtok: float | None,
    cache_read_per_mtok: float | None,
) -> Prices | None:
    """The model's list prices with each configured price taking precedence; None when the
    model is not in :data:`KNOWN_PRICES` and the config does not give all four."""
    given = (input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_read_per_mtok)
    known = KNOWN_PRICES.get(model)
    if known is None:
        if any(p is None for p in given):
            return None
        return Prices(*given)  # type: ignore[arg-type]
    return Prices(*(g if g is not None else k for g, k in zip(given, attrs.astuple(known))))


@attrs.define
class Usage:
    """Counts of one call, one draft or one run. ``dollars`` is None when unpriced."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    calls: int = 0
    tool_calls: int = 0
    dollars: float | None = 0.0

    @property
    def all_input_tokens(self) -> int:
        """Every input token the model read: uncached, written to and read from the cache."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def add(self, other: "Usage") -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_creation_input_tokens += other.cache_creation_input_tokens
        self.cache_read_input_tokens += other.cache_read_input_tokens
        self.calls += other.calls
        self.tool_calls += other.tool_calls
        if self.dollars is None or other.dollars is None:
            self.dollars = None
        else:
            self.dollars += other.dollars

    def as_dict(self) -> dict[str, float]:
        out: dict[str, float] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "calls": self.calls,
            "tool_calls": self.tool_calls,
        }
        if self.dollars is not None:
            out["dollars"] = round(self.dollars, 6)
        return out


def call_usage(api_usage: object, prices: Prices | None) -> Usage:
    """A :class:`Usage` of one call from the SDK's ``message.usage`` object."""

    def count(name: str) -> int:
        return int(getattr(api_usage, name, None) or 0)

    usage = Usage(
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        cache_creation_input_tokens=count("cache_creation_input_tokens"),
        cache_read_input_tokens=count("cache_read_input_tokens"),
        calls=1,
    )
    usage.dollars = cost_dollars(usage, prices)
    return usage


def cost_dollars(usage: Usage, prices: Prices | None) -> float | None:
    if prices is None:
        return None
    return (
        usage.input_tokens * prices.input_per_mtok
        + usage.output_tokens * prices.output_per_mtok
        + usage.cache_creation_input_tokens * prices.cache_write_per_mtok
        + usage.cache_read_input_tokens * prices.cache_read_per_mtok
    ) / 1e6


@attrs.frozen
class Budget:
    """Limits of one run; 0 means unlimited. Input tokens count every input token read
    (uncached, cache writes and cache reads)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0


class Ledger:
    """Run totals and the budget check; safe to share between threads."""

    def __init__(self, budget: Budget, prices: Prices | None) -> None:
        if budget.dollars and prices is None:
            raise ValueError(
                "generator.params.budget_dollars needs prices for this model: set "
                "price_input_per_mtok, price_output_per_mtok, price_cache_write_per_mtok "
                "and price_cache_read_per_mtok"
            )
        self.budget = budget
        self.prices = prices
        self.total = Usage(dollars=0.0 if prices else None)
        self.stopped_because: str | None = None
        self._lock = threading.Lock()

    def reserve(self, estimated_input_tokens: int, max_tokens: int, min_output_tokens: int) -> int:
        """Check that a call fits the budget; return the ``max_tokens`` it may use.

        Raises :class:`GenerationBudgetExhausted` (and remembers why) when the totals
        already reached a limit, when one more call would exceed the call limit, when the
        estimated input would exceed the input limit, or when less than
        ``min_output_tokens`` output tokens are left by the output-token limit or by the
        dollars left after the estimated input (priced at the dearer of the input and
        cache-write prices). Otherwise ``max_tokens`` is lowered to what both allow.
        """
        with self._lock:
            reason = self.stopped_because or self._crossed()
            b, t = self.budget, self.total
            if reason is None and b.calls and t.calls + 1 > b.calls:
                reason = f"LLM call budget spent ({t.calls} of {b.calls} calls)"
            if reason is None and b.input_tokens and (
                t.all_input_tokens + estimated_input_tokens > b.input_tokens
            ):
                reason = (
                    f"LLM input-token budget spent ({t.all_input_tokens} used, next call needs "
                    f"about {estimated_input_tokens} of {b.input_tokens})"
                )
            allowed = max_tokens
            if reason is None and b.output_tokens:
                allowed = min(max_tokens, b.output_tokens - t.output_tokens)
                if allowed < min_output_tokens:
                    reason = (
                        f"LLM output-token budget spent ({t.output_tokens} of {b.output_tokens} used)"
                    )
            if reason is None and b.dollars and self.prices is not None and t.dollars is not None:
                p = self.prices
                input_cost = estimated_input_tokens * max(p.input_per_mtok, p.cache_write_per_mtok) / 1e6
                left = b.dollars - t.dollars - input_cost
                affordable = int(left * 1e6 / p.output_per_mtok) if p.output_per_mtok > 0 else allowed
                if affordable < min_output_tokens:
                    least = input_cost + min_output_tokens * p.output_per_mtok / 1e6
                    reason = (
                        f"LLM dollar budget spent (${t.dollars:.4f} used, next call needs at least "
                        f"${least:.4f} for its input and {min_output_tokens} output tokens, budget "
                        f"${b.dollars:.2f})"
                    )
                else:
                    allowed = min(allowed, affordable)
            if reason is not None:
                self.stopped_because = reason
                raise GenerationBudgetExhausted(reason)
            return allowed

    def record(self, usage: Usage) -> None:
        """Add a finished call's usage to the run totals."""
        with self._lock:
            self.total.add(usage)

    def _crossed(self) -> str | None:
        b, t = self.budget, self.total
        if b.calls and t.calls >= b.calls:
            return f"LLM call budget spent ({t.calls} of {b.calls} calls)"
        if b.input_tokens and t.all_input_tokens >= b.input_tokens:
            return f"LLM input-token budget spent ({t.all_input_tokens} of {b.input_tokens})"
        if b.output_tokens and t.output_tokens >= b.output_tokens:
            return f"LLM output-token budget spent ({t.output_tokens} of {b.output_tokens})"
        if b.dollars and t.dollars is not None and t.dollars >= b.dollars:
            return f"LLM dollar budget spent (${t.dollars:.4f} of ${b.dollars:.2f})"
        return None


def estimate_tokens(text_chars: int) -> int:
    return int(text_chars / CHARS_PER_TOKEN) + 1
