"""Build small synthetic Kineto traces with known answers, for unit tests.

Events follow the shape torch.profiler exports: complete events ("ph": "X") with ``cat``
cpu_op / user_annotation / cuda_runtime / kernel / gpu_memcpy, ``args.correlation``
linking a CUDA call to its device activity, and ``[memory]`` instant events.
"""

from __future__ import annotations

import json
from pathlib import Path

PID, TID, GPU_PID, STREAM = 100, 100, 0, 7


class TraceBuilder:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self._corr = 1000

    def annotation(self, name: str, ts: float, dur: float) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": PID, "tid": TID,
                            "ts": ts, "dur": dur, "args": {}})

    def op(self, name: str, ts: float, dur: float) -> None:
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID,
                            "ts": ts, "dur": dur, "args": {}})

    def call(self, name: str, ts: float, dur: float, corr: int | None = None) -> int:
        if corr is None:
            self._corr += 1
            corr = self._corr
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": PID, "tid": TID,
                            "ts": ts, "dur": dur, "args": {"correlation": corr, "cbid": 211}})
        return corr

    def kernel(self, name: str, ts: float, dur: float, corr: int | None, flow: bool = False) -> None:
        args = {"stream": STREAM, "device": 0, "grid": [1, 1, 1], "block": [128, 1, 1]}
        if corr is not None and not flow:
            args["correlation"] = corr
        self.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": GPU_PID, "tid": STREAM,
                            "ts": ts, "dur": dur, "args": args})
        if flow:
            self.events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "bp": "e",
                                "pid": GPU_PID, "tid": STREAM, "ts": ts})

    def memcpy(self, kind: str, ts: float, dur: float, corr: int, nbytes: int) -> None:
        label = {"HtoD": "Pageable -> Device", "DtoH": "Device -> Pageable", "DtoD": "Device -> Device"}[kind]
        self.events.append({"ph": "X", "cat": "gpu_memcpy", "name": f"Memcpy {kind} ({label})", "pid": GPU_PID,
                            "tid": STREAM, "ts": ts, "dur": dur,
                            "args": {"stream": STREAM, "correlation": corr, "bytes": nbytes}})

    def memory(self, ts: float, nbytes: int, allocated: int, reserved: int, device_type: int = 1) -> None:
        self.events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": PID,
                            "tid": TID, "ts": ts,
                            "args": {"Bytes": nbytes, "Total Allocated": allocated, "Total Reserved": reserved,
                                     "Device Type": device_type, "Device Id": 0}})

    def launch(self, op_name: str, ts: float, kernel: str, kernel_dur: float, *, op_dur: float = 8.0,
               launch_dur: float = 4.0, queue_us: float = 2.0) -> float:
        """An operator that launches one kernel; returns the kernel's end time."""
        self.op(op_name, ts, op_dur)
        corr = self.call("cudaLaunchKernel", ts + 2.0, launch_dur)
        start = ts + 2.0 + launch_dur + queue_us
        self.kernel(kernel, start, kernel_dur, corr)
        return start + kernel_dur

    def data(self, meta: dict | None = None) -> dict:
        data = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": list(self.events)}
        if meta:
            data["kernelpro_trace"] = meta
        return data

    def write(self, path: Path, meta: dict | None = None) -> Path:
        path.write_text(json.dumps(self.data(meta)))
        return path


def launch_bound(forwards: int = 3, launches: int = 50) -> TraceBuilder:
    """Each forward: ``launches`` operators 10 us apart, each launching a 2 us kernel."""
    b = TraceBuilder()
    t = 1000.0
    for _ in range(forwards):
        b.annotation("kernelpro:forward", t, launches * 10.0 + 5.0)
        for i in range(launches):
            b.launch("aten::mul", t + i * 10.0, "elementwise_kernel", 2.0)
        t += launches * 10.0 + 200.0
    return b


def fused(forwards: int = 3) -> TraceBuilder:
    """Each forward: one matmul launching a 1000 us kernel right away."""
    b = TraceBuilder()
    t = 1000.0
    for _ in range(forwards):
        b.annotation("kernelpro:forward", t, 20.0)
        b.launch("aten::mm", t + 1.0, "sm90_gemm_kernel", 1000.0, op_dur=15.0)
        t += 1500.0
    return b


def host_sync(forwards: int = 3) -> TraceBuilder:
    """Each forward: a 100 us kernel, then aten::item (DtoH copy + stream sync), then after
    30 us of Python a second 100 us kernel."""
    b = TraceBuilder()
    t = 1000.0
    for _ in range(forwards):
        b.annotation("kernelpro:forward", t, 260.0)
        b.launch("aten::mm", t, "gemm", 100.0)  # kernel 8..108
        b.op("aten::item", t + 12.0, 110.0)
        b.op("aten::_local_scalar_dense", t + 13.0, 108.0)
        corr = b.call("cudaMemcpyAsync", t + 14.0, 5.0)
        b.memcpy("DtoH", t + 109.0, 2.0, corr, 4)
        b.call("cudaStreamSynchronize", t + 20.0, 92.0)  # returns at +112
        # python for 30 us, then the next launch
        b.launch("aten::add", t + 142.0, "add_kernel", 100.0)
        t += 1000.0
    return b


def copies(forwards: int = 3) -> TraceBuilder:
    """Each forward: an HtoD copy of 1 MiB then a kernel."""
    b = TraceBuilder()
    t = 1000.0
    for _ in range(forwards):
        b.annotation("kernelpro:forward", t, 60.0)
        b.op("aten::to", t, 40.0)
        corr = b.call("cudaMemcpyAsync", t + 2.0, 30.0)
        b.memcpy("HtoD", t + 5.0, 25.0, corr, 1 << 20)
        b.launch("aten::relu", t + 42.0, "relu_kernel", 200.0)
        t += 1000.0
    return b


def alloc_churn(forwards: int = 3) -> TraceBuilder:
    """Each forward: an operator that cudaMallocs 64 MiB, a kernel, then cudaFree."""
    b = TraceBuilder()
    t = 1000.0
    reserved = 0
    for _ in range(forwards):
        b.annotation("kernelpro:forward", t, 500.0)
        b.op("aten::empty", t, 120.0)
        b.call("cudaMalloc", t + 2.0, 100.0)
        reserved += 64 << 20
        b.memory(t + 110.0, 64 << 20, 64 << 20, reserved)
        b.launch("aten::fill_", t + 130.0, "fill_kernel", 150.0)
        b.memory(t + 300.0, -(64 << 20), 0, reserved)
        b.op("aten::empty_cache", t + 310.0, 150.0)
        b.call("cudaFree", t + 312.0, 140.0)
        reserved -= 64 << 20
        b.memory(t + 455.0, 0, 0, reserved)
        t += 1000.0
    return b


def cpu_overhead(forwards: int = 3) -> TraceBuilder:
    """Each forward: 5 ms of Python with no operator, then one 50 us kernel."""
    b = TraceBuilder()
    t = 1000.0
    for _ in range(forwards):
        b.annotation("kernelpro:forward", t, 5020.0)
        b.launch("aten::mm", t + 5000.0, "gemm", 50.0, op_dur=15.0)
        t += 10000.0
    return b
