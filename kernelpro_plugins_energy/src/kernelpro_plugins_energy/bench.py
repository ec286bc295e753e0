"""Benchmarks of the energy measurement on a real GPU (used by ``benchmarks/energy_fidelity.py``
and ``tools/capture/energy/gpu_capture.py``).

* :func:`time_call_ms`: CUDA-event time of back-to-back calls (median, IQR).
* :func:`fidelity`: one kernel measured several times with :class:`EnergyMeasurement`:
  the spread of joules per call between measurements.
* :func:`counter_behaviour`: how often the total-energy counter changes, idle and busy.

Nothing here changes clocks, power limits or modes.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from kernelpro_plugins_energy import stats
from kernelpro_plugins_energy.measure import EnergyMeasurement, EnergySettings


def time_call_ms(call: Callable[[], Any], reps: int = 100, warmup: int = 10) -> dict[str, float]:
    """Per-call device time in ms from CUDA events around each of ``reps`` back-to-back calls."""
    import torch

    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return {
        "median_ms": stats.median(times),
        "iqr_ms": stats.iqr(times),
        "min_ms": min(times),
        "max_ms": max(times),
        "cv": stats.cv(times),
        "n": float(reps),
    }


def run_for(call: Callable[[], Any], seconds: float) -> int:
    """Run ``call`` back to back for ``seconds`` (e.g. to bring the GPU to a steady
    temperature); returns the number of calls."""
    import torch

    end = time.perf_counter() + seconds
    calls = 0
    while time.perf_counter() < end:
        call()
        calls += 1
        if calls % 16 == 0:
            torch.cuda.synchronize()  # keep the queue short so the loop ends on time
    torch.cuda.synchronize()
    return calls


def cuda_sync() -> None:
    import torch

    torch.cuda.synchronize()


def measure_energy(
    call: Callable[[], Any], device: str = "cuda", settings: EnergySettings | None = None
) -> dict[str, float]:
    """One :class:`EnergyMeasurement` of ``call`` on ``device`` (raises MeasurementError)."""
    from kernelpro.api import MeasurementError

    meter = EnergyMeasurement(settings)
    try:
        reason = meter.unavailable_reason(device)
        if reason is not None:
            raise MeasurementError(reason)
        return meter.measure(call, cuda_sync)
    finally:
        meter.close()


def bf16_matmul_call(size: int = 8192, device: str = "cuda") -> Callable[[], Any]:
    """A bf16 ``size``^3 matmul with fixed inputs (about 1.5 ms on an H200 at 8192)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=gen)
    out = torch.empty(size, size, device=device, dtype=torch.bfloat16)

    def call() -> None:
        torch.matmul(a, b, out=out)

    return call


def fidelity(
    call: Callable[[], Any],
    repeats: int = 5,
    device: str = "cuda",
    settings: EnergySettings | None = None,
    snapshot: Callable[[], dict[str, float]] | None = None,
    report: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, Any]:
    """Measure ``call`` ``repeats`` times with the same settings; the spread of the medians.

    ``spread`` is (max - min) / median of the per-measurement joules per call; ``cv`` is
    their standard deviation over their mean. ``snapshot`` (e.g. temperature and clocks)
    is recorded before each measurement and after the last; ``report(i, numbers)`` is
    called after measurement ``i`` (from 1).
    """
    runs = []
    states = []
    started = time.time()
    for _ in range(repeats):
        if snapshot is not None:
            states.append(snapshot())
        runs.append(measure_energy(call, device, settings))
        if report is not None:
            report(len(runs), runs[-1])
    if snapshot is not None:
        states.append(snapshot())
    values = [r["energy_j_per_call"] for r in runs]
    mid = stats.median(values)
    return {
        "measurements": runs,
        "energy_j_per_call": values,
        "median_j_per_call": mid,
        "spread": stats.spread(values),
        "cv": stats.cv(values),
        "wall_s": time.time() - started,
        "states": states,
    }


def counter_behaviour(
    read_mj: Callable[[], int],
    seconds: float,
    busy_call: Callable[[], Any] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Poll the counter for ``seconds`` (idle, or while ``busy_call`` runs back to back)
    and report when it changed: updates per second and the interval between updates."""
    change_times: list[float] = []
    change_values: list[int] = []
    start = clock()
    last = read_mj()
    first_mj = last
    while True:
        if busy_call is not None:
            busy_call()
        else:
            time.sleep(0.0005)
        value = read_mj()
        now = clock()
        if value != last:
            change_times.append(now)
            change_values.append(value)
            last = value
        if now - start >= seconds:
            break
    if busy_call is not None:
        cuda_sync()
    elapsed = clock() - start
    intervals = [b - a for a, b in zip(change_times, change_times[1:])]
    out = {
        "seconds": elapsed,
        "updates": float(len(change_times)),
        "updates_per_s": len(change_times) / elapsed,
        "energy_j": (last - first_mj) / 1000.0,
    }
    if intervals:
        out.update(
            interval_median_ms=stats.median(intervals) * 1000.0,
            interval_min_ms=min(intervals) * 1000.0,
            interval_max_ms=max(intervals) * 1000.0,
        )
    if len(change_times) >= 2:
        # energy between the first and the last update seen, over the time between them
        out["power_w_between_updates"] = (
            (change_values[-1] - change_values[0]) / 1000.0 / (change_times[-1] - change_times[0])
        )
    return out
