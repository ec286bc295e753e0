"""Opening NVML: every bad condition is one line, and the right device is picked."""

from __future__ import annotations

import sys

import pytest

from fake_nvml import FakeNvml, SimDevice
from kernelpro.api import MeasurementError
from kernelpro_plugins_energy.measure import EnergyMeasurement
from kernelpro_plugins_energy.nvml_access import (
    DeviceIdentity,
    find_handle,
    open_counter,
    parse_device_index,
    torch_identity,
)


def _driver_present() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return False
    pynvml.nvmlShutdown()
    return True


NO_LIBRARY = (
    "energy unavailable: the NVML library (libnvidia-ml.so.1) was not found: no NVIDIA driver on this machine"
)


@pytest.mark.skipif(_driver_present(), reason="an NVIDIA driver is present here")
def test_no_nvml_library_gives_one_line_and_measure_raises_it():
    meter = EnergyMeasurement()
    assert meter.unavailable_reason("cuda") == NO_LIBRARY
    with pytest.raises(MeasurementError) as info:
        meter.measure(lambda: None, lambda: None)
    assert str(info.value) == NO_LIBRARY
    assert "\n" not in str(info.value)


def test_cpu_device_is_refused():
    reason = EnergyMeasurement().unavailable_reason("cpu")
    assert reason == "energy unavailable: energy is measured on CUDA devices only, not 'cpu'"


def test_missing_nvidia_ml_py(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    assert EnergyMeasurement().unavailable_reason("cuda") == (
        "energy unavailable: nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    )


def test_gpu_without_energy_counter():
    nvml = FakeNvml(SimDevice(), energy_supported=False, name="Tesla P100")
    reason = EnergyMeasurement(nvml=nvml).unavailable_reason("cuda:0")
    assert reason == (
        "energy unavailable: Tesla P100 has no total-energy counter "
        "(nvmlDeviceGetTotalEnergyConsumption: NVML_ERROR_NOT_SUPPORTED; it needs Volta or newer)"
    )
    assert nvml.init_count == 0  # NVML was shut down again


def test_driver_not_loaded():
    nvml = FakeNvml(SimDevice(), init_error=FakeNvml.NVML_ERROR_DRIVER_NOT_LOADED)
    assert EnergyMeasurement(nvml=nvml).unavailable_reason("cuda") == (
        "energy unavailable: NVML reports that the NVIDIA driver is not loaded"
    )


def test_no_matching_device(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    nvml = FakeNvml(SimDevice())
    reason = EnergyMeasurement(nvml=nvml).unavailable_reason("cuda")
    assert reason.startswith("energy unavailable: no NVML device matches CUDA device 0 (index 7:")
    assert "\n" not in reason
    assert nvml.init_count == 0


def test_available_with_fake(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml = FakeNvml(SimDevice())
    meter = EnergyMeasurement(nvml=nvml)
    assert meter.unavailable_reason("cuda:0") is None
    assert nvml.init_count == 1
    meter.close()
    assert nvml.init_count == 0


def test_parse_device_index():
    assert parse_device_index("cuda") is None
    assert parse_device_index("cuda:3") == 3
    assert parse_device_index("cuda:x") is None


def test_visible_devices_map_torch_index_to_physical():
    ident = torch_identity("cuda:1", env={"CUDA_VISIBLE_DEVICES": "3,5"})
    assert ident == DeviceIdentity(index=1, uuid=None, pci_bus_id=None, physical_index=5)
    ident = torch_identity("cuda:0", env={"CUDA_VISIBLE_DEVICES": "GPU-abc,GPU-def"})
    assert ident.uuid == "GPU-abc" and ident.physical_index is None
    assert torch_identity("cuda:2", env={}).physical_index == 2


class _RecordingNvml:
    def __init__(self, ok: str):
        self.ok = ok
        self.tried: list[str] = []

    def _try(self, kind, value):
        self.tried.append(kind)
        if kind == self.ok:
            return f"handle-by-{kind}:{value}"
        raise RuntimeError("Not Found")

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return self._try("uuid", uuid)

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return self._try("pci", bus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return self._try("index", index)


def test_find_handle_prefers_uuid_then_pci_then_index():
    ident = DeviceIdentity(index=0, uuid="GPU-1", pci_bus_id="00000000:19:00.0", physical_index=2)
    nvml = _RecordingNvml(ok="pci")
    handle, reason = find_handle(nvml, ident)
    assert handle == "handle-by-pci:00000000:19:00.0" and reason is None
    assert nvml.tried == ["uuid", "pci"]
    nvml = _RecordingNvml(ok="none")
    handle, reason = find_handle(nvml, ident)
    assert handle is None
    assert reason == (
        "energy unavailable: no NVML device matches CUDA device 0 (uuid GPU-1: Not Found; "
        "pci 00000000:19:00.0: Not Found; index 2: Not Found)"
    )


def test_open_counter_reads_millijoules(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    device = SimDevice()
    counter, reason = open_counter("cuda", FakeNvml(device))
    assert reason is None and counter.name == "NVIDIA H200"
    device.sleep(1.0)  # idle at 60 W; update instants at 0.037 + k * 0.1: last one at 0.937 s
    assert counter.read_mj() == 5_000_000 + round(60.0 * 0.937 * 1000)
