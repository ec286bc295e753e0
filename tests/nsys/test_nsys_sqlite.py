"""Reading an Nsight Systems SQLite export. No real export could be made on the H200 image
(its nsys leaves a .qdstrm and no report), so the file here is built with the tables and
columns that Nsight Systems exports (times in ns, names through StringIds)."""

from __future__ import annotations

import sqlite3

import pytest
from kernelpro.api import CollectorError, ProfileContext

from kernelpro_plugins_nsys import nsys_sqlite
from kernelpro_plugins_nsys.analyzer import TraceAnalyzer
from kernelpro_plugins_nsys.micro import HostDeviceCopies, HostSync, KernelTimeShare

TID = 0x1000000 * 42 + 42  # globalTid: pid 42, tid 42

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, deviceId INT, contextId INT,
  streamId INT, correlationId INT, globalPid INT, demangledName INT, shortName INT, gridX INT, gridY INT,
  gridZ INT, blockX INT, blockY INT, blockZ INT, registersPerThread INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL, eventClass INT, globalTid INT,
  correlationId INT, nameId INT, returnValue INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT NOT NULL, end INT NOT NULL, deviceId INT, contextId INT,
  streamId INT, correlationId INT, globalPid INT, bytes INT, copyKind INT, srcKind INT, dstKind INT);
CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT, category INT,
  color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT);
"""


def build(path):
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    strings = {"cudaLaunchKernel_v7000": 1, "cudaMemcpyAsync_v3020": 2, "cudaStreamSynchronize_v3020": 3,
               "void sin_kernel<float>(float*)": 4, "sin_kernel": 5, "aten::sin, seq = 7": 6}
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(v, k) for k, v in strings.items()])
    corr = 1
    for i in range(2):
        t = 1_000_000 + i * 1_000_000  # ns
        con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
                    (t, t + 300_000, "kernelpro:forward", TID))
        # an operator range named through textId (emit_nvtx style name)
        con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, textId, globalTid) VALUES (?, ?, 59, 6, ?)",
                    (t + 1_000, t + 20_000, TID))
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, 1, 0)",
                    (t + 2_000, t + 10_000, TID, corr))
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, 7, ?, 42, 4, 5, 64, 1, 1, 256, 1, 1, 32)",
                    (t + 15_000, t + 115_000, corr))
        corr += 1
        con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
                    (t + 30_000, t + 200_000, "aten::item, seq = 8", TID))
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, 2, 0)",
                    (t + 31_000, t + 40_000, TID, corr))
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, 7, ?, 42, 4, 2, 1, 2)",
                    (t + 116_000, t + 118_000, corr))
        corr += 1
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, 3, 0)",
                    (t + 41_000, t + 119_000, TID, corr))
        corr += 1
        # a mark (no end) is ignored
        con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, NULL, 34, 'mark', ?)",
                    (t + 5, TID))
    con.commit()
    con.close()
    return path


def test_reads_windows_ops_calls_and_activity(tmp_path):
    tl = nsys_sqlite.read(build(tmp_path / "r.sqlite"))
    assert tl.source == "nsys-sqlite" and tl.window_kind == "annotation" and len(tl.windows) == 2
    assert {o.name for o in tl.host_ops if o.kind == "op"} == {"aten::sin", "aten::item"}
    assert {c.name for c in tl.runtime} == {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize"}
    kernel = next(a for a in tl.gpu if a.kind == "kernel")
    assert kernel.name == "void sin_kernel<float>(float*)"
    assert kernel.dur_us == pytest.approx(100.0) and kernel.grid == (64, 1, 1) and kernel.block == (256, 1, 1)
    copy = next(a for a in tl.gpu if a.kind == "memcpy")
    assert copy.copy_kind == "DtoH" and copy.bytes == 4


def test_findings_from_an_export(tmp_path):
    profile = TraceAnalyzer().load(build(tmp_path / "r.sqlite"))
    f = profile.payload.forwards[0]
    assert f.kernels == 1 and f.launches == 1 and f.syncs == 1
    assert f.sync_sites == (("aten::item", 1),)
    assert f.span_us == pytest.approx(300.0)
    ctx = ProfileContext(gpu=None, device="cuda")
    assert HostSync().analyze(profile, None, ctx)
    assert HostDeviceCopies().analyze(profile, None, ctx)
    (share,) = KernelTimeShare().analyze(profile, None, ctx)
    assert share.kernel == "void sin_kernel<float>(float*)"
    assert profile.kernels[0].invocations == 2 and profile.kernels[0].duration_ns == pytest.approx(200_000.0)


def test_rejects_other_sqlite_and_non_sqlite(tmp_path):
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x INT)")
    con.commit()
    con.close()
    with pytest.raises(CollectorError, match="not an Nsight Systems export"):
        nsys_sqlite.read(other)
    text = tmp_path / "fake.sqlite"
    text.write_text("hello")
    with pytest.raises(CollectorError, match="not an SQLite file"):
        TraceAnalyzer().load(text)
    empty = tmp_path / "empty.sqlite"
    con = sqlite3.connect(empty)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    con.commit()
    con.close()
    with pytest.raises(CollectorError, match="holds no CUDA or NVTX events"):
        nsys_sqlite.read(empty)
