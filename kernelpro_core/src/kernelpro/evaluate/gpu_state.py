"""Device state a candidate can leave behind: L2 persistence (set-aside size, stream
access-policy windows), read and reset through the CUDA runtime the process already
loaded (``libcudart``, via ctypes; torch exposes no API for these).

Why it matters: lines marked persisting survive the L2 flush the timer does before every
call, so a candidate that marks its data persisting would be timed with a warm cache.
:meth:`L2State.reset` (``cudaCtxResetPersistingL2Cache``, set-aside size back to 0,
access-policy window of the current and default streams cleared) runs after every
candidate call, outside the timed region; what it found is reported as a flag.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06  # cudaLimitPersistingL2CacheSize
CUDA_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1  # cudaStreamAttributeAccessPolicyWindow
ATTR_VALUE_BYTES = 64  # sizeof(cudaLaunchAttributeValue) in CUDA 12/13


def _find_cudart() -> ctypes.CDLL | None:
    """The libcudart this process already mapped (torch's), else one by soname."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                if "libcudart.so" in line:
                    return ctypes.CDLL(line.split()[-1])
    except OSError:
        pass
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


class L2State:
    def __init__(self) -> None:
        self.lib = _find_cudart()
        self.reason = "" if self.lib is not None else "libcudart not found in the process"
        self.found: list[str] = []  # what resets had to undo, deduplicated

    @property
    def available(self) -> bool:
        return self.lib is not None

    def persisting_limit(self) -> int | None:
        if self.lib is None:
            return None
        value = ctypes.c_size_t(0)
        err = self.lib.cudaDeviceGetLimit(ctypes.byref(value), CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE)
        return int(value.value) if err == 0 else None

    def window(self, stream: int) -> tuple[int, int] | None:
        """(base_ptr, num_bytes) of ``stream``'s access-policy window, None if unreadable."""
        if self.lib is None:
            return None
        buf = ctypes.create_string_buffer(ATTR_VALUE_BYTES)
        err = self.lib.cudaStreamGetAttribute(ctypes.c_void_p(stream), CUDA_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                              buf)
        if err != 0:
            return None
        base, nbytes = struct.unpack_from("QQ", buf.raw, 0)
        return int(base), int(nbytes)

    def clear_window(self, stream: int) -> None:
        if self.lib is None:
            return
        buf = ctypes.create_string_buffer(ATTR_VALUE_BYTES)  # base 0, 0 bytes, ratio 0, normal/normal
        self.lib.cudaStreamSetAttribute(ctypes.c_void_p(stream), CUDA_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, buf)

    def reset(self, streams: list[int]) -> list[str]:
        """Undo any L2 persistence; return what was set (empty when nothing was)."""
        if self.lib is None:
            return []
        found = []
        limit = self.persisting_limit()
        if limit:
            found.append(f"persisting L2 set-aside of {limit} bytes")
            self.lib.cudaDeviceSetLimit(CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))
        for s in streams:
            w = self.window(s)
            if w and w[1]:
                found.append(f"access-policy window of {w[1]} bytes on stream {s:#x}")
                self.clear_window(s)
        self.lib.cudaCtxResetPersistingL2Cache()
        self.clear_error()  # a failed query must not surface later as the candidate's CUDA error
        for f in found:
            if f not in self.found:
                self.found.append(f)
        return found

    def clear_error(self) -> Any:
        """cudaGetLastError: a failed attribute query must not look like the candidate's error."""
        return self.lib.cudaGetLastError() if self.lib is not None else 0
