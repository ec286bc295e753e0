"""Opening NVML and finding the NVML device that backs a torch CUDA device.

Every failure becomes one line, returned by :func:`open_counter` as ``(None, reason)``:
no nvidia-ml-py, no NVML library (no driver), no matching device, a GPU without the
total-energy counter. The ``nvml`` argument is a module-like object with pynvml's
functions and constants; production code passes the real ``pynvml`` module, tests pass a
double (see ``tests/energy/fake_nvml.py``).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import attrs

#: prefix of every line this plugin reports, so the user knows which part is speaking
PREFIX = "energy unavailable"


def import_pynvml() -> tuple[Any | None, str | None]:
    """The real ``pynvml`` module (from nvidia-ml-py), or ``(None, one line)``."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None, f"{PREFIX}: nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    return pynvml, None


def nvml_error_line(nvml: Any, exc: BaseException) -> str:
    """One line for an error raised by ``nvmlInit``."""
    value = getattr(exc, "value", None)
    if value == getattr(nvml, "NVML_ERROR_LIBRARY_NOT_FOUND", object()):
        return f"{PREFIX}: the NVML library (libnvidia-ml.so.1) was not found: no NVIDIA driver on this machine"
    if value == getattr(nvml, "NVML_ERROR_DRIVER_NOT_LOADED", object()):
        return f"{PREFIX}: NVML reports that the NVIDIA driver is not loaded"
    if value == getattr(nvml, "NVML_ERROR_NO_PERMISSION", object()):
        return f"{PREFIX}: no permission to query NVML"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{PREFIX}: NVML could not start: {text}"


@attrs.frozen
class DeviceIdentity:
    """How to find one CUDA device in NVML, most precise key first."""

    index: int  # the torch (visible) device index
    uuid: str | None = None  # "GPU-xxxxxxxx-...", as NVML spells it
    pci_bus_id: str | None = None  # "00000000:19:00.0"
    physical_index: int | None = None  # from CUDA_VISIBLE_DEVICES when it lists numbers


def parse_device_index(device: str) -> int | None:
    """The index in ``"cuda:1"`` (1), ``"cuda"`` (None: the current device)."""
    device = device.strip()
    if ":" in device:
        tail = device.split(":", 1)[1]
        if tail.isdigit():
            return int(tail)
    return None


def visible_device_entry(index: int, env: Mapping[str, str] | None = None) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` entry that torch device ``index`` refers to, if set."""
    value = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if value is None or not value.strip():
        return None
    entries = [e.strip() for e in value.split(",") if e.strip()]
    return entries[index] if index < len(entries) else None


def torch_identity(device: str, env: dict[str, str] | None = None) -> DeviceIdentity:
    """Identify ``device`` through torch when CUDA is available, else from the index and
    ``CUDA_VISIBLE_DEVICES`` alone."""
    index = parse_device_index(device)
    uuid = pci = None
    try:
        import torch

        if torch.cuda.is_available():
            if index is None:
                index = torch.cuda.current_device()
            props = torch.cuda.get_device_properties(index)
            raw_uuid = getattr(props, "uuid", None)
            if raw_uuid is not None:
                text = str(raw_uuid)
                uuid = text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
            domain = getattr(props, "pci_domain_id", None)
            bus = getattr(props, "pci_bus_id", None)
            dev = getattr(props, "pci_device_id", None)
            if isinstance(bus, int) and isinstance(dev, int):
                pci = f"{int(domain or 0):08X}:{bus:02X}:{dev:02X}.0"
            elif isinstance(bus, str) and bus:
                pci = bus
    except Exception:  # torch without CUDA, or a broken driver: fall back to the index
        pass
    index = 0 if index is None else index
    physical = None
    entry = visible_device_entry(index, env)
    if entry is not None:
        if entry.isdigit():
            physical = int(entry)
        elif uuid is None and entry.startswith("GPU-"):
            uuid = entry
    elif uuid is None and pci is None:
        physical = index
    return DeviceIdentity(index=index, uuid=uuid, pci_bus_id=pci, physical_index=physical)


def find_handle(nvml: Any, ident: DeviceIdentity) -> tuple[Any | None, str | None]:
    """The NVML handle for ``ident``: by UUID, else PCI bus id, else physical index."""
    errors = []
    if ident.uuid:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(ident.uuid), None
        except Exception as exc:
            errors.append(f"uuid {ident.uuid}: {exc}")
    if ident.pci_bus_id:
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId(ident.pci_bus_id), None
        except Exception as exc:
            errors.append(f"pci {ident.pci_bus_id}: {exc}")
    if ident.physical_index is not None:
        try:
            return nvml.nvmlDeviceGetHandleByIndex(ident.physical_index), None
        except Exception as exc:
            errors.append(f"index {ident.physical_index}: {exc}")
    detail = "; ".join(errors) if errors else "no usable identifier"
    return None, f"{PREFIX}: no NVML device matches CUDA device {ident.index} ({detail})"


def device_name(nvml: Any, handle: Any) -> str:
    try:
        name = nvml.nvmlDeviceGetName(handle)
    except Exception:
        return "this GPU"
    return name.decode() if isinstance(name, bytes) else str(name)


def check_energy_counter(nvml: Any, handle: Any) -> str | None:
    """None when the total-energy counter can be read; else one line."""
    try:
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as exc:
        name = device_name(nvml, handle)
        if getattr(exc, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", object()):
            return (
                f"{PREFIX}: {name} has no total-energy counter "
                "(nvmlDeviceGetTotalEnergyConsumption: NVML_ERROR_NOT_SUPPORTED; it needs Volta or newer)"
            )
        return f"{PREFIX}: reading the energy counter of {name} failed: {exc}"
    return None


@attrs.define
class OpenCounter:
    """An initialised NVML with the handle of the measured device."""

    nvml: Any
    handle: Any
    name: str

    def read_mj(self) -> int:
        """The device's total energy since the driver loaded, in millijoules."""
        return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass


def open_counter(
    device: str, nvml: Any | None = None, env: dict[str, str] | None = None
) -> tuple[OpenCounter | None, str | None]:
    """Initialise NVML and find the energy counter of ``device``; ``(None, line)`` if not."""
    if not device.strip().startswith("cuda"):
        return None, f"{PREFIX}: energy is measured on CUDA devices only, not {device!r}"
    if nvml is None:
        nvml, reason = import_pynvml()
        if nvml is None:
            return None, reason
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return None, nvml_error_line(nvml, exc)
    handle, reason = find_handle(nvml, torch_identity(device, env))
    if handle is None:
        _shutdown(nvml)
        return None, reason
    reason = check_energy_counter(nvml, handle)
    if reason is not None:
        _shutdown(nvml)
        return None, reason
    return OpenCounter(nvml=nvml, handle=handle, name=device_name(nvml, handle)), None


def _shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass
