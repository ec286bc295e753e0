"""The measurement loop against a simulated device and counter (tests/energy/fake_nvml.py)."""

from __future__ import annotations

import pytest

from fake_nvml import FakeNvml, RealTimeDevice, SimDevice
from kernelpro.api import MeasurementError
from kernelpro_plugins_energy import stats
from kernelpro_plugins_energy.measure import EnergyMeasurement, EnergySettings


@pytest.fixture(autouse=True)
def _no_visible_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _meter(device: SimDevice, nvml: FakeNvml | None = None, **settings) -> EnergyMeasurement:
    # the algorithm's tests run at 1.5 s windows stopping at 1 % (the defaults until session
    # 13); the defaults themselves have their own test below
    settings.setdefault("sample_power", False)
    settings.setdefault("window_s", 1.5)
    settings.setdefault("stop_spread", 0.01)
    meter = EnergyMeasurement(EnergySettings(**settings), nvml=nvml or FakeNvml(device),
                              clock=device.clock, sleep=device.sleep)
    assert meter.unavailable_reason("cuda") is None
    return meter


@pytest.mark.parametrize("call_s", [2e-5, 1e-4, 1e-3, 7e-3, 0.05])
@pytest.mark.parametrize("phase_s", [0.0, 0.013, 0.061, 0.099])
def test_energy_per_call_matches_the_simulated_truth(call_s, phase_s):
    device = SimDevice(call_s=call_s, phase_s=phase_s, sync_s=1e-5, read_s=2e-5)
    out = _meter(device).measure(device.call, device.sync)
    # alignment to counter updates: error bounded by one chunk in the window, not by a
    # counter period (a naive before/after read would be off by up to 2 x 0.1 s / 1.5 s)
    assert out["energy_j_per_call"] == pytest.approx(device.true_energy_j_per_call, rel=0.005)
    assert out["power_w"] == pytest.approx(device.busy_power_w, rel=0.005)
    assert out["trials"] == 3  # stable windows: stopped at min_trials
    assert out["trials_max"] == 5 and out["trials_spread"] <= 0.01
    assert out["window_s"] >= 1.5
    assert out["counter_update_hz"] == pytest.approx(10.0, rel=0.05)
    assert out["counter_updates"] >= 15
    assert out["time_per_call_ms"] == pytest.approx(call_s * 1000, rel=0.01)
    assert out["energy_count_resolution"] <= 0.05
    assert out["energy_cv"] < 0.01
    assert "idle_power_w" not in out and "power_w_sampled" not in out


def test_chunks_and_calls_per_trial_follow_the_call_time():
    device = SimDevice(call_s=1e-5)
    out = _meter(device).measure(device.call, device.sync)
    assert out["chunk_calls"] == 100  # 1 ms chunk target / 10 us per call
    assert out["calls_per_trial"] == pytest.approx(out["window_s"] / 1e-5, rel=0.01)


def test_slow_calls_stretch_the_window_to_the_minimum_number_of_calls():
    device = SimDevice(call_s=0.2)
    out = _meter(device, trials=2).measure(device.call, device.sync)
    assert out["calls_per_trial"] >= 20
    assert out["window_s"] >= 4.0
    assert out["energy_j_per_call"] == pytest.approx(device.true_energy_j_per_call, rel=0.05)


def test_idle_power_is_measured_and_subtracted():
    device = SimDevice(call_s=1e-3, busy_power_w=400.0, idle_power_w=60.0)
    out = _meter(device, subtract_idle=True).measure(device.call, device.sync)
    assert out["idle_power_w"] == pytest.approx(60.0, rel=0.01)
    assert out["energy_j_per_call_gross"] == pytest.approx(0.4, rel=0.005)
    assert out["energy_j_per_call"] == pytest.approx((400.0 - 60.0) * 1e-3, rel=0.01)


def test_window_too_short_is_one_line():
    device = SimDevice(call_s=1e-3)
    meter = _meter(device, window_s=0.25, min_counter_updates=5)
    with pytest.raises(MeasurementError) as info:
        meter.measure(device.call, device.sync)
    message = str(info.value)
    assert message.startswith("energy unavailable: window too short: the energy counter changed 3 times in 0.30 s")
    assert message.endswith("(need >= 5); set measurements.energy.window_s >= 0.5")
    assert "\n" not in message


def test_a_counter_that_never_changes_is_reported():
    device = SimDevice(call_s=1e-3)
    meter = _meter(device, nvml=FakeNvml(device, frozen_counter=True))
    with pytest.raises(MeasurementError) as info:
        meter.measure(device.call, device.sync)
    assert str(info.value) == (
        "energy unavailable: the energy counter of NVIDIA H200 did not change in 2 s of work"
    )


def test_nvml_failing_mid_measurement_is_one_line():
    device = SimDevice(call_s=1e-3)
    nvml = FakeNvml(device)
    meter = _meter(device, nvml=nvml)
    real_read = nvml.nvmlDeviceGetTotalEnergyConsumption

    def failing(handle):
        if nvml.reads > 50:
            raise RuntimeError("GPU is lost\nsecond line")
        return real_read(handle)

    nvml.nvmlDeviceGetTotalEnergyConsumption = failing
    with pytest.raises(MeasurementError) as info:
        meter.measure(device.call, device.sync)
    assert str(info.value) == "energy measurement failed: RuntimeError: GPU is lost"


def test_the_same_meter_measures_reference_then_candidate():
    device = SimDevice(call_s=1e-3, busy_power_w=400.0)
    meter = _meter(device, trials=3)
    ref = meter.measure(device.call, device.sync)
    device.busy_power_w = 300.0  # the "candidate": same time, less power
    cand = meter.measure(device.call, device.sync)
    assert ref["energy_j_per_call"] == pytest.approx(0.4, rel=0.005)
    assert cand["energy_j_per_call"] == pytest.approx(0.3, rel=0.005)


def test_power_samples_cross_check_the_counter():
    """Real clock: the sampler thread runs while calls sleep 1 ms each."""
    device = RealTimeDevice(power_w=300.0, update_period_s=0.05)
    device.call_s = 0.001
    nvml = FakeNvml(device)
    meter = EnergyMeasurement(
        EnergySettings(window_s=0.3, trials=2, min_counter_updates=3, warmup_s=0.05,
                       sample_interval_s=0.005),
        nvml=nvml, clock=device.clock, sleep=device.sleep,
    )
    assert meter.unavailable_reason("cuda") is None
    out = meter.measure(device.call, device.sync)
    assert out["power_w"] == pytest.approx(300.0, rel=0.02)
    assert out["power_w_sampled"] == pytest.approx(300.0, rel=1e-6)
    assert out["power_samples"] >= 10
    assert out["power_sampled_ratio"] == pytest.approx(1.0, rel=0.02)
    assert out["power_sampled_instant"] == 0.0  # the fake has no field values: the average is used


@pytest.mark.parametrize("field,value", [("window_s", 0.0), ("trials", 0), ("min_counter_updates", 0)])
def test_settings_are_validated(field, value):
    with pytest.raises(ValueError, match=f"energy.{field} must be"):
        EnergySettings(**{field: value})


def test_settings_structure_through_core_config():
    from kernelpro.config import ConfigError, structure

    settings = structure({"window_s": 2.0, "trials": 3, "subtract_idle": True}, EnergySettings, "measurement_params.energy")
    assert settings == EnergySettings(window_s=2.0, trials=3, subtract_idle=True)
    with pytest.raises(ConfigError):
        structure({"window_s": -1.0}, EnergySettings, "measurement_params.energy")


def test_stats():
    values = [1.0, 2.0, 4.0, 8.0, 16.0]
    assert stats.percentile(values, 25) == 2.0
    assert stats.percentile(values, 90) == pytest.approx(8.0 + 0.6 * 8.0)
    assert stats.iqr(values) == 6.0
    assert stats.median(values) == 4.0
    assert stats.cv([2.0, 2.0]) == 0.0
    assert stats.cv([1.0, 3.0]) == pytest.approx(2 ** 0.5 / 2)
    assert stats.spread(values) == pytest.approx(15.0 / 4.0)
    assert stats.spread([0.0, 0.0, 1.0]) == float("inf")  # a median of 0: nothing agrees
    energy, seconds = stats.integrate_power_w([(0.0, 100.0), (1.0, 300.0), (3.0, 300.0)])
    assert (energy, seconds) == (200.0 + 600.0, 3.0)
    assert stats.integrate_power_w([(0.0, 1.0)]) is None


@pytest.mark.parametrize("call_s", [2e-5, 1e-3])
def test_slow_counter_reads_lengthen_chunks_and_keep_accuracy(call_s):
    """Some drivers take milliseconds per energy read: chunks grow to 4 reads' worth."""
    device = SimDevice(call_s=call_s, sync_s=1e-5, read_s=2.4e-3, idle_power_w=60.0)
    out = _meter(device).measure(device.call, device.sync)
    assert out["counter_read_ms"] == pytest.approx(2.4)
    assert out["chunk_calls"] == pytest.approx(4 * 2.4e-3 / call_s, rel=0.1)
    assert out["batch_calls"] == pytest.approx(0.02 / call_s, rel=0.1)
    assert out["energy_j_per_call"] == pytest.approx(device.true_energy_j_per_call, rel=0.01)
    assert out["counter_updates"] >= 15  # polls every 24 ms still see every 100 ms update


def test_a_deep_device_queue_does_not_stretch_the_window():
    """The host may queue many calls ahead (1024 x 1 ms here): batches keep it ~20 ms ahead,
    so the window ends on time and every counter update in it is seen."""
    device = SimDevice(call_s=1e-3, max_queue=1024)
    out = _meter(device).measure(device.call, device.sync)
    assert out["window_s"] == pytest.approx(1.55, abs=0.06)
    assert out["counter_updates"] >= 15
    assert out["counter_update_hz"] == pytest.approx(10.0, rel=0.05)
    assert out["batch_calls"] == 20


class DriftingDevice(SimDevice):
    """Each call takes 3 % longer per simulated second: energy per call drifts between
    windows, as on a GPU that heats up and clocks down."""

    def call(self) -> None:
        base = self.call_s
        self.call_s = base * (1 + 0.03 * self.now)
        try:
            super().call()
        finally:
            self.call_s = base


def test_windows_that_disagree_are_all_taken_and_agreeing_ones_stop_early():
    steady = SimDevice(call_s=1e-3)
    out = _meter(steady).measure(steady.call, steady.sync)
    assert out["trials"] == 3 and out["trials_spread"] <= 0.01
    drifting = DriftingDevice(call_s=1e-3)
    out = _meter(drifting).measure(drifting.call, drifting.sync)
    assert out["trials"] == 5 and out["trials_spread"] > 0.01
    # stop_spread 0: every window, as before
    steady = SimDevice(call_s=1e-3)
    assert _meter(steady, stop_spread=0.0).measure(steady.call, steady.sync)["trials"] == 5


@pytest.mark.parametrize("call_s", [1e-4, 1e-3, 7e-3])
@pytest.mark.parametrize("phase_s", [0.0, 0.061])
def test_the_default_short_windows_still_recover_the_simulated_truth(call_s, phase_s):
    """The defaults (0.75 s windows, stop at 2 %; chosen on the H200, energy.md "Shorter
    windows"): aligned to the counter's updates, each window still holds ~7 of them and the
    energy per call is the truth within half a percent, in about half the seconds."""
    assert (EnergySettings().window_s, EnergySettings().stop_spread) == (0.75, 0.02)
    device = SimDevice(call_s=call_s, phase_s=phase_s, sync_s=1e-5, read_s=2e-5)
    meter = EnergyMeasurement(EnergySettings(sample_power=False), nvml=FakeNvml(device),
                              clock=device.clock, sleep=device.sleep)
    out = meter.measure(device.call, device.sync)
    assert out["energy_j_per_call"] == pytest.approx(device.true_energy_j_per_call, rel=0.005)
    assert out["trials"] == 3 and 0.75 <= out["window_s"] < 1.0
    assert out["counter_updates"] >= 7
    slow_device = SimDevice(call_s=call_s, phase_s=phase_s, sync_s=1e-5, read_s=2e-5)
    slow = _meter(slow_device).measure(slow_device.call, slow_device.sync)  # 1.5 s, stop at 1 %
    assert slow["energy_j_per_call"] == pytest.approx(out["energy_j_per_call"], rel=0.005)
    assert out["measure_s"] < 0.7 * slow["measure_s"]


# --- the reference beside a candidate: earlier windows pooled ---------------------------


def _earlier(values: dict, age_s: float):
    from kernelpro.api import EarlierMeasurement

    return EarlierMeasurement(values=values, age_s=age_s)


def test_a_reference_measured_before_gets_one_fresh_window_pooled_with_the_earlier_ones():
    device = SimDevice(call_s=1e-3, busy_power_w=400.0)
    meter = _meter(device)
    first = meter.measure_reference(device.call, device.sync, [])
    assert first["pooled_windows"] == 0 and first["trials"] == 3
    assert [first[f"window_{i}_j_per_call"] for i in (1, 2, 3)] == pytest.approx([0.4] * 3, rel=0.005)
    second = meter.measure_reference(device.call, device.sync, [_earlier(first, 12.0)])
    assert second["trials"] == 1 and second["pooled_windows"] == 2 and second["pooled_age_s"] == 12.0
    assert second["energy_j_per_call"] == pytest.approx(0.4, rel=0.005)
    assert "window_2_j_per_call" not in second  # only its own windows, for the next one to pool
    # one window instead of three: well under half the time of the full measurement
    assert second["measure_s"] < 0.6 * first["measure_s"]


def test_a_pool_that_disagrees_is_dropped_and_the_reference_measured_in_full():
    device = SimDevice(call_s=1e-3, busy_power_w=400.0)
    meter = _meter(device)
    first = meter.measure(device.call, device.sync)
    device.busy_power_w = 412.0  # the GPU warmed up: 3 % more power at the same speed
    second = meter.measure_reference(device.call, device.sync, [_earlier(first, 30.0)])
    assert second["pooled_windows"] == 0 and second["trials"] == 3
    assert second["energy_j_per_call"] == pytest.approx(0.412, rel=0.005)


@pytest.mark.parametrize("setting, age_s", [({}, 121.0), ({"reference_windows": 0}, 5.0),
                                            ({"stop_spread": 0.0}, 5.0), ({"subtract_idle": True}, 5.0)])
def test_earlier_windows_are_not_pooled_when_too_old_turned_off_or_of_another_kind(setting, age_s):
    device = SimDevice(call_s=1e-3, busy_power_w=400.0)
    first = _meter(device).measure(device.call, device.sync)  # no idle subtraction
    meter = _meter(device, trials=3, **setting)
    second = meter.measure_reference(device.call, device.sync, [_earlier(first, age_s)])
    assert second["pooled_windows"] == 0 and second["trials"] == 3


def test_the_pool_takes_the_newest_windows_first_and_reports_the_oldest_age():
    device = SimDevice(call_s=1e-3, busy_power_w=400.0)
    meter = _meter(device)
    old = meter.measure(device.call, device.sync)
    device.busy_power_w = 404.0
    recent = meter.measure_reference(device.call, device.sync, [])
    older_windows = {**old, **{f"window_{i}_j_per_call": 9.9 for i in (1, 2, 3)}}  # would never agree
    out = meter.measure_reference(device.call, device.sync, [_earlier(older_windows, 60.0), _earlier(recent, 20.0)])
    assert out["pooled_windows"] == 2 and out["pooled_age_s"] == 20.0
    assert out["energy_j_per_call"] == pytest.approx(0.404, rel=0.005)


@pytest.mark.parametrize("value", [-1, 4])
def test_reference_windows_beyond_a_full_measurement_is_a_config_error(value):
    with pytest.raises(ValueError, match=r"energy.reference_windows must be between 0 and min_trials \(3\)"):
        EnergySettings(reference_windows=value)
    # 0 or min_trials: the reference in full; with one window per measurement the default fits
    assert EnergySettings(reference_windows=3).reference_windows == 3
    assert EnergySettings(min_trials=1).reference_windows == 1
