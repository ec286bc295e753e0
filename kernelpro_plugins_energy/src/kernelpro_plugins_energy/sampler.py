"""Background sampling of board power through NVML, the cross-check of the energy counter.

The thread reads the instantaneous power field (``NVML_FI_DEV_POWER_INSTANT``) when the
driver offers it, else ``nvmlDeviceGetPowerUsage`` (on Ampere and newer, except GA100,
that one is a 1 s moving average, per the NVML documentation). NVML calls go through
ctypes, which releases the GIL, so the thread barely delays the launching thread.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


def read_power_w(nvml: Any, handle: Any, use_instant: bool) -> float:
    """Board power in watts. ``use_instant`` asks for the instantaneous field first."""
    if use_instant:
        field = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is not None and hasattr(nvml, "nvmlDeviceGetFieldValues"):
            value = nvml.nvmlDeviceGetFieldValues(handle, [field])[0]
            if int(getattr(value, "nvmlReturn", 0)) == 0:
                return _field_number(value) / 1000.0  # the field is in milliwatts
    return nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0  # milliwatts


def _field_number(value: Any) -> float:
    kind = int(getattr(value, "valueType", 1))
    union = value.value
    names = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    return float(getattr(union, names.get(kind, "uiVal")))


class PowerSampler:
    """Samples power every ``interval_s`` into ``samples`` as ``(clock(), watts)``."""

    def __init__(
        self, nvml: Any, handle: Any, interval_s: float, clock: Callable[[], float]
    ) -> None:
        self.nvml = nvml
        self.handle = handle
        self.interval_s = interval_s
        self.clock = clock
        self.samples: list[tuple[float, float]] = []
        self.source = "instant"
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._use_instant = True

    def _probe(self) -> None:
        """Pick the power source once, before the thread starts."""
        try:
            read_power_w(self.nvml, self.handle, True)
            field_ok = self._instant_available()
        except Exception:
            field_ok = False
        self._use_instant = field_ok
        self.source = "instant" if field_ok else "average"

    def _instant_available(self) -> bool:
        field = getattr(self.nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is None or not hasattr(self.nvml, "nvmlDeviceGetFieldValues"):
            return False
        value = self.nvml.nvmlDeviceGetFieldValues(self.handle, [field])[0]
        return int(getattr(value, "nvmlReturn", 0)) == 0

    def start(self) -> None:
        self._probe()
        self._thread = threading.Thread(target=self._run, name="kernelpro-energy-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                watts = read_power_w(self.nvml, self.handle, self._use_instant)
            except Exception as exc:  # keep the first error, stop sampling
                self.error = str(exc) or type(exc).__name__
                return
            self.samples.append((self.clock(), watts))
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def window(self, start_s: float, end_s: float) -> list[tuple[float, float]]:
        """The samples taken between ``start_s`` and ``end_s`` (clock seconds)."""
        return [s for s in self.samples if start_s <= s[0] <= end_s]
