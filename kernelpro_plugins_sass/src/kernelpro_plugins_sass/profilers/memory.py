"""Memory-access checks: narrow global accesses, local memory, tiles without async copies."""

from __future__ import annotations

from kernelpro.api import ANY, Finding, GpuSpec

from kernelpro_plugins_sass import isa
from kernelpro_plugins_sass.payload import KernelEntry
from kernelpro_plugins_sass.profilers.base import (
    COMPUTE_SIDE,
    MEMORY_SIDE,
    SassMicroProfiler,
    arch_number,
)

#: sub-word (8/16-bit) global accesses inside loops before it is worth packing them
MIN_SUBWORD_IN_LOOPS = 2
#: prior: a cp.async/TMA pipeline overlapping the next tile's load with this tile's math
ASYNC_COPY_GAIN = 0.2


class NarrowGlobalAccess(SassMicroProfiler):
    """Global loads/stores of 32 bits or less where a wider access fits: runs of accesses off
    one base register at consecutive offsets (``[R6.64]``, ``[R6.64+0x4]``, ...), which one
    64/128-bit access would cover, and 8/16-bit element accesses inside loops."""

    name = "sass_narrow_global_access"
    description = "32-bit (or narrower) global loads/stores where 128-bit accesses fit"
    applies_to = MEMORY_SIDE

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        f = entry.features
        subword = f.global_subword_in_loops >= MIN_SUBWORD_IN_LOOPS
        # runs outside loops count only in loop-free kernels (one element group per thread);
        # elsewhere they are prologue/epilogue code that runs once per thread
        runs = f.vectorizable_in_loops if f.loops else f.vectorizable_accesses
        if runs < 2 and not subword:
            return []
        parts = []
        if f.vectorizable_accesses >= 2:
            parts.append(f"{f.vectorizable_accesses} narrow global accesses in {f.vectorizable_groups} "
                         f"run(s) at consecutive offsets of one base address "
                         f"({f.vectorizable_in_loops} inside loops): one LDG/STG.128 would cover "
                         "each run of four")
        if subword:
            parts.append(f"{f.global_subword_in_loops} 8/16-bit global accesses inside loops")
        # instructions saved per loop iteration (a run of four 32-bit accesses becomes one),
        # as a share of the loop: memory instructions issue slots and LSU bandwidth
        saved = f.vectorizable_in_loops * 0.75 + f.global_subword_in_loops * 0.5
        gain = saved / max(1, f.instructions_in_loops)
        lines = [i for i in entry.kernel.executed if i.opcode in ("LDG", "STG")
                 and isa.access_bits(i.opcode, i.modifiers) <= 32 and i.in_loop]
        return [self.finding(
            entry, "medium" if (f.vectorizable_in_loops or subword) else "low",
            "Narrow global memory accesses",
            "; ".join(parts) + f". The kernel has {f.global_wide} 64/128-bit global accesses.",
            "Load and store 16 bytes per thread: float4/int4 (or half2/uint4 for 16-bit data, "
            "8 halves per access) on 16-byte aligned pointers (check data_ptr() % 16 and the "
            "contiguous stride), or __ldg on a reinterpret_cast<const float4*>.",
            gain, {"vectorizable_accesses": f.vectorizable_accesses,
                   "vectorizable_in_loops": f.vectorizable_in_loops,
                   "subword_in_loops": f.global_subword_in_loops,
                   "global_wide": f.global_wide},
            list(f.vectorizable_examples) or lines)]


class LocalMemory(SassMicroProfiler):
    """Local-memory traffic (LDL/STL): register spills or a per-thread array that ptxas could
    not keep in registers (dynamic indexing)."""

    name = "sass_local_memory"
    description = "local-memory loads/stores (LDL/STL): register spills and dynamically indexed arrays"
    applies_to = frozenset({ANY})

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        f = entry.features
        res = entry.kernel.resources
        spill_st = (res.spill_store_bytes or 0) if res else 0
        spill_ld = (res.spill_load_bytes or 0) if res else 0
        traffic = f.local_loads + f.local_stores
        if traffic == 0 and spill_st == 0 and spill_ld == 0:
            return []
        spills = spill_st > 0 or spill_ld > 0
        if f.local_in_loops and spills:
            severity = "high"
        elif f.local_in_loops:
            severity = "medium"
        else:
            severity = "low"
        stack = res.stack_bytes if res and res.stack_bytes is not None else None
        regs = res.registers if res and res.registers is not None else None
        what = (f"ptxas spilled {spill_st} B of stores and {spill_ld} B of loads" if spills else
                "no spills reported, so a per-thread array lives in local memory (indexed with "
                "runtime values)")
        message = (f"{f.local_loads} LDL and {f.local_stores} STL instructions, {f.local_in_loops} "
                   f"inside loops; {what}"
                   + (f"; stack frame {stack} B" if stack is not None else "")
                   + (f", {regs} registers" if regs is not None else "") + ".")
        if spills:
            action = ("Cut register pressure: relax __launch_bounds__ min-blocks or -maxrregcount, "
                      "shrink the per-thread tile or unroll factor, keep fewer values live "
                      "across the loop.")
        else:
            action = ("Index the per-thread array only with compile-time constants (fully "
                      "unrolled loops) so it stays in registers, or move it to shared memory.")
        # prior: a local access in a loop costs about two ordinary instructions' time (it
        # goes through L1 like a global access); outside loops it is noise
        gain = min(0.5, 2.0 * f.local_in_loops / max(1, f.instructions_in_loops)) if f.local_in_loops else 0.02
        lines = [i for i in entry.kernel.executed if i.opcode in ("LDL", "STL")]
        lines.sort(key=lambda i: not i.in_loop)
        return [self.finding(entry, severity, "Local-memory traffic" + (" from register spills" if spills else ""),
                             message, action, gain,
                             {"local_loads": f.local_loads, "local_stores": f.local_stores,
                              "local_in_loops": f.local_in_loops, "spill_store_bytes": spill_st,
                              "spill_load_bytes": spill_ld, "stack_bytes": stack or 0}, lines)]


class NoAsyncCopy(SassMicroProfiler):
    """Tiled loops that stage global data into shared memory through registers
    (LDG -> STS -> BAR in one loop) on sm_80+, with no LDGSTS (cp.async) and no TMA."""

    name = "sass_no_async_copy"
    description = "shared-memory tiling through registers without cp.async (LDGSTS) or TMA"
    applies_to = MEMORY_SIDE | COMPUTE_SIDE

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        f = entry.features
        if not f.tiled_loops or f.async_copies or arch_number(entry.kernel.arch) < 80:
            return []
        lines = [i for i in entry.kernel.executed if i.in_loop and i.opcode in ("LDG", "STS", "BAR")]
        hopper = arch_number(entry.kernel.arch) >= 90
        return [self.finding(
            entry, "medium", "Tiles staged through registers, no async copy",
            f"{f.tiled_loops} loop(s) load global memory into registers, store them to shared "
            f"memory ({f.shared_stores_in_loops} STS) and wait at {f.barriers_in_loops} barrier(s) "
            "per iteration, with no LDGSTS or TMA: each tile's load latency is exposed.",
            "Stage tiles with cp.async (cuda::memcpy_async / __pipeline_memcpy_async, 16-byte "
            "copies) into a double buffer and wait on the previous stage"
            + (", or TMA (cp.async.bulk.tensor) with mbarriers on Hopper" if hopper else "") + ".",
            ASYNC_COPY_GAIN, {"tiled_loops": f.tiled_loops, "shared_stores_in_loops": f.shared_stores_in_loops,
                              "barriers_in_loops": f.barriers_in_loops}, lines)]
