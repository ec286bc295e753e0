"""A test double of the ``pynvml`` module, driven by a simulated clock.

The simulated device integrates power over simulated time. Its total-energy counter
publishes the integral only at update instants (every ``update_period_s``, offset by
``phase_s``), as the real counter does, and rounds to whole millijoules. ``call`` and
``sleep`` advance the clock at busy or idle power.
"""

from __future__ import annotations

import bisect
import math


class SimDevice:
    def __init__(self, busy_power_w=400.0, idle_power_w=60.0, call_s=0.001,
                 update_period_s=0.1, phase_s=0.037, sync_s=0.0, read_s=0.0):
        self.busy_power_w = busy_power_w
        self.idle_power_w = idle_power_w
        self.call_s = call_s
        self.update_period_s = update_period_s
        self.phase_s = phase_s
        self.sync_s = sync_s
        self.read_s = read_s
        self.now = 0.0
        self._times = [0.0]
        self._energy_j = [0.0]
        self.calls = 0
        self.power_w = idle_power_w

    def advance(self, seconds: float, power_w: float) -> None:
        self.power_w = power_w
        self._energy_j.append(self._energy_j[-1] + seconds * power_w)
        self.now += seconds
        self._times.append(self.now)

    def energy_at(self, t: float) -> float:
        """The true integral of power from 0 to ``t`` (linear between breakpoints)."""
        i = bisect.bisect_right(self._times, t) - 1
        if i >= len(self._times) - 1:
            return self._energy_j[-1]
        t_a, t_b = self._times[i], self._times[i + 1]
        e_a, e_b = self._energy_j[i], self._energy_j[i + 1]
        return e_a + (e_b - e_a) * (t - t_a) / (t_b - t_a)

    def last_update_time(self) -> float:
        if self.now < self.phase_s:
            return 0.0
        k = math.floor((self.now - self.phase_s) / self.update_period_s)
        return self.phase_s + k * self.update_period_s

    # the callables handed to the measurement
    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds, self.idle_power_w)

    def call(self) -> None:
        self.calls += 1
        self.advance(self.call_s, self.busy_power_w)

    def sync(self) -> None:
        if self.sync_s:
            self.advance(self.sync_s, self.idle_power_w)

    @property
    def true_energy_j_per_call(self) -> float:
        return self.busy_power_w * self.call_s


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNvml:
    """The subset of pynvml the energy plugin uses."""

    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_NOT_FOUND = 6
    NVMLError = FakeNVMLError

    def __init__(self, device: SimDevice, *, init_error: int | None = None,
                 energy_supported: bool = True, frozen_counter: bool = False,
                 name: str = "NVIDIA H200") -> None:
        self.device = device
        self.init_error = init_error
        self.energy_supported = energy_supported
        self.frozen_counter = frozen_counter
        self.name = name
        self.init_count = 0
        self.reads = 0

    def nvmlInit(self):
        if self.init_error is not None:
            raise FakeNVMLError(self.init_error)
        self.init_count += 1

    def nvmlShutdown(self):
        self.init_count -= 1

    def nvmlDeviceGetHandleByIndex(self, index):
        if index != 0:
            raise FakeNVMLError(self.NVML_ERROR_NOT_FOUND)
        return "handle0"

    def nvmlDeviceGetHandleByUUID(self, uuid):
        raise FakeNVMLError(self.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetHandleByPciBusId(self, bus_id):
        raise FakeNVMLError(self.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetName(self, handle):
        return self.name

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.energy_supported:
            raise FakeNVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        self.reads += 1
        if self.device.read_s:
            self.device.advance(self.device.read_s, self.device.power_w)
        if self.frozen_counter:
            return 123456
        t = self.device.last_update_time()
        return int(round(self.device.energy_at(t) * 1000.0)) + 5_000_000

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(round(self.device.power_w * 1000.0))


class RealTimeDevice(SimDevice):
    """Constant power over the real ``time.perf_counter`` clock, for the sampler thread:
    the counter publishes ``power_w * t`` at updates every ``update_period_s``."""

    def __init__(self, power_w=300.0, update_period_s=0.05):
        super().__init__(busy_power_w=power_w, idle_power_w=power_w, update_period_s=update_period_s,
                         phase_s=0.0)
        self.power_w = power_w

    def clock(self) -> float:
        import time

        return time.perf_counter()

    def energy_at(self, t: float) -> float:
        return self.power_w * t

    def last_update_time(self) -> float:
        import time

        now = time.perf_counter()
        return math.floor(now / self.update_period_s) * self.update_period_s

    def call(self) -> None:
        import time

        self.calls += 1
        time.sleep(self.call_s)

    def sleep(self, seconds: float) -> None:
        import time

        time.sleep(seconds)
