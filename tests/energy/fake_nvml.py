"""A test double of the ``pynvml`` module, driven by a simulated clock.

The simulated device runs queued work asynchronously from the host, as a GPU does, and
integrates its power over simulated time. Its total-energy counter publishes the integral
only at update instants (every ``update_period_s``, offset by ``phase_s``), as the real
counter does, and rounds to whole millijoules.
"""

from __future__ import annotations

import bisect
import math
import time


class SimDevice:
    """A device with an asynchronous queue, as a GPU behind a CUDA stream.

    ``call`` costs the host ``launch_s`` and queues ``call_s`` of device work (the host
    blocks while ``max_queue`` calls are pending); ``sync`` waits for the queue to drain
    and costs ``sync_s``; a counter read costs the host ``read_s`` while queued work goes
    on. The device draws ``busy_power_w`` while it has work and ``idle_power_w`` otherwise.
    """

    def __init__(self, busy_power_w=400.0, idle_power_w=60.0, call_s=0.001,
                 update_period_s=0.1, phase_s=0.037, sync_s=0.0, read_s=0.0,
                 launch_s=5e-6, max_queue=1024):
        self.busy_power_w = busy_power_w
        self.idle_power_w = idle_power_w
        self.call_s = call_s
        self.update_period_s = update_period_s
        self.phase_s = phase_s
        self.sync_s = sync_s
        self.read_s = read_s
        self.launch_s = launch_s
        self.max_queue = max_queue
        self.now = 0.0
        self.calls = 0
        # merged busy intervals of the device, with the busy time before each one
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._busy_before: list[float] = []
        self._completions: list[float] = []  # end time of every queued call, in order
        self._powers: list[tuple[float, float]] = []  # (from time, busy power) changes

    @property
    def gpu_free_at(self) -> float:
        return self._ends[-1] if self._ends else 0.0

    @property
    def power_w(self) -> float:
        return self.busy_power_w if self.gpu_free_at > self.now else self.idle_power_w

    def busy_time_before(self, t: float) -> float:
        i = bisect.bisect_right(self._starts, t) - 1
        if i < 0:
            return 0.0
        return self._busy_before[i] + min(t, self._ends[i]) - self._starts[i]

    def energy_at(self, t: float) -> float:
        """The true energy from 0 to ``t``: idle power all along plus the busy excess."""
        return self.idle_power_w * t + (self.busy_power_w - self.idle_power_w) * self.busy_time_before(t)

    def last_update_time(self) -> float:
        if self.now < self.phase_s:
            return 0.0
        k = math.floor((self.now - self.phase_s) / self.update_period_s)
        return self.phase_s + k * self.update_period_s

    # the callables handed to the measurement
    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def call(self) -> None:
        self.calls += 1
        self.now += self.launch_s
        if len(self._completions) >= self.max_queue:
            oldest_pending = self._completions[-self.max_queue]
            self.now = max(self.now, oldest_pending)
        start = max(self.now, self.gpu_free_at)
        end = start + self.call_s
        if self._ends and start == self._ends[-1]:
            self._ends[-1] = end
        else:
            done = self._busy_before[-1] + self._ends[-1] - self._starts[-1] if self._ends else 0.0
            self._starts.append(start)
            self._ends.append(end)
            self._busy_before.append(done)
        self._completions.append(end)
        if len(self._completions) > 4 * self.max_queue:
            del self._completions[: -self.max_queue]

    def sync(self) -> None:
        self.now = max(self.now, self.gpu_free_at) + self.sync_s

    def host_read(self) -> None:
        self.now += self.read_s

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
        self.device.host_read()
        if self.frozen_counter:
            return 123456
        t = self.device.last_update_time()
        return int(round(self.device.energy_at(t) * 1000.0)) + 5_000_000

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(round(self.device.power_w * 1000.0))


class RealTimeDevice(SimDevice):
    """Constant power over the real ``time.perf_counter`` clock, for the sampler thread:
    the counter publishes ``power * t`` at updates every ``update_period_s``."""

    def __init__(self, power_w=300.0, update_period_s=0.05, call_s=0.001):
        super().__init__(busy_power_w=power_w, idle_power_w=power_w, call_s=call_s,
                         update_period_s=update_period_s, phase_s=0.0)

    @property
    def power_w(self) -> float:
        return self.busy_power_w

    def clock(self) -> float:
        return time.perf_counter()

    def energy_at(self, t: float) -> float:
        return self.busy_power_w * t

    def last_update_time(self) -> float:
        return math.floor(time.perf_counter() / self.update_period_s) * self.update_period_s

    def call(self) -> None:
        self.calls += 1
        time.sleep(self.call_s)

    def sync(self) -> None:
        pass

    def host_read(self) -> None:
        pass

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
