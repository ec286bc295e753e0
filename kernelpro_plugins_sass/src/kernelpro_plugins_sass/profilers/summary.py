"""Instruction-mix summary and ptxas' own performance advisories."""

from __future__ import annotations

from kernelpro.api import ANY, Finding, GpuSpec

from kernelpro_plugins_sass import isa
from kernelpro_plugins_sass.payload import KernelEntry
from kernelpro_plugins_sass.profilers.base import SassMicroProfiler

#: the advisories ptxas prints when it serialises wgmma (C7510-C7516: "wgmma.mma_async
#: instructions are serialized due to ...")
WGMMA_SERIALIZED = "are serialized"
#: the top classes named in the summary line
TOP_CLASSES = 5


class InstructionMix(SassMicroProfiler):
    """Per kernel: instruction classes (whole kernel and inside loops), loops, registers."""

    name = "sass_instruction_mix"
    description = "instruction-mix summary per kernel (info)"
    applies_to = frozenset({ANY})

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        f = entry.features
        if not f.instructions:
            return []
        counts = f.class_counts_in_loops if f.instructions_in_loops else f.class_counts
        total = sum(counts.values())
        ordered = sorted(counts.items(), key=lambda kv: (-kv[1], isa.CLASSES.index(kv[0])
                                                        if kv[0] in isa.CLASSES else 99))
        mix = ", ".join(f"{k} {v / total:.0%}" for k, v in ordered[:TOP_CLASSES])
        res = entry.kernel.resources
        res_text = f" Resources: {res.summary()}." if res else ""
        where = "inside loops" if f.instructions_in_loops else "(no loops)"
        evidence = {f"class.{k}": v for k, v in f.class_counts.items()}
        evidence.update(instructions=f.instructions, instructions_in_loops=f.instructions_in_loops,
                        loops=f.loops, tensor_ops=f.tensor_ops)
        tensor_text = ""
        if f.tensor_mnemonics:
            forms = sorted(f.tensor_mnemonics.items(), key=lambda kv: (-kv[1], kv[0]))
            tensor_text = (f" Tensor-core instructions: {f.tensor_ops} ("
                           + ", ".join(f"{m} x{n}" for m, n in forms[:3])
                           + (", ..." if len(forms) > 3 else "") + ").")
        return [self.finding(
            entry, "info", "Instruction mix",
            f"{entry.kernel.arch or 'unknown arch'}, {f.instructions} instructions, {f.loops} loop(s), "
            f"{f.instructions_in_loops} instructions {where if f.instructions_in_loops else 'in loops'}; "
            f"mix {where}: {mix}.{tensor_text}{res_text}",
            "None by itself: read it with the other findings (tensor share, memory share, "
            "local memory) to see where the kernel spends its issue slots.",
            None, evidence)]


class PtxasAdvisories(SassMicroProfiler):
    """ptxas warnings and (Cnnnn) performance advisories for the kernel, when a compile log
    was available (``.cu``/``.ptx`` compiled here, Triton PTX re-assembled, ``*.log`` in the
    build directory). wgmma serialisation is the costly one."""

    name = "sass_ptxas_advisories"
    description = "ptxas warnings and performance advisories (wgmma serialization C751x, ...)"
    applies_to = frozenset({ANY})
    metrics = ("sass.ptxas_log",)  # asks the collector to rebuild extension logs in stage 2

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        messages = entry.kernel.warnings
        if not messages:
            return []
        serialized = [m for m in messages if WGMMA_SERIALIZED in m]
        warnings = [m for m in messages if "warning" in m.lower()]
        if serialized:
            return [self.finding(
                entry, "high", "ptxas serialized the wgmma pipeline",
                f"{len(serialized)} advisory(ies): {serialized[0]}",
                "Keep the accumulator untouched between wgmma.fence and wgmma.wait_group (no "
                "scaling, conversion or spill of accumulator registers inside the pipeline stage), "
                "give the warpgroup enough registers (setmaxnreg / smaller tile), and issue "
                "back-to-back wgmma ops before one commit and wait.",
                0.3, {"serialized_advisories": len(serialized), "messages": len(messages)},
                tuple(serialized))]
        return [self.finding(
            entry, "low" if warnings else "info", "ptxas advisories",
            f"{len(messages)} ptxas message(s): {messages[0]}",
            "Read the listed advisories; they name the instruction sequence ptxas had to "
            "change (injected waits, arrive/wait insertions, double-precision use).",
            None, {"messages": len(messages), "warnings": len(warnings)}, tuple(messages))]
