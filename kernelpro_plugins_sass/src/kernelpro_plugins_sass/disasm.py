"""Parsing SASS listings (``cuobjdump -sass`` and ``nvdisasm -c``) into per-kernel records.

Each instruction keeps its opcode, modifiers (``LDG.E.128`` -> ``("E", "128")``), operands
and guard predicate. Loops are found from backward branches: a branch at address ``a`` to a
target ``t < a`` closes a loop over ``[t, a]``; an instruction's ``loop_depth`` is the number
of such ranges holding it. (ptxas lays loops out so that the back edge is the branch at the
bottom; the trailing ``BRA self`` after ``EXIT`` is padding and is ignored.)
"""

from __future__ import annotations

import re
from typing import Iterable

import attrs

from kernelpro_plugins_sass import isa
from kernelpro_plugins_sass.resources import ResourceUsage

_INSN = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;?\s*(?:/\*\s*0x[0-9a-fA-F]+\s*\*/)?\s*$")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_CODE_FOR = re.compile(r"code for (sm_\w+)")
_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)")
# nvdisasm's cubin header names the architecture only in its ELF flags ("a": the
# architecture-specific features, EF_CUDA_ACCELERATORS)
_HEADERFLAGS = re.compile(r'^\s*\.headerflags\s+@"([^"]*)"')
_SECTION_TEXT = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_LABEL = re.compile(r"^\s*(\.L_\w+):\s*$")
_HEX = re.compile(r"0x([0-9a-fA-F]+)")
_LABEL_REF = re.compile(r"`\((\.L_\w+)\)")
_LINE_INFO = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')


@attrs.frozen
class Instruction:
    """One SASS instruction. ``address`` is the byte offset in its function."""

    address: int
    opcode: str
    modifiers: tuple[str, ...] = ()
    operands: str = ""
    predicate: str | None = None  # "P0", "!P1", "UP0", "PT", "!PT" (never executes) ...
    branch_target: int | None = None
    loop_depth: int = 0
    source: str | None = None  # "file.cu:12" from line info (nvdisasm -g), when built with it

    @property
    def mnemonic(self) -> str:
        return ".".join((self.opcode,) + self.modifiers)

    @property
    def text(self) -> str:
        guard = f"@{self.predicate} " if self.predicate else ""
        ops = f" {self.operands}" if self.operands else ""
        return f"{guard}{self.mnemonic}{ops}"

    @property
    def klass(self) -> str:
        if isa.is_move_idiom(self.opcode, self.modifiers, self.operands):
            return "move"
        return isa.instruction_class(self.opcode, self.modifiers)

    @property
    def never_executes(self) -> bool:
        """``@!PT`` instructions are scheduling fillers that never run."""
        return self.predicate == "!PT"

    @property
    def guarded(self) -> bool:
        """Executes under a real (non-constant) predicate."""
        return self.predicate is not None and self.predicate not in ("PT", "!PT")

    @property
    def in_loop(self) -> bool:
        return self.loop_depth > 0


@attrs.frozen
class Loop:
    """A loop closed by the backward branch at ``end_address`` to ``start_address``."""

    start_address: int
    end_address: int
    depth: int = 1  # 1 = outermost


@attrs.frozen
class SassKernel:
    """One kernel's disassembly for one architecture, with its resources when known."""

    name: str  # demangled when c++filt was available
    mangled: str
    arch: str | None
    instructions: tuple[Instruction, ...]
    loops: tuple[Loop, ...] = ()
    resources: ResourceUsage | None = None
    warnings: tuple[str, ...] = ()  # ptxas warnings naming this kernel
    source_file: str = ""

    @property
    def executed(self) -> tuple[Instruction, ...]:
        """Instructions that can execute: no NOP padding, no ``@!PT`` fillers, nothing after
        the last EXIT's self-branch."""
        return tuple(i for i in self.instructions if i.opcode != "NOP" and not i.never_executes
                     and not (i.opcode == "BRA" and i.branch_target == i.address))


def _split(body: str) -> tuple[str | None, str, tuple[str, ...], str]:
    body = body.strip().rstrip(";").strip()
    predicate = None
    if body.startswith("@"):
        pred, _, body = body.partition(" ")
        predicate = pred[1:]
    head, _, operands = body.strip().partition(" ")
    parts = head.split(".")
    return predicate, parts[0], tuple(p for p in parts[1:] if p), operands.strip()


def _branch_target(opcode: str, operands: str, labels: dict[str, int]) -> int | None:
    if opcode not in isa.BRANCH_OPCODES:
        return None
    ref = _LABEL_REF.search(operands)
    if ref:
        return labels.get(ref.group(1))
    hexes = _HEX.findall(operands)
    return int(hexes[-1], 16) if hexes else None


def find_loops(instructions: Iterable[Instruction]) -> tuple[Loop, ...]:
    """Loops from backward branches, with nesting depth (1 = outermost)."""
    spans = sorted({(i.branch_target, i.address) for i in instructions
                    if i.branch_target is not None and i.branch_target < i.address})
    loops = []
    for start, end in spans:
        depth = 1 + sum(1 for s, e in spans if (s, e) != (start, end) and s <= start and end <= e
                        and (e - s) > (end - start))
        loops.append(Loop(start, end, depth))
    return tuple(loops)


def _with_loops(raw: list[Instruction]) -> tuple[tuple[Instruction, ...], tuple[Loop, ...]]:
    loops = find_loops(raw)
    if not loops:
        return tuple(raw), ()
    out = []
    for ins in raw:
        depth = sum(1 for lp in loops if lp.start_address <= ins.address <= lp.end_address)
        out.append(attrs.evolve(ins, loop_depth=depth) if depth else ins)
    return tuple(out), loops


@attrs.frozen
class _RawKernel:
    mangled: str
    arch: str | None
    instructions: tuple[Instruction, ...]
    loops: tuple[Loop, ...]


def parse_sass(text: str) -> list[_RawKernel]:
    """Parse ``cuobjdump -sass`` or ``nvdisasm -c`` output into raw per-kernel listings
    (names still mangled, no resources). Several architectures of one fat binary give one
    entry per (kernel, arch)."""
    kernels: list[_RawKernel] = []
    arch: str | None = None
    name: str | None = None
    rows: list[tuple[int, str, str | None]] = []
    labels: dict[str, int] = {}
    pending_labels: list[str] = []
    source: str | None = None

    def flush() -> None:
        nonlocal rows, labels, pending_labels, source
        if name is not None and rows:
            raw = []
            for address, body, where in rows:
                predicate, opcode, mods, operands = _split(body)
                raw.append(Instruction(address=address, opcode=opcode, modifiers=mods,
                                       operands=operands, predicate=predicate,
                                       branch_target=_branch_target(opcode, operands, labels),
                                       source=where))
            instructions, loops = _with_loops(raw)
            kernels.append(_RawKernel(name, arch, instructions, loops))
        rows, labels, pending_labels, source = [], {}, [], None

    for line in text.splitlines():
        m = _INSN.match(line)
        if m and name is not None:
            body = m.group(2)
            if body.startswith("."):  # data directives of nvdisasm's non-code sections
                continue
            address = int(m.group(1), 16)
            for label in pending_labels:
                labels[label] = address
            pending_labels = []
            rows.append((address, body, source))
            continue
        m = _LINE_INFO.match(line)
        if m:
            source = f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}"
            continue
        m = _FUNCTION.match(line) or _SECTION_TEXT.match(line)
        if m:
            flush()
            name = m.group(1)
            continue
        m = _LABEL.match(line)
        if m:
            pending_labels.append(m.group(1))
            continue
        m = _CODE_FOR.search(line)
        if m:  # cuobjdump: a new architecture's code in a fat binary
            flush()
            name = None
            arch = m.group(1)
            continue
        m = _TARGET.match(line)
        if m:  # a cubin's header (nvdisasm; cuobjdump repeats it after "code for")
            flush()
            name = None
            arch = m.group(1)
            continue
        m = _HEADERFLAGS.match(line)
        if m and name is None:  # a file header (in cuobjdump's listing it follows "Function")
            sm = re.search(r"\bEF_CUDA_SM(\d+)\b", m.group(1))
            if sm:
                flush()
                arch = f"sm_{sm.group(1)}" + ("a" if "EF_CUDA_ACCELERATORS" in m.group(1) else "")
            continue
        if re.match(r"\s*\.section\s", line) and name is not None:  # not .sectioninfo
            flush()
            name = None
    flush()
    return kernels
