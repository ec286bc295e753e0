"""What SASS opcodes do: instruction classes, tensor-core and memory opcodes, access widths.

Opcode names are NVIDIA's (CUDA binary utilities documentation, "Instruction Set Reference"
for Ampere, Hopper and Blackwell). Classes are coarse on purpose: they feed the
instruction-mix summary and the micro-profilers' counts.
"""

from __future__ import annotations

#: warp-level (Volta..Ada, also Hopper) and warpgroup-level (Hopper: *GMMA) tensor-core MMAs,
#: plus Blackwell's tcgen05 forms (UTC*MMA)
TENSOR_OPCODES = frozenset({
    "HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA",
    "HGMMA", "IGMMA", "QGMMA", "BGMMA",
})
WARPGROUP_MMA_OPCODES = frozenset({"HGMMA", "IGMMA", "QGMMA", "BGMMA"})
WARP_MMA_OPCODES = frozenset({"HMMA", "IMMA", "QMMA", "BMMA"})

FP32_OPCODES = frozenset({"FADD", "FMUL", "FFMA", "FMNMX", "FSET", "FSETP", "FSEL", "FCHK",
                          "FSWZADD", "FADD2", "FMUL2", "FFMA2", "FMNMX3", "FADD32I", "FMUL32I",
                          "FFMA32I"})
FP32_ARITH_OPCODES = frozenset({"FADD", "FMUL", "FFMA", "FADD2", "FMUL2", "FFMA2", "FADD32I",
                                "FMUL32I", "FFMA32I"})
FP32_FMA_OPCODES = frozenset({"FFMA", "FFMA2", "FFMA32I"})
FP16_OPCODES = frozenset({"HADD2", "HMUL2", "HFMA2", "HSET2", "HSETP2", "HMNMX2"})
FP64_OPCODES = frozenset({"DADD", "DMUL", "DFMA", "DSETP", "DMNMX", "DSET"})
FP64_ARITH_OPCODES = frozenset({"DADD", "DMUL", "DFMA"})
CONVERSION_OPCODES = frozenset({"F2F", "F2I", "I2F", "I2I", "F2FP", "I2FP", "F2IP", "FRND"})
SPECIAL_FUNCTION_OPCODES = frozenset({"MUFU"})
GLOBAL_MEMORY_OPCODES = frozenset({"LDG", "STG", "RED", "REDG", "ATOMG", "ATOM", "LD", "ST"})
ASYNC_COPY_OPCODES = frozenset({"LDGSTS", "UTMALDG", "UTMASTG", "UTMAPF", "UBLKCP", "UTMACCTL",
                                "UBLKRED", "UTMAREDG"})
SHARED_MEMORY_OPCODES = frozenset({"LDS", "STS", "LDSM", "STSM", "ATOMS"})
LOCAL_MEMORY_OPCODES = frozenset({"LDL", "STL"})
CONSTANT_OPCODES = frozenset({"LDC", "ULDC"})
SYNC_OPCODES = frozenset({"BAR", "MEMBAR", "DEPBAR", "LDGDEPBAR", "WARPSYNC", "BSSY", "BSYNC",
                          "WARPGROUP", "SYNCS", "ERRBAR", "CCTL", "ARRIVES", "FENCE", "NANOSLEEP",
                          "BMOV", "CGAERRBAR", "ELECT", "VOTE", "VOTEU", "MATCH"})
CONTROL_OPCODES = frozenset({"BRA", "BRX", "BRXU", "JMP", "JMX", "CALL", "RET", "EXIT", "BPT",
                             "YIELD", "KILL", "RTT", "WARPSYNC_BRA", "ACQBULK", "ENDCOLLECTIVE"})
WARP_OPCODES = frozenset({"SHFL", "REDUX"})
MOVE_OPCODES = frozenset({"MOV", "SEL", "PRMT", "S2R", "S2UR", "CS2R", "P2R", "R2P", "R2UR",
                          "MOV32I", "PLOP3", "PSETP", "B2R", "R2B"})
INTEGER_OPCODES = frozenset({"IMAD", "IADD3", "IADD", "IADD32I", "LOP3", "LOP", "LOP32I", "SHF",
                             "SHL", "SHR", "ISETP", "IABS", "IMNMX", "LEA", "POPC", "FLO", "BREV",
                             "VIADD", "VIMNMX", "VIMNMX3", "IDP", "IDP4A", "BMSK", "SGXT", "IMUL",
                             "IMUL32I", "ICMP", "VIADDMNMX", "IMAD32I", "ISCADD", "XMAD", "VABSDIFF",
                             "VABSDIFF4", "IMNMX3", "IADD3X"})
BRANCH_OPCODES = frozenset({"BRA", "BRX", "BRXU", "JMP", "JMX"})

#: order used by the instruction-mix summary
CLASSES = ("tensor", "fp32", "fp16", "fp64", "integer", "conversion", "special_function",
           "global_memory", "async_copy", "shared_memory", "local_memory", "constant", "warp",
           "move", "sync", "control", "uniform", "other")


def instruction_class(opcode: str, modifiers: tuple[str, ...] = ()) -> str:
    """The coarse class of an opcode (see :data:`CLASSES`)."""
    if opcode in TENSOR_OPCODES or (opcode.startswith("UTC") and "MMA" in opcode):
        return "tensor"
    if opcode in ASYNC_COPY_OPCODES or opcode.startswith("UTMA"):
        return "async_copy"
    if opcode in FP32_OPCODES:
        return "fp32"
    if opcode in FP16_OPCODES:
        # HFMA2.MMA with zero operands is ptxas' idiom for a register move on the FMA-heavy pipe
        return "fp16"
    if opcode in FP64_OPCODES:
        return "fp64"
    if opcode in CONVERSION_OPCODES:
        return "conversion"
    if opcode in SPECIAL_FUNCTION_OPCODES:
        return "special_function"
    if opcode in GLOBAL_MEMORY_OPCODES:
        return "global_memory"
    if opcode in SHARED_MEMORY_OPCODES:
        return "shared_memory"
    if opcode in LOCAL_MEMORY_OPCODES:
        return "local_memory"
    if opcode in CONSTANT_OPCODES:
        return "constant"
    if opcode in WARP_OPCODES:
        return "warp"
    if opcode in MOVE_OPCODES:
        return "move"
    if opcode in SYNC_OPCODES:
        return "sync"
    if opcode in CONTROL_OPCODES:
        return "control"
    if opcode in INTEGER_OPCODES:
        return "integer"
    if opcode.startswith("U"):
        return "uniform"
    return "other"


#: width modifiers of loads/stores, in bits per thread
_WIDTH_BITS = {"U8": 8, "S8": 8, "8": 8, "U16": 16, "S16": 16, "16": 16, "64": 64, "128": 128,
               "256": 256}


def access_bits(opcode: str, modifiers: tuple[str, ...]) -> int:
    """Bits moved per thread by a load/store/atomic (``LDG.E.128`` -> 128); 32 by default."""
    for mod in modifiers:
        if mod in _WIDTH_BITS:
            return _WIDTH_BITS[mod]
    return 32


def is_move_idiom(opcode: str, modifiers: tuple[str, ...], operands: str) -> bool:
    """``HFMA2.MMA Rx, -RZ, RZ, a, b`` loads a constant: a move, not FP16 math."""
    return opcode == "HFMA2" and "MMA" in modifiers and "-RZ, RZ" in operands
