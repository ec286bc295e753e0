"""Per-kernel resource usage and compiler diagnostics.

Two sources:

* ``cuobjdump -res-usage FILE`` (any cubin / object / shared object), one line per kernel::

      Function _Z5scalePKfPfif:
       REG:16 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:552 TEXTURE:0 SURFACE:0 SAMPLER:0

  It has registers, stack frame, static shared and local memory in bytes, but no spill counts.
* ptxas' verbose log (``nvcc -Xptxas -v`` / ``ptxas -v``), per kernel::

      ptxas info    : Compiling entry function '_Z11spill_heavyPKfPfii' for 'sm_90'
      ptxas info    : Function properties for _Z11spill_heavyPKfPfii
          440 bytes stack frame, 884 bytes spill stores, 936 bytes spill loads
      ptxas info    : Used 32 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]

  plus diagnostics such as ``ptxas info : (C7515) Potential Performance Loss: wgmma.mma_async
  instructions are serialized due to ... in the function 'NAME'`` and ``ptxas warning : ...``.
"""

from __future__ import annotations

import re

import attrs


@attrs.frozen
class ResourceUsage:
    """What ptxas allotted one kernel. None where the source did not say."""

    registers: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None  # static shared memory
    local_bytes: int | None = None
    constant_bytes: int | None = None  # bank 0 (kernel parameters)
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    barriers: int | None = None
    source: str = ""  # "cuobjdump -res-usage", "ptxas -v" or both

    def merged(self, other: "ResourceUsage | None") -> "ResourceUsage":
        """Fields of ``self`` with gaps filled from ``other``."""
        if other is None:
            return self
        values = {f.name: getattr(self, f.name) if getattr(self, f.name) is not None
                  else getattr(other, f.name) for f in attrs.fields(ResourceUsage)
                  if f.name != "source"}
        sources = [s for s in (self.source, other.source) if s]
        return ResourceUsage(**values, source=" + ".join(dict.fromkeys(sources)))

    def summary(self) -> str:
        parts = []
        for label, value, unit in (("registers", self.registers, ""),
                                   ("stack", self.stack_bytes, " B"),
                                   ("shared", self.shared_bytes, " B"),
                                   ("local", self.local_bytes, " B"),
                                   ("spill stores", self.spill_store_bytes, " B"),
                                   ("spill loads", self.spill_load_bytes, " B")):
            if value is not None:
                parts.append(f"{label} {value}{unit}")
        return ", ".join(parts) if parts else "resource usage unknown"


@attrs.frozen
class CompilerMessage:
    """One ptxas diagnostic: ``code`` like "C7515" when it has one."""

    text: str
    code: str | None = None
    kernel: str | None = None  # mangled name when the message or its context names one
    severity: str = "warning"  # "warning" or "info" (performance advisories are info lines)


_RES_FUNC = re.compile(r"^\s*Function\s+([^\s:]+)\s*:\s*$")
_RES_FIELD = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")


def parse_res_usage(text: str) -> dict[str, ResourceUsage]:
    """Parse ``cuobjdump -res-usage`` output into {mangled name: usage}. With several
    architectures in one file the last listed wins (cuobjdump lists them in file order)."""
    usage: dict[str, ResourceUsage] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _RES_FUNC.match(line)
        if m:
            current = m.group(1)
            continue
        if current and "REG:" in line:
            fields = dict(_RES_FIELD.findall(line))
            usage[current] = ResourceUsage(
                registers=int(fields["REG"]) if "REG" in fields else None,
                stack_bytes=int(fields["STACK"]) if "STACK" in fields else None,
                shared_bytes=int(fields["SHARED"]) if "SHARED" in fields else None,
                local_bytes=int(fields["LOCAL"]) if "LOCAL" in fields else None,
                constant_bytes=int(fields["CONSTANT[0]"]) if "CONSTANT[0]" in fields else None,
                source="cuobjdump -res-usage")
            current = None
    return usage


_COMPILING = re.compile(r"Compiling entry function '([^']+)'(?: for '(sm_\w+)')?")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM0 = re.compile(r"(\d+) bytes cmem\[0\]")
_CODE = re.compile(r"\((C\d{4})\)")
_IN_FUNCTION = re.compile(r"in (?:the )?function '([^']+)'")


def parse_ptxas_log(text: str) -> tuple[dict[str, ResourceUsage], tuple[CompilerMessage, ...]]:
    """Parse ptxas' verbose output (as printed through nvcc, Triton or torch's ninja build).

    Returns per-kernel usage keyed by mangled name, and the diagnostics: every ``warning``
    line and every ``info`` line that carries a ``(Cnnnn)`` advisory code. A diagnostic's
    kernel is the one it names ("in [the] function 'X'"); ptxas prints advisories before the
    "Compiling entry function" line of their kernel, so the surrounding context is no guide
    and unnamed diagnostics keep ``kernel=None``.
    """
    values: dict[str, dict[str, int]] = {}
    messages: list[CompilerMessage] = []
    current: str | None = None
    properties_of: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        m = _COMPILING.search(line)
        if m:
            current = m.group(1)
            values.setdefault(current, {})
            continue
        m = _PROPERTIES.search(line)
        if m:
            properties_of = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and properties_of:
            entry = values.setdefault(properties_of, {})
            entry.update(stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                         spill_load_bytes=int(m.group(3)))
            properties_of = None
            continue
        m = _USED.search(line)
        if m and current:
            entry = values.setdefault(current, {})
            entry["registers"] = int(m.group(1))
            for key, rx in (("barriers", _BARRIERS), ("shared_bytes", _SMEM),
                            ("constant_bytes", _CMEM0)):
                mm = rx.search(line)
                if mm:
                    entry[key] = int(mm.group(1))
            continue
        code = _CODE.search(line)
        is_warning = re.search(r"\bwarning\b", line, re.IGNORECASE) is not None
        if code or (is_warning and "ptxas" in line.lower()):
            named = _IN_FUNCTION.search(line)
            messages.append(CompilerMessage(
                text=line, code=code.group(1) if code else None,
                kernel=named.group(1) if named else None,
                severity="warning" if is_warning else "info"))
    usage = {name: ResourceUsage(**fields, source="ptxas -v") for name, fields in values.items()
             if fields}
    return usage, tuple(messages)
