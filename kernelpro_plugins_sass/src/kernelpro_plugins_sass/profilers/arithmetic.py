"""Arithmetic checks: FP64 in FP32 kernels, integer division in loops, heavy predication."""

from __future__ import annotations

from kernelpro.api import Finding, GpuSpec

from kernelpro_plugins_sass.features import SELECT_OPCODES, WORK_CLASSES
from kernelpro_plugins_sass.payload import KernelEntry
from kernelpro_plugins_sass.profilers.base import COMPUTE_SIDE, SassMicroProfiler

#: FP32/FP64 rate ratio at or above which FP64 is a cliff (consumer and L40-class parts: 64)
SLOW_FP64_RATIO = 8.0
#: H100/H200 datasheet FP32/FP64 ratio used when no GPU spec is given
DEFAULT_FP64_RATIO = 67.0 / 34.0
#: instructions of ptxas' 32-bit division sequence, per division (I2F.RP, MUFU.RCP, F2I,
#: IMAD.HI, fix-ups; counted on sm_90 listings)
DIVISION_SEQUENCE_LEN = 15
#: guarded share of loop instructions that counts as heavy predication, and the least number
#: of guarded instructions: bounds checks and the odd guarded store stay below (~10-22% in
#: the tiled and cp.async fixtures)
HEAVY_PREDICATION_FRACTION = 0.30
MIN_GUARDED = 8


class Fp64InFp32(SassMicroProfiler):
    """FP64 arithmetic or F32<->F64 conversions in a kernel whose arithmetic is mostly FP32:
    the trace of a double literal (``0.5`` instead of ``0.5f``) or a double math call."""

    name = "sass_fp64_in_fp32"
    description = "FP64 instructions (DADD/DMUL/DFMA, F2F.F64) in an FP32 kernel"
    applies_to = COMPUTE_SIDE

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        f = entry.features
        mixed = f.fp64_conversions > 0 and f.fp32_arith > 0
        mostly_fp32 = f.fp64_arith > 0 and f.fp32_arith > 2 * f.fp64_arith
        if not (mixed or mostly_fp32):
            return []
        ratio = (gpu.fp32_tflops / gpu.fp64_tflops) if gpu and gpu.fp64_tflops else DEFAULT_FP64_RATIO
        in_loop = f.fp64_in_loops > 0
        severity = "high" if in_loop and ratio >= SLOW_FP64_RATIO else ("medium" if in_loop else "low")
        fp64_share = (f.fp64_in_loops + f.fp64_conversions) / max(1, f.instructions_in_loops or f.instructions)
        # the FP64 share of the work, run at the FP32 rate instead
        gain = fp64_share * (1.0 - 1.0 / ratio) if ratio > 1 else fp64_share * 0.5
        lines = [i for i in entry.kernel.executed if i.klass == "fp64"
                 or (i.opcode == "F2F" and "F64" in i.modifiers)]
        return [self.finding(
            entry, severity, "FP64 math in an FP32 kernel",
            f"{f.fp64_arith} FP64 arithmetic instructions ({f.fp64_in_loops} FP64 instructions in "
            f"loops) and {f.fp64_conversions} F32<->F64 conversions next to {f.fp32_arith} FP32 "
            f"ones; FP64 runs at 1/{ratio:.0f} of the FP32 rate on this GPU and each conversion "
            "is a slow-pipe instruction.",
            "Write float literals (0.5f, 1.0f), call float math (expf, tanhf, sqrtf, fabsf) and "
            "avoid double temporaries; nvcc -Xptxas --warn-on-double-precision-use lists the spots.",
            gain, {"fp64_arith": f.fp64_arith, "fp64_in_loops": f.fp64_in_loops,
                   "fp64_conversions": f.fp64_conversions, "fp32_arith": f.fp32_arith,
                   "fp32_fp64_rate_ratio": ratio}, lines)]


class IntDivisionInLoop(SassMicroProfiler):
    """32-bit integer division or modulo by a runtime value inside a loop: ptxas' sequence
    (I2F.RP + MUFU.RCP reciprocal, IMAD.HI quotient, compare-and-fix) runs per iteration; even
    when the reciprocal is hoisted, the quotient and fix-ups stay in the loop."""

    name = "sass_int_division_in_loop"
    description = "integer division / modulo by a runtime value inside loops"
    applies_to = COMPUTE_SIDE

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        f = entry.features
        in_loop = (f.division_setups_in_loops > 0 or f.division_calls_in_loops > 0
                   or (f.division_setups > 0 and f.division_quotients_in_loops > 0))
        if not in_loop:
            return []
        hoisted = f.division_setups_in_loops == 0 and f.division_calls_in_loops == 0
        per_iter = (f.division_quotients_in_loops * DIVISION_SEQUENCE_LEN // 2 if hoisted
                    else f.division_setups_in_loops * DIVISION_SEQUENCE_LEN)
        share = min(1.0, per_iter / max(1, f.instructions_in_loops))
        lines = [i for i in entry.kernel.executed if (i.opcode == "I2F" and "RP" in i.modifiers)
                 or (i.opcode == "CALL" and i.in_loop)
                 or (i.opcode == "MUFU" and "RCP" in i.modifiers)
                 or (i.opcode == "IMAD" and "HI" in i.modifiers and i.in_loop)]
        where = ("the reciprocal is hoisted out of the loop, but "
                 f"{f.division_quotients_in_loops} quotient estimate(s) (IMAD.HI) and their fix-ups run per iteration"
                 if hoisted else f"{f.division_setups_in_loops} full division sequence(s) run per iteration"
                + (f", and {f.division_calls_in_loops} call(s) to the 64-bit division subroutine"
                   if f.division_calls_in_loops else ""))
        return [self.finding(
            entry, "medium" if share >= 0.2 else "low", "Integer division by a runtime value in a loop",
            f"{f.division_setups} runtime integer division(s) (I2F.RP + MUFU.RCP); {where}: about "
            f"{per_iter} of {f.instructions_in_loops} loop instructions ({share:.0%}).",
            "Precompute a magic multiplier and shift once (fast divmod, as CUTLASS FastDivmod), "
            "make the divisor a compile-time constant or power of two (template parameter), or "
            "carry row/column indices incrementally instead of i / width and i % width.",
            # a precomputed magic multiplier replaces the ~15-instruction sequence with ~3
            share * 0.8, {"division_setups": f.division_setups,
                          "division_setups_in_loops": f.division_setups_in_loops,
                          "division_quotients_in_loops": f.division_quotients_in_loops,
                          "division_calls_in_loops": f.division_calls_in_loops,
                          "loop_share": share}, lines)]


class HeavyPredication(SassMicroProfiler):
    """A large share of loop instructions if-converted: issued under a predicate, or
    selects (FSEL/SEL) choosing between both computed sides. Every lane issues every branch
    body of data-dependent ifs."""

    name = "sass_heavy_predication"
    description = "a large share of instructions issued under predicates (if-converted branches)"
    applies_to = COMPUTE_SIDE

    def check(self, entry: KernelEntry, gpu: GpuSpec | None) -> list[Finding]:
        f = entry.features
        guarded = f.guarded_in_loops + f.selects_in_loops
        if f.predicated_fraction < HEAVY_PREDICATION_FRACTION or guarded < MIN_GUARDED:
            return []
        scope = "loop" if f.instructions_in_loops else "kernel"
        lines = [i for i in entry.kernel.executed if (i.guarded or i.opcode in SELECT_OPCODES)
                 and i.klass in WORK_CLASSES and (i.in_loop or not f.instructions_in_loops)]
        return [self.finding(
            entry, "medium" if f.predicated_fraction >= 0.45 else "low",
            "Heavy predication",
            f"{guarded} of the {scope} work instructions ({f.predicated_fraction:.0%}; control, "
            f"synchronisation and short wait loops excluded) are if-converted ({f.guarded_in_loops} "
            "issue under a predicate, the rest are FSEL/SEL selects): every lane pays for every "
            "branch body.",
            "Make the per-element decisions uniform: sort or bucket elements by mode, hoist "
            "conditions that are uniform per block, use arithmetic selects (fmaxf, copysignf, "
            "masks multiplied in) instead of chains of ifs, or specialise the kernel per mode.",
            # prior: about a third of if-converted work is on lanes whose condition is false
            f.predicated_fraction * 0.3, {"predicated_fraction": f.predicated_fraction,
                                         "guarded_instructions": guarded}, lines)]
