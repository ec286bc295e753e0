"""Built-in reward: log-speedup behind a correctness wall.

score = clamp(ln(baseline_ms / runtime_ms), -cap, +cap) for a correct candidate, and
exactly ``floor`` (-10) for anything else. With ``cap`` < 10 every correct candidate,
however slow, scores above every incorrect one.
"""

from __future__ import annotations

import math

import attrs

from kernelpro.api import Reward, RewardContext
from kernelpro.hookspecs import hookimpl
from kernelpro.records import EvalResult


@attrs.frozen
class LogSpeedupSettings:
    cap: float = attrs.field(default=9.0)

    @cap.validator
    def _check(self, _attr, value):
        if not 0 < value < 10:
            raise ValueError(f"cap: expected a value in (0, 10), got {value}")


class LogSpeedup(Reward):
    name = "log_speedup"
    description = "ln(speedup over the eager reference) for correct candidates; a fixed floor otherwise"
    Settings = LogSpeedupSettings

    def score(self, result: EvalResult, context: RewardContext) -> float:
        if not result.correct or result.timing is None:
            return self.floor
        # the reference timed in the same process, interleaved with the candidate, first
        base = result.baseline_ms if result.baseline_ms is not None else context.baseline_ms
        if not base or result.timing.median_ms <= 0:
            return self.floor
        value = math.log(base / result.timing.median_ms)
        return max(-self.settings.cap, min(self.settings.cap, value))


@hookimpl
def kernelpro_register_rewards(register):
    register(LogSpeedup)
