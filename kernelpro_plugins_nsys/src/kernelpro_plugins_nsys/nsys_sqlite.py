"""Read an Nsight Systems SQLite export (``nsys export --type sqlite``) into a Timeline.

Tables read (columns as exported by Nsight Systems; times in nanoseconds; names are ids
into ``StringIds(id, value)``):

- ``CUPTI_ACTIVITY_KIND_KERNEL``: start, end, streamId, correlationId, demangledName,
  shortName, gridX/Y/Z, blockX/Y/Z;
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: start, end, globalTid, correlationId, nameId (CUDA
  runtime and driver API calls);
- ``CUPTI_ACTIVITY_KIND_MEMCPY``: start, end, streamId, correlationId, bytes, copyKind
  (CUPTI's ``CUpti_ActivityMemcpyKind``: 1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH, 10 PtoP);
- ``CUPTI_ACTIVITY_KIND_MEMSET``: start, end, streamId, correlationId, bytes;
- ``NVTX_EVENTS``: start, end, text / textId, globalTid: ranges. ``kernelpro:forward``
  ranges are the forward windows; the others (PyTorch's ``emit_nvtx`` operator ranges,
  ``aten::mm, seq = 3``) are host operators, named up to the first comma.

Tables are created lazily by the exporter, so a missing table means no such events.
Allocator events are not in this export (no ``[memory]`` equivalent is read).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kernelpro.api import CollectorError

from kernelpro_plugins_nsys.timeline import (
    GpuActivity,
    HostOp,
    RuntimeCall,
    Timeline,
    api_base_name,
    windows_from_ranges,
)

SQLITE_MAGIC = b"SQLite format 3\x00"

# CUpti_ActivityMemcpyKind
_COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
               8: "DtoD", 9: "HtoH", 10: "PtoP"}


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def read(path: Path) -> Timeline:
    """Read the export; one-line CollectorError when it is not an Nsight Systems export."""
    if not is_sqlite(path):
        raise CollectorError(f"{path}: not an SQLite file")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return _read(con, path)
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise CollectorError(f"{path}: cannot read the Nsight Systems export: {exc}") from None


def _read(con: sqlite3.Connection, path: Path) -> Timeline:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "StringIds" not in tables:
        raise CollectorError(f"{path}: an SQLite file, but not an Nsight Systems export (no StringIds table)")
    strings = dict(con.execute("SELECT id, value FROM StringIds"))
    us = 1e-3  # ns -> us

    gpu: list[GpuActivity] = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        cols = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
        name_col = "demangledName" if "demangledName" in cols else "shortName"
        dims = all(c in cols for c in ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"))
        sel = f"start, end, streamId, correlationId, {name_col}" + (
            ", gridX, gridY, gridZ, blockX, blockY, blockZ" if dims else "")
        for row in con.execute(f"SELECT {sel} FROM CUPTI_ACTIVITY_KIND_KERNEL"):
            start, end, stream, corr, name_id = row[:5]
            gpu.append(GpuActivity(
                kind="kernel", name=str(strings.get(name_id, name_id)), start_us=start * us,
                dur_us=max(0, end - start) * us, stream=stream, correlation=corr,
                grid=tuple(row[5:8]) if dims else None, block=tuple(row[8:11]) if dims else None,
            ))
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        for start, end, stream, corr, nbytes, kind in con.execute(
            "SELECT start, end, streamId, correlationId, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ):
            ck = _COPY_KINDS.get(kind, "other")
            gpu.append(GpuActivity(
                kind="memcpy", name=f"Memcpy {ck}", start_us=start * us, dur_us=max(0, end - start) * us,
                stream=stream, correlation=corr, bytes=nbytes, copy_kind=ck,
            ))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        for start, end, stream, corr, nbytes in con.execute(
            "SELECT start, end, streamId, correlationId, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET"
        ):
            gpu.append(GpuActivity(
                kind="memset", name="Memset", start_us=start * us, dur_us=max(0, end - start) * us,
                stream=stream, correlation=corr, bytes=nbytes,
            ))

    runtime: list[RuntimeCall] = []
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        for start, end, tid, corr, name_id in con.execute(
            "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        ):
            runtime.append(RuntimeCall(
                api_base_name(str(strings.get(name_id, name_id))), start * us,
                max(0, end - start) * us, tid, corr,
            ))

    ranges: list[HostOp] = []
    ops: list[HostOp] = []
    if "NVTX_EVENTS" in tables:
        cols = _columns(con, "NVTX_EVENTS")
        text_id = "textId" if "textId" in cols else "NULL"
        for start, end, text, tid_text, tid in con.execute(
            f"SELECT start, end, text, {text_id}, globalTid FROM NVTX_EVENTS"
        ):
            if end is None or start is None or end <= start:
                continue  # marks and unterminated ranges
            name = text if text is not None else strings.get(tid_text)
            if name is None:
                continue
            name = str(name)
            if name == "kernelpro:forward" or name.startswith("ProfilerStep#"):
                ranges.append(HostOp(name, start * us, (end - start) * us, tid, "annotation"))
            else:
                ops.append(HostOp(name.split(",")[0].strip(), start * us, (end - start) * us, tid, "op"))

    if not (gpu or runtime or ranges or ops):
        raise CollectorError(f"{path}: the Nsight Systems export holds no CUDA or NVTX events")
    spans = [(e.start_us, e.end_us) for e in ops + ranges + gpu]
    windows, window_kind = windows_from_ranges(ranges, spans)
    return Timeline(
        source="nsys-sqlite",
        host_ops=tuple(sorted(ops + ranges, key=lambda e: (e.start_us, -e.dur_us))),
        runtime=tuple(sorted(runtime, key=lambda e: e.start_us)),
        gpu=tuple(sorted(gpu, key=lambda e: e.start_us)),
        allocs=(),
        windows=windows,
        window_kind=window_kind,
        meta={"trace_path": str(path)},
    )
