"""Read a PyTorch profiler (Kineto) Chrome trace into a :class:`Timeline`.

The file is the JSON that ``torch.profiler.profile.export_chrome_trace`` writes (plain or
gzip-compressed). Complete events (``"ph": "X"``) are read by category:

- ``cpu_op``: framework operators on the host; ``user_annotation``: ``record_function``
  ranges (the forward windows, ``ProfilerStep#N``);
- ``cuda_runtime`` / ``cuda_driver``: CUDA API calls, with ``args.correlation``;
- ``kernel``, ``gpu_memcpy``, ``gpu_memset``: device activity, with ``args.correlation``
  linking it to the API call that launched it (the ``ac2g`` flow events carry the same id
  and are used when an activity lacks the argument);
- instant events named ``[memory]``: the caching allocator's allocations and frees
  (``args.Bytes`` signed, ``Total Allocated``, ``Total Reserved``, ``Device Type``).

Timestamps and durations are microseconds. Anything else is ignored.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from kernelpro.api import CollectorError

from kernelpro_plugins_nsys.timeline import (
    AllocEvent,
    GpuActivity,
    HostOp,
    RuntimeCall,
    Timeline,
    api_base_name,
    windows_from_ranges,
)

# c10::DeviceType values as Kineto writes them in [memory] events
_DEVICE_TYPES: dict[int | None, str] = {0: "cpu", 1: "cuda"}

_COPY_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP|DtoA|AtoD|HtoA|AtoH|AtoA)\b")


def load_json(path: Path) -> dict[str, Any]:
    """Parse a trace file (``.json`` or gzip) into a dict; one-line CollectorError if not."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CollectorError(f"{path}: cannot read trace: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise CollectorError(f"{path}: corrupt gzip trace: {exc}") from None
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CollectorError(f"{path}: not a JSON trace: {str(exc).splitlines()[0]}") from None
    if isinstance(data, list):  # Chrome's "JSON array format" is allowed too
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise CollectorError(f"{path}: not a Kineto/Chrome trace (no traceEvents list)")
    return data


def is_kineto_trace(data: dict[str, Any]) -> bool:
    """Whether parsed JSON looks like a PyTorch profiler trace (not any Chrome trace)."""
    if "schemaVersion" in data or "deviceProperties" in data:
        return True
    cats = {e.get("cat") for e in data.get("traceEvents", [])[:5000] if isinstance(e, dict)}
    return bool(cats & {"cpu_op", "kernel", "cuda_runtime", "user_annotation"})


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _dim3(value: Any) -> tuple[int, int, int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 3:
        try:
            return (int(value[0]), int(value[1]), int(value[2]))
        except (TypeError, ValueError):
            return None
    return None


def copy_kind_from_name(name: str) -> str:
    """``Memcpy DtoH (Device -> Pageable)`` -> ``DtoH``."""
    m = _COPY_KIND.search(name)
    return m.group(1) if m else "other"


def device_meta(data: dict[str, Any], kernel_devices: list[int | None]) -> dict[str, str]:
    """``gpu_name`` and ``arch`` from the profiler's own ``deviceProperties`` (the GPU the
    kernels ran on, else the first listed), for traces without KernelPro's metadata."""
    props = [p for p in data.get("deviceProperties") or () if isinstance(p, dict)
             and isinstance(p.get("name"), str) and p["name"].strip()]
    if not props:
        return {}
    ran = Counter(d for d in kernel_devices if d is not None).most_common(1)
    prop = next((p for p in props if ran and _int(p.get("id")) == ran[0][0]), props[0])
    out = {"gpu_name": prop["name"].strip()}
    major, minor = _int(prop.get("computeMajor")), _int(prop.get("computeMinor"))
    if major is not None and minor is not None:
        out["arch"] = f"sm_{major}{minor}"
    return out


def parse(data: dict[str, Any], source_path: Path | None = None) -> Timeline:
    """Turn parsed Kineto JSON into a Timeline (times in microseconds)."""
    host_ops: list[HostOp] = []
    ranges: list[HostOp] = []
    runtime: list[RuntimeCall] = []
    gpu: list[GpuActivity] = []
    allocs: list[AllocEvent] = []
    kernel_devices: list[int | None] = []
    # (ts, tid) of an ac2g flow's end (on the device activity) -> correlation id
    flow_ts: dict[tuple[float, Any], int] = {}
    for ev in data["traceEvents"]:
        if isinstance(ev, dict) and ev.get("ph") == "f" and ev.get("cat") == "ac2g" and "id" in ev:
            ts, flow_id = ev.get("ts"), _int(ev["id"])
            if isinstance(ts, (int, float)) and flow_id is not None:
                flow_ts[(round(float(ts), 3), ev.get("tid"))] = flow_id

    for ev in data["traceEvents"]:
        if not isinstance(ev, dict):
            continue
        ph = ev.get("ph")
        cat = ev.get("cat")
        if ph == "i" and ev.get("name") == "[memory]":
            args = ev.get("args") or {}
            nbytes = _int(args.get("Bytes"))
            ts = ev.get("ts")
            if nbytes is None or not isinstance(ts, (int, float)):
                continue
            allocs.append(AllocEvent(
                ts_us=float(ts),
                bytes=nbytes,
                device=_DEVICE_TYPES.get(_int(args.get("Device Type")), "other"),
                total_allocated=_int(args.get("Total Allocated")),
                total_reserved=_int(args.get("Total Reserved")),
                tid=ev.get("tid"),
            ))
            continue
        if ph != "X":
            continue
        ts, dur = ev.get("ts"), ev.get("dur", 0)
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) \
                or not math.isfinite(ts) or not math.isfinite(dur):
            continue
        ts, dur = float(ts), max(0.0, float(dur))
        name = str(ev.get("name", ""))
        args = ev.get("args") or {}
        if cat == "cpu_op":
            host_ops.append(HostOp(name, ts, dur, ev.get("tid"), "op"))
        elif cat == "user_annotation":
            ranges.append(HostOp(name, ts, dur, ev.get("tid"), "annotation"))
        elif cat in ("cuda_runtime", "cuda_driver"):
            runtime.append(RuntimeCall(api_base_name(name), ts, dur, ev.get("tid"), _int(args.get("correlation"))))
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            if cat == "kernel" and _int(args.get("device")) is not None:
                kernel_devices.append(_int(args.get("device")))
            corr = _int(args.get("correlation"))
            if corr is None:
                corr = flow_ts.get((round(ts, 3), ev.get("tid")))
            kind = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}[cat]
            gpu.append(GpuActivity(
                kind=kind,
                name=name,
                start_us=ts,
                dur_us=dur,
                stream=_int(args.get("stream")),
                correlation=corr,
                bytes=_int(args.get("bytes")) if kind != "kernel" else None,
                copy_kind=copy_kind_from_name(name) if kind == "memcpy" else None,
                grid=_dim3(args.get("grid")) if kind == "kernel" else None,
                block=_dim3(args.get("block")) if kind == "kernel" else None,
            ))

    if not (host_ops or ranges or runtime or gpu):
        where = f"{source_path}: " if source_path else ""
        raise CollectorError(f"{where}trace holds no CPU operators, CUDA calls or GPU activity")

    spans = [(e.start_us, e.end_us) for e in host_ops + ranges + gpu]
    windows, window_kind = windows_from_ranges(ranges, spans)
    meta = dict(data.get("kernelpro_trace") or {})
    for key, value in device_meta(data, kernel_devices).items():  # a trace KernelPro did not record
        meta.setdefault(key, value)
    if source_path is not None:
        meta.setdefault("trace_path", str(source_path))
    return Timeline(
        source="kineto",
        host_ops=tuple(sorted(host_ops + ranges, key=lambda e: (e.start_us, -e.dur_us))),
        runtime=tuple(sorted(runtime, key=lambda e: e.start_us)),
        gpu=tuple(sorted(gpu, key=lambda e: e.start_us)),
        allocs=tuple(sorted(allocs, key=lambda e: e.ts_us)),
        windows=windows,
        window_kind=window_kind,
        meta=meta,
    )


def read(path: Path) -> Timeline:
    """Read a Kineto trace file into a Timeline; one-line CollectorError when it is not one."""
    data = load_json(path)
    if not is_kineto_trace(data):
        raise CollectorError(f"{path}: a Chrome trace, but not one from the PyTorch profiler (no cpu_op/kernel events)")
    return parse(data, path)
