"""A profiler-neutral timeline: the events of a trace that the analysis reads.

The Kineto reader (:mod:`kernelpro_plugins_nsys.kineto`) and the Nsight Systems SQLite
reader (:mod:`kernelpro_plugins_nsys.nsys_sqlite`) both produce a :class:`Timeline`. Every
time is in microseconds on the trace's own clock; host and device share that clock in
both formats (CUPTI timestamps are converted by the profiler).
"""

from __future__ import annotations

import re
from typing import Any

import attrs

#: name of the range the trace driver puts around each recorded forward call
FORWARD_RANGE = "kernelpro:forward"

_API_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?$")


def api_base_name(name: str) -> str:
    """``cudaMemcpyAsync_v3020_ptsz`` -> ``cudaMemcpyAsync``: CUPTI may report versioned
    or per-thread-stream variants of an API; the analysis matches the base name."""
    return _API_SUFFIX.sub("", name)


# CUDA runtime/driver entry points, by what they do (base names, see api_base_name).
LAUNCH_APIS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchKernel", "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel", "cudaGraphLaunch", "cuGraphLaunch",
})
GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
SYNC_APIS = frozenset({
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
    "cudaThreadSynchronize", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
    # synchronous copies block the host until the device has finished
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cuMemcpyDtoH", "cuMemcpyHtoD",
})
ALLOC_APIS = frozenset({
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaMallocManaged",
    "cudaMallocHost", "cudaFreeHost", "cudaHostAlloc", "cudaMallocPitch",
    "cuMemAlloc", "cuMemFree", "cuMemAllocAsync", "cuMemFreeAsync", "cuMemCreate",
    "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve", "cuMemAddressFree",
})


@attrs.frozen
class HostOp:
    """A CPU-side range: a framework operator (``aten::mm``) or a user annotation."""

    name: str
    start_us: float
    dur_us: float
    tid: Any
    kind: str = "op"  # "op" | "annotation"

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@attrs.frozen
class RuntimeCall:
    """A CUDA runtime or driver API call on the host; ``name`` is the base name."""

    name: str
    start_us: float
    dur_us: float
    tid: Any
    correlation: int | None = None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@attrs.frozen
class GpuActivity:
    """Work on the device: a kernel, a memcpy or a memset."""

    kind: str  # "kernel" | "memcpy" | "memset"
    name: str
    start_us: float
    dur_us: float
    stream: int | None = None
    correlation: int | None = None
    bytes: int | None = None  # memcpy / memset size
    copy_kind: str | None = None  # memcpy only: "HtoD" | "DtoH" | "DtoD" | "HtoH" | "PtoP" | "other"
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@attrs.frozen
class AllocEvent:
    """One allocator event of the framework's caching allocator (Kineto ``[memory]``)."""

    ts_us: float
    bytes: int  # > 0 allocation, < 0 free
    device: str  # "cuda" | "cpu" | "other"
    total_allocated: int | None = None
    total_reserved: int | None = None
    tid: Any = None


@attrs.frozen
class ForwardWindow:
    """The host-side interval of one recorded forward call."""

    index: int
    start_us: float
    end_us: float
    tid: Any = None

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us


@attrs.frozen
class Timeline:
    """Events of one trace, normalised. ``windows`` are the forward calls to analyse;
    ``window_kind`` says how they were found: "annotation" (the driver's
    ``kernelpro:forward`` ranges), "profiler_step" (``ProfilerStep#N``) or "whole_trace"."""

    source: str  # "kineto" | "nsys-sqlite"
    host_ops: tuple[HostOp, ...]
    runtime: tuple[RuntimeCall, ...]
    gpu: tuple[GpuActivity, ...]
    allocs: tuple[AllocEvent, ...]
    windows: tuple[ForwardWindow, ...]
    window_kind: str
    meta: dict[str, Any] = attrs.field(factory=dict)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpu)


def windows_from_ranges(
    ranges: list[HostOp], all_spans: list[tuple[float, float]]
) -> tuple[tuple[ForwardWindow, ...], str]:
    """Choose the forward windows: the driver's ranges, else profiler steps, else the
    whole trace (from the earliest start to the latest end in ``all_spans``)."""
    forward = sorted((r for r in ranges if r.name == FORWARD_RANGE), key=lambda r: r.start_us)
    if forward:
        return tuple(
            ForwardWindow(i, r.start_us, r.end_us, r.tid) for i, r in enumerate(forward)
        ), "annotation"
    steps = sorted((r for r in ranges if r.name.startswith("ProfilerStep#")), key=lambda r: r.start_us)
    if steps:
        return tuple(
            ForwardWindow(i, r.start_us, r.end_us, r.tid) for i, r in enumerate(steps)
        ), "profiler_step"
    if not all_spans:
        return (), "whole_trace"
    start = min(s for s, _ in all_spans)
    end = max(e for _, e in all_spans)
    return (ForwardWindow(0, start, end, None),), "whole_trace"
