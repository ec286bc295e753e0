"""Facts about one kernel's instruction stream that the micro-profilers judge.

Everything here is counted from the disassembly (static counts, not executed counts):
an instruction inside a loop runs once per iteration, so "in loop" counts are the ones
that matter for time.

Matrix-shaped work (the no-tensor-core check) is recognised per loop, from three
signals that a multiply-accumulate over reused operands is happening:

* accumulating FMAs: ``FFMA``/``HFMA2``/``DFMA`` whose sources are all registers (no
  immediate, no constant bank). Polynomial evaluation in activation functions
  (``FFMA R0, R1, R0, -0.0523``) carries immediates and is not counted; ``HFMA2.MMA Rx,
  -RZ, RZ, ...`` is a move idiom and is not counted.
* shared-memory staging: the same loop reads shared memory (``LDS``/``LDSM``) and
  synchronises the block (``BAR``): tiles loaded once and read by many threads, the
  signature of tiled GEMM and convolution.
* register blocking: at least 2 accumulating FMAs per 32-bit value loaded in the loop
  (each operand feeds several outputs, an outer-product micro-tile).

A loop is matrix-shaped when it has at least 8 accumulating FMAs (an unrolled
multiply-accumulate body; 8 = the smallest useful unroll of a k-loop) and either staging or
blocking, or at least 4 when the kernel's name says gemm/matmul/conv/bmm/linear/attention.
A dot-product loop over global memory (GEMV, a row reduction) has neither reuse signal and
is not counted: tensor cores do not help bandwidth-bound work.
"""

from __future__ import annotations

import re
from collections import Counter

import attrs

from kernelpro_plugins_sass import isa
from kernelpro_plugins_sass.disasm import Instruction, Loop, SassKernel

#: a loop body needs this many accumulating FMAs to count as a matrix-style inner loop
MIN_MATRIX_FMAS = 8
#: with a matrix-like kernel name, fewer suffice
MIN_MATRIX_FMAS_NAMED = 4
#: register blocking: accumulating FMAs per 32-bit value loaded in the loop (a 4x4 micro-tile
#: gives exactly 2: 8 loads feed 16 FMAs; a dot product gives 0.5)
MIN_FMAS_PER_LOADED_WORD = 2.0
MATRIX_NAME = re.compile(r"gemm|matmul|_mm_|\bmm\b|bmm|conv|linear|attn|attention|mma",
                         re.IGNORECASE)

#: if-conversion shows as guarded instructions and as selects; both issue for every lane
SELECT_OPCODES = frozenset({"FSEL", "SEL"})
#: instruction classes that do a thread's work; predicated control, synchronisation, moves
#: (R2UR, PLOP3, ... under the elect/producer predicate of warp-specialised kernels) are
#: bookkeeping
WORK_CLASSES = frozenset({"fp32", "fp16", "fp64", "integer", "conversion", "special_function",
                          "global_memory", "shared_memory", "local_memory", "tensor"})
#: loops shorter than this (executed instructions) are waits and elect-one issue loops
MIN_PREDICATION_LOOP = 16

_REGISTER = re.compile(r"^-?\|?R(\d+|Z)\|?(\.reuse)?$")
_MEM_BASE = re.compile(r"\[(R\d+)(?:\.64)?(?:\.U32)?(?:\s*\+\s*(-?0x[0-9a-fA-F]+))?\]\s*$")


def _sources(ins: Instruction) -> list[str]:
    ops = [o.strip() for o in ins.operands.split(",")]
    return ops[1:]


def is_accumulating_fma(ins: Instruction) -> bool:
    """A register-only FMA: ``FFMA Rd, Ra, Rb, Rc`` (also HFMA2 / DFMA), the shape of
    ``acc += a * b``. Immediates, constant-bank operands and zero registers exclude it."""
    if ins.opcode not in ("FFMA", "HFMA2", "DFMA", "FFMA2"):
        return False
    if isa.is_move_idiom(ins.opcode, ins.modifiers, ins.operands):
        return False
    srcs = _sources(ins)
    if len(srcs) < 3:
        return False
    for op in srcs[:3]:
        m = _REGISTER.match(op)
        if not m or m.group(1) == "Z":
            return False
    return True


def _words(ins: Instruction) -> float:
    return isa.access_bits(ins.opcode, ins.modifiers) / 32.0


@attrs.frozen
class LoopFacts:
    start_address: int
    end_address: int
    depth: int
    instructions: int
    accumulating_fmas: int
    shared_loads: int
    global_loads: int
    loaded_words: float
    has_barrier: bool
    matrix_shaped: bool


@attrs.frozen
class KernelFeatures:
    """Static counts of one kernel. ``*_in_loops`` count instructions inside any loop."""

    instructions: int
    instructions_in_loops: int
    class_counts: dict[str, int]
    class_counts_in_loops: dict[str, int]
    loops: int
    max_loop_depth: int
    loop_facts: tuple[LoopFacts, ...]
    # tensor cores
    warp_mma: int  # HMMA / IMMA ...
    warpgroup_mma: int  # HGMMA / IGMMA / QGMMA ...
    tensor_ops: int
    matrix_loops: int
    matrix_fmas_in_loops: int
    accumulating_fmas_in_loops: int
    # global memory
    global_loads: int
    global_stores: int
    global_narrow_in_loops: int  # <= 32-bit LDG/STG inside loops
    global_wide: int  # 64/128-bit LDG/STG
    global_subword_in_loops: int  # 8/16-bit LDG/STG inside loops
    vectorizable_groups: int  # runs of >= 2 narrow accesses at consecutive offsets of one base
    vectorizable_accesses: int
    vectorizable_in_loops: int
    vectorizable_examples: tuple[str, ...]
    # local memory
    local_loads: int
    local_stores: int
    local_in_loops: int
    # fp64
    fp64_arith: int
    fp64_in_loops: int
    fp32_arith: int
    fp64_conversions: int  # F2F between F32 and F64
    # integer division
    division_setups: int  # I2F.RP + MUFU.RCP: reciprocal of a runtime integer divisor
    division_setups_in_loops: int
    division_quotients_in_loops: int  # IMAD.HI with register sources inside loops
    division_calls_in_loops: int  # CALLs inside loops to ptxas' 64-bit division subroutine
    # async copies / tiling
    async_copies: int  # LDGSTS, TMA, bulk copies
    tiled_loops: int  # loops with global load -> shared store -> barrier
    shared_stores_in_loops: int
    barriers_in_loops: int
    # predication
    guarded: int
    guarded_in_loops: int  # guarded work instructions in the substantial loops
    selects_in_loops: int
    predicated_fraction: float  # (guarded + selects) / work instructions, substantial loops (or kernel)
    # misc
    hgmma_waits: int  # WARPGROUP.DEPBAR / wait instructions
    name_says_matrix: bool
    # tensor-core instruction forms and their counts, e.g. {"HGMMA.64x128x16.F32.BF16": 4}
    tensor_mnemonics: dict[str, int] = attrs.field(factory=dict)

    def metrics(self) -> dict[str, float]:
        """Flat numbers for :class:`kernelpro.api.KernelProfile.metrics`."""
        out: dict[str, float] = {}
        for field in attrs.fields(KernelFeatures):
            value = getattr(self, field.name)
            if isinstance(value, bool):
                out[f"sass.{field.name}"] = float(value)
            elif isinstance(value, (int, float)):
                out[f"sass.{field.name}"] = float(value)
        for klass, n in self.class_counts.items():
            out[f"sass.class.{klass}"] = float(n)
        for klass, n in self.class_counts_in_loops.items():
            out[f"sass.class_in_loops.{klass}"] = float(n)
        return out


def _loop_facts(kernel_name: str, loop: Loop, body: list[Instruction]) -> LoopFacts:
    fmas = sum(1 for i in body if is_accumulating_fma(i))
    shared_loads = sum(1 for i in body if i.opcode in ("LDS", "LDSM"))
    global_loads = sum(1 for i in body if i.opcode in ("LDG", "LD"))
    words = sum(_words(i) for i in body if i.opcode in ("LDS", "LDSM", "LDG", "LD"))
    has_barrier = any(i.opcode == "BAR" for i in body)
    staged = shared_loads >= 2 and has_barrier
    blocked = words > 0 and fmas / words >= MIN_FMAS_PER_LOADED_WORD
    named = MATRIX_NAME.search(kernel_name) is not None
    matrix = (fmas >= MIN_MATRIX_FMAS and (staged or blocked)) or (
        named and fmas >= MIN_MATRIX_FMAS_NAMED and (staged or blocked or words > 0))
    return LoopFacts(loop.start_address, loop.end_address, loop.depth, len(body), fmas,
                     shared_loads, global_loads, words, has_barrier, matrix)


def _vectorizable(accesses: list[Instruction]) -> tuple[int, int, int, list[str]]:
    """Runs of narrow global accesses of one opcode off one base register whose offsets step
    by the access width (``[R6.64]``, ``[R6.64+0x4]``, ``[R6.64+0x8]`` ...): the compiler
    could not prove alignment and split what one 64/128-bit access would do."""
    groups: dict[tuple[str, str, int, bool], list[tuple[int, Instruction]]] = {}
    for ins in accesses:
        bits = isa.access_bits(ins.opcode, ins.modifiers)
        if bits > 32:
            continue
        addr_operand = ins.operands.split(",")[0] if ins.opcode in ("STG", "ST") else \
            ins.operands.split(",")[-1]
        m = _MEM_BASE.search(addr_operand.strip())
        if not m:
            continue
        offset = int(m.group(2), 16) if m.group(2) else 0
        key = (ins.opcode, m.group(1), bits, ins.in_loop)
        groups.setdefault(key, []).append((offset, ins))
    n_groups = n_acc = n_loop = 0
    examples: list[str] = []
    for (opcode, base, bits, in_loop), items in groups.items():
        offsets = sorted({o for o, _ in items})
        step = bits // 8
        run = 1
        best = 1
        for a, b in zip(offsets, offsets[1:]):
            run = run + 1 if b - a == step else 1
            best = max(best, run)
        if best >= 2:
            n_groups += 1
            n_acc += best
            n_loop += best if in_loop else 0
            if len(examples) < 3:
                examples.append("; ".join(i.text for _, i in sorted(items, key=lambda t: t[0])[:4]))
    return n_groups, n_acc, n_loop, examples


def _division_setups(executed: list[Instruction]) -> list[Instruction]:
    """I2F.*RP followed within 6 instructions by MUFU.RCP: ptxas' reciprocal estimate for a
    32-bit integer division by a value unknown at compile time."""
    sites = []
    for k, ins in enumerate(executed):
        if ins.opcode == "I2F" and "RP" in ins.modifiers:
            window = executed[k + 1:k + 7]
            if any(w.opcode == "MUFU" and "RCP" in w.modifiers for w in window):
                sites.append(ins)
    return sites


def _division_calls(executed: list[Instruction]) -> list[Instruction]:
    """CALLs to ptxas' 64-bit integer division/modulo subroutine: nvdisasm names it
    (``$__internal_0_$__cuda_sm20_div_s64``, ``..._rem_u64``); in cuobjdump's listing the
    target is an address, recognised by a reciprocal estimate (I2F.U64.RP, or MUFU.RCP64H)
    within its first 40 instructions."""
    index = {i.address: k for k, i in enumerate(executed)}
    sites = []
    for ins in executed:
        if ins.opcode != "CALL":
            continue
        if re.search(r"__cuda_sm\d+_(div|rem)", ins.operands):
            sites.append(ins)
            continue
        hexes = re.findall(r"0x([0-9a-fA-F]+)", ins.operands)
        start = index.get(int(hexes[-1], 16)) if hexes else None
        if start is None:
            continue
        body = executed[start:start + 40]
        if any((b.opcode == "MUFU" and "RCP64H" in b.modifiers)
               or (b.opcode == "I2F" and "RP" in b.modifiers) for b in body):
            sites.append(ins)
    return sites


def _is_register_imad_hi(ins: Instruction) -> bool:
    if ins.opcode != "IMAD" or "HI" not in ins.modifiers:
        return False
    srcs = _sources(ins)
    return len(srcs) >= 2 and all(_REGISTER.match(s) for s in srcs[:2])


def kernel_features(kernel: SassKernel) -> KernelFeatures:
    """Count everything the micro-profilers need for ``kernel``."""
    executed = list(kernel.executed)
    in_loops = [i for i in executed if i.in_loop]
    classes = Counter(i.klass for i in executed)
    classes_loop = Counter(i.klass for i in in_loops)

    facts = []
    for loop in kernel.loops:
        body = [i for i in executed if loop.start_address <= i.address <= loop.end_address]
        facts.append(_loop_facts(kernel.name, loop, body))
    matrix_loops = [f for f in facts if f.matrix_shaped]
    # innermost matrix loops only, so nested loops do not count their FMAs twice
    innermost = [f for f in matrix_loops if not any(
        g is not f and f.start_address <= g.start_address and g.end_address <= f.end_address
        for g in matrix_loops)]

    global_acc = [i for i in executed if i.opcode in ("LDG", "STG")]
    narrow_loop = [i for i in global_acc if i.in_loop and isa.access_bits(i.opcode, i.modifiers) <= 32]
    subword_loop = [i for i in narrow_loop if isa.access_bits(i.opcode, i.modifiers) < 32]
    groups, vec_acc, vec_loop, examples = _vectorizable(global_acc)

    conversions = [i for i in executed if i.opcode == "F2F" and "F64" in i.modifiers
                   and "F32" in i.modifiers]
    setups = _division_setups(executed)

    tiled = 0
    for loop in kernel.loops:
        body = [i for i in executed if loop.start_address <= i.address <= loop.end_address]
        if (any(i.opcode in ("LDG", "LD") for i in body) and any(i.opcode == "STS" for i in body)
                and any(i.opcode == "BAR" for i in body)):
            tiled += 1

    # predication is judged on the work instructions of the substantial loops: spin-waits on
    # mbarriers and elect-one issue loops (a handful of instructions, all guarded by
    # ELECT/PHASECHK predicates) are control, not if-converted data-dependent branches
    big = [lp for lp in kernel.loops
           if sum(1 for i in executed if lp.start_address <= i.address <= lp.end_address) >= MIN_PREDICATION_LOOP]
    in_big = [i for i in executed if any(lp.start_address <= i.address <= lp.end_address for lp in big)]
    scope = in_big if in_big else (executed if not in_loops else [])
    guard_scope = [i for i in scope if i.klass in WORK_CLASSES]
    guarded_scope = sum(1 for i in guard_scope if i.guarded or i.opcode in SELECT_OPCODES)

    return KernelFeatures(
        instructions=len(executed),
        instructions_in_loops=len(in_loops),
        class_counts=dict(classes),
        class_counts_in_loops=dict(classes_loop),
        loops=len(kernel.loops),
        max_loop_depth=max((lp.depth for lp in kernel.loops), default=0),
        loop_facts=tuple(facts),
        warp_mma=sum(1 for i in executed if i.opcode in isa.WARP_MMA_OPCODES),
        warpgroup_mma=sum(1 for i in executed if i.opcode in isa.WARPGROUP_MMA_OPCODES),
        tensor_ops=classes.get("tensor", 0),
        matrix_loops=len(matrix_loops),
        matrix_fmas_in_loops=sum(f.accumulating_fmas for f in innermost),
        accumulating_fmas_in_loops=sum(1 for i in in_loops if is_accumulating_fma(i)),
        global_loads=sum(1 for i in global_acc if i.opcode == "LDG"),
        global_stores=sum(1 for i in global_acc if i.opcode == "STG"),
        global_narrow_in_loops=len(narrow_loop),
        global_wide=sum(1 for i in global_acc if isa.access_bits(i.opcode, i.modifiers) > 32),
        global_subword_in_loops=len(subword_loop),
        vectorizable_groups=groups,
        vectorizable_accesses=vec_acc,
        vectorizable_in_loops=vec_loop,
        vectorizable_examples=tuple(examples),
        local_loads=sum(1 for i in executed if i.opcode == "LDL"),
        local_stores=sum(1 for i in executed if i.opcode == "STL"),
        local_in_loops=sum(1 for i in in_loops if i.opcode in ("LDL", "STL")),
        fp64_arith=sum(1 for i in executed if i.opcode in isa.FP64_ARITH_OPCODES),
        fp64_in_loops=sum(1 for i in in_loops if i.klass == "fp64"),
        fp32_arith=sum(1 for i in executed if i.opcode in isa.FP32_ARITH_OPCODES),
        fp64_conversions=len(conversions),
        division_setups=len(setups),
        division_setups_in_loops=sum(1 for i in setups if i.in_loop),
        division_quotients_in_loops=sum(1 for i in in_loops if _is_register_imad_hi(i)),
        division_calls_in_loops=sum(1 for i in _division_calls(executed) if i.in_loop),
        async_copies=classes.get("async_copy", 0),
        tiled_loops=tiled,
        shared_stores_in_loops=sum(1 for i in in_loops if i.opcode == "STS"),
        barriers_in_loops=sum(1 for i in in_loops if i.opcode == "BAR"),
        guarded=sum(1 for i in executed if i.guarded and i.klass != "control"),
        guarded_in_loops=sum(1 for i in guard_scope if i.guarded),
        selects_in_loops=sum(1 for i in guard_scope if i.opcode in SELECT_OPCODES),
        predicated_fraction=guarded_scope / len(guard_scope) if guard_scope else 0.0,
        hgmma_waits=sum(1 for i in executed if i.opcode == "WARPGROUP" and "DEPBAR" in i.modifiers),
        name_says_matrix=MATRIX_NAME.search(kernel.name) is not None,
        tensor_mnemonics=dict(Counter(i.mnemonic for i in executed if i.klass == "tensor")),
    )
