"""Memory shared between the judge and a harness: the inputs it computes on and the
outputs it hands back.

The judge allocates every buffer and lends it to one harness: on a GPU a separate
``cuMemAlloc`` allocation exported with ``cuIpcGetMemHandle`` (CUDA IPC; a handle maps
exactly that allocation, never the rest of the judge's memory), on a CPU an anonymous
``memfd`` mapped by both processes (its descriptor crosses the socket). Nothing is copied
between processes: the judge fills a harness's input buffers, the harness's model reads
them, and it copies its outputs into the output buffers the judge then compares. Each
harness has its own buffers, so the candidate's process never sees the reference's inputs
or outputs.

Values cross as typed trees (:func:`describe_inputs`, :func:`describe_output`): JSON,
never pickle, since the judge must not run anything a candidate's process sends.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from typing import Any

import torch

from kernelpro.evaluate.compare import shares_storage

SCALARS = (bool, int, float, str, type(None))


class TransportError(Exception):
    """Shared memory could not be set up, or a value cannot cross between processes."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def dtype_of(name: str) -> torch.dtype:
    dt = getattr(torch, str(name), None)
    if not isinstance(dt, torch.dtype):
        raise TransportError(f"unknown dtype {name!r}")
    return dt


# --- CUDA driver (ctypes) --------------------------------------------------------------------


class _IpcHandle(ctypes.Structure):
    # bytes, not c_char: a c_char array field reads back as bytes cut at the first NUL
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


def handle_bytes(handle: _IpcHandle) -> bytes:
    return ctypes.string_at(ctypes.addressof(handle), ctypes.sizeof(handle))


def handle_of(raw: bytes) -> _IpcHandle:
    if len(raw) != 64:
        raise TransportError(f"a CUDA IPC handle has 64 bytes, got {len(raw)}")
    handle = _IpcHandle()
    ctypes.memmove(ctypes.addressof(handle), raw, 64)
    return handle


class _Driver:
    """The few CUDA driver calls CUDA IPC needs, on the context torch made current."""

    _instance: "_Driver | None" = None

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise TransportError(f"the CUDA driver library is not loadable: {exc}") from None
        self._open = getattr(self.lib, "cuIpcOpenMemHandle_v2", None) or self.lib.cuIpcOpenMemHandle
        self._open.argtypes = [ctypes.POINTER(ctypes.c_uint64), _IpcHandle, ctypes.c_uint]
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_IpcHandle), ctypes.c_uint64]

    @classmethod
    def get(cls) -> "_Driver":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            raise TransportError(f"{what} failed: {name.value.decode() if name.value else rc}")

    def current(self, device: torch.device) -> None:
        """Make torch's (primary) context of ``device`` current on this thread."""
        if device.index is not None:
            torch.cuda.set_device(device.index)
        torch.empty(1, device=device)  # torch creates the primary context lazily
        ctx = ctypes.c_void_p()
        self._check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            dev = ctypes.c_int()
            index = device.index if device.index is not None else torch.cuda.current_device()
            self._check(self.lib.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
            self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            self._check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self._check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), nbytes), f"cuMemAlloc({nbytes} bytes)")
        return int(ptr.value)

    def export(self, ptr: int) -> bytes:
        handle = _IpcHandle()
        self._check(self.lib.cuIpcGetMemHandle(ctypes.byref(handle), ptr), "cuIpcGetMemHandle")
        return handle_bytes(handle)

    def open(self, handle: bytes) -> int:
        ptr = ctypes.c_uint64()
        self._check(self._open(ctypes.byref(ptr), handle_of(handle), 1), "cuIpcOpenMemHandle")  # lazy peer access
        return int(ptr.value)


class _DeviceBytes:
    """A raw device allocation presented to torch (``__cuda_array_interface__``, bytes)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None}


# --- buffers -------------------------------------------------------------------------------------


class Buffer:
    """One allocation, owned by the judge or opened by a harness; :meth:`view` gives
    tensors over it. ``desc`` (JSON) and ``fd`` (host memory) are what a harness needs
    to open it. Buffers live as long as their process (an evaluation's processes end with it)."""

    def __init__(self, kind: str, nbytes: int, device: torch.device, *, ptr: int = 0, fd: int = -1,
                 owner: bool = True) -> None:
        self.kind = kind
        self.nbytes = nbytes
        self.device = device
        self.ptr = ptr
        self.fd = fd
        self.owner = owner
        self._mm: mmap.mmap | None = None
        self.raw: torch.Tensor
        alloc = max(nbytes, 16)
        if kind == "cuda":
            self.raw = torch.as_tensor(_DeviceBytes(ptr, alloc), device=device)[:nbytes]
        else:
            self._mm = mmap.mmap(fd, alloc)
            self.raw = torch.frombuffer(self._mm, dtype=torch.uint8)[:nbytes]
        self.desc: dict[str, Any] = {"kind": kind, "nbytes": nbytes}

    @classmethod
    def allocate(cls, nbytes: int, device: str | torch.device) -> "Buffer":
        dev = torch.device(device)
        alloc = max(int(nbytes), 16)
        if dev.type == "cuda":
            drv = _Driver.get()
            drv.current(dev)
            try:
                ptr = drv.alloc(alloc)
            except TransportError:
                # the memory torch's allocator holds cached but unused is invisible to the
                # driver: hand it back and try once more
                torch.cuda.empty_cache()
                ptr = drv.alloc(alloc)
            buf = cls("cuda", int(nbytes), dev, ptr=ptr)
            buf.desc["handle"] = drv.export(ptr).hex()
            return buf
        fd = os.memfd_create("kernelpro-buffer", os.MFD_CLOEXEC)
        os.ftruncate(fd, alloc)
        return cls("host", int(nbytes), dev, fd=fd)

    @classmethod
    def open(cls, desc: dict[str, Any], device: str | torch.device, fd: int = -1) -> "Buffer":
        dev = torch.device(device)
        nbytes = int(desc["nbytes"])
        if desc.get("kind") == "cuda":
            if dev.type != "cuda":
                raise TransportError("a GPU buffer was lent to a process evaluating on the CPU")
            drv = _Driver.get()
            drv.current(dev)
            ptr = drv.open(bytes.fromhex(desc["handle"]))
            return cls("cuda", nbytes, dev, ptr=ptr, owner=False)
        if fd < 0:
            raise TransportError("a host buffer arrived without its file descriptor")
        return cls("host", nbytes, dev, fd=fd, owner=False)

    def view(self, dtype: torch.dtype, shape: tuple[int, ...], stride: tuple[int, ...] | None = None) -> torch.Tensor:
        """A tensor of ``shape`` (and ``stride``; contiguous by default) at the buffer's start."""
        if self.nbytes == 0:
            return torch.empty(shape, dtype=dtype, device=self.raw.device)
        flat = self.raw.view(dtype)
        if stride is None:
            n = 1
            for s in shape:
                n *= s
            return flat[:n].view(shape)
        return flat.as_strided(shape, stride, 0)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, n = [], 1
    for s in reversed(shape):
        out.append(n)
        n *= max(s, 1)
    return tuple(reversed(out))


def span_elements(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def keeps_layout(t: torch.Tensor) -> bool:
    """Whether ``t``'s strides can be reproduced in a buffer of its own: non-negative and
    non-overlapping (a transposed or sliced input keeps its layout; an expanded one, whose
    elements share memory, is passed contiguous)."""
    dims = sorted((st, s) for s, st in zip(t.shape, t.stride()) if s > 1)
    reach = 0
    for st, s in dims:
        if st <= reach:
            return False
        reach += (s - 1) * st
    return True


# --- value trees -------------------------------------------------------------------------------


def describe_inputs(inputs: list[Any]) -> tuple[Any, list[torch.Tensor], list[dict[str, Any]]]:
    """(tree, tensors, tensor specs) of a problem's inputs: tensors become ``{"t": i}``
    (their dtype, shape and strides in ``specs[i]``), scalars ``{"v": value}``, lists and
    tuples stay nested. Raises :class:`TransportError` for anything else."""
    tensors: list[torch.Tensor] = []
    specs: list[dict[str, Any]] = []

    def walk(x: Any, where: str) -> Any:
        if isinstance(x, torch.Tensor):
            stride = tuple(x.stride()) if keeps_layout(x) else contiguous_strides(tuple(x.shape))
            specs.append({"dtype": dtype_name(x.dtype), "shape": list(x.shape), "stride": list(stride),
                          "nbytes": span_elements(tuple(x.shape), stride) * x.element_size()})
            tensors.append(x)
            return {"t": len(tensors) - 1}
        if isinstance(x, SCALARS):
            return {"v": x}
        if isinstance(x, (list, tuple)):
            return {"list" if isinstance(x, list) else "tuple": [walk(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        raise TransportError(f"input {where} is a {type(x).__module__}.{type(x).__name__}: only tensors, numbers, "
                             "strings, None and lists or tuples of them can be passed to the evaluation's processes")

    tree = [walk(x, str(i)) for i, x in enumerate(inputs)]
    return tree, tensors, specs


def build_tree(tree: Any, tensors: list[Any]) -> Any:
    """The value a tree stands for, with ``{"t": i}`` replaced by ``tensors[i]``."""
    if isinstance(tree, list):
        return [build_tree(x, tensors) for x in tree]
    if not isinstance(tree, dict):
        raise TransportError("malformed value tree")
    if "t" in tree:
        return tensors[int(tree["t"])]
    if "v" in tree:
        return tree["v"]
    if "list" in tree:
        return [build_tree(x, tensors) for x in tree["list"]]
    if "tuple" in tree:
        return tuple(build_tree(x, tensors) for x in tree["tuple"])
    raise TransportError("malformed value tree")


def describe_output(out: Any, inputs: list[torch.Tensor]) -> Any:
    """What a forward returned, as JSON: tensors as ``{"tensor": {...}}`` with their type,
    layout, device, dtype, shape and whether they share memory with an input; scalars as
    ``{"v": ...}``; anything else as ``{"other": type name}``."""
    if isinstance(out, torch.Tensor):
        info: dict[str, Any] = {"type": f"{type(out).__module__}.{type(out).__name__}",
                                "plain": type(out) is torch.Tensor}
        try:
            info.update(layout=str(out.layout), meta=bool(out.is_meta), device=out.device.type,
                        dtype=dtype_name(out.dtype), shape=list(out.shape))
            info["alias"] = any(shares_storage(out, x) for x in inputs)
        except Exception as exc:  # a subclass whose properties fail
            info["error"] = f"{type(exc).__name__}: {exc}"[:200]
        return {"tensor": info}
    if isinstance(out, SCALARS):
        return {"v": out}
    if isinstance(out, (list, tuple)):
        return {"list" if isinstance(out, list) else "tuple": [describe_output(x, inputs) for x in out]}
    return {"other": f"{type(out).__module__}.{type(out).__name__}"}


def output_leaves(desc: Any) -> list[dict[str, Any]]:
    """The leaves of an output description in :func:`kernelpro.evaluate.compare.flatten` order."""
    if isinstance(desc, dict) and ("list" in desc or "tuple" in desc):
        out: list[dict[str, Any]] = []
        for x in (desc["list"] if "list" in desc else desc["tuple"]):
            out.extend(output_leaves(x))
        return out
    return [desc]


def output_tensors(out: Any) -> list[Any]:
    """The leaves of an output value in the same order as :func:`output_leaves`."""
    if isinstance(out, (list, tuple)):
        flat: list[Any] = []
        for x in out:
            flat.extend(output_tensors(x))
        return flat
    return [out]
