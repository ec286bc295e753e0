"""``show_sass``: an LLM tool that shows the parent candidate's SASS for one kernel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpro.api import CollectorError, LLMTool, ToolContext, ToolError

from kernelpro_plugins_sass.collector import collect_build_dir
from kernelpro_plugins_sass.payload import KernelEntry, sass_payload

DEFAULT_MAX_LINES = 200
MAX_LINES_CAP = 2000
MAX_KERNELS_SHOWN = 3


def parent_build_dir(context: ToolContext) -> Path | None:
    """Where the parent's binaries are: ``<run_dir>/builds/<parent id>``, else the tool's
    workdir when it holds a build."""
    candidates = []
    if context.run_dir is not None and context.parent is not None:
        candidates.append(Path(context.run_dir) / "builds" / context.parent.id)
    if context.workdir is not None:
        candidates.append(Path(context.workdir))
    for c in candidates:
        if c.is_dir():
            return c
    return None


def format_kernel(entry: KernelEntry, max_lines: int) -> str:
    """Resource usage, loops and the listing (loop bodies first when it must be trimmed)."""
    k, f = entry.kernel, entry.features
    head = [f"// kernel {k.name}", f"// mangled {k.mangled}" if k.mangled != k.name else "",
            f"// arch {k.arch}; {k.resources.summary() if k.resources else 'resource usage unknown'}",
            f"// {f.instructions} instructions, {f.loops} loop(s); [Ln] marks loop depth"]
    head += [f"// ptxas: {w}" for w in k.warnings[:5]]
    executed = list(k.executed)
    shown = executed
    note = ""
    if len(executed) > max_lines:
        in_loops = [i for i in executed if i.in_loop]
        shown = (in_loops or executed)[:max_lines]
        note = (f"// trimmed: {len(shown)} of {len(executed)} instructions shown"
                + (" (loop bodies only)" if in_loops else ""))
    body = [f"/*{i.address:04x}*/ {'[L%d] ' % i.loop_depth if i.loop_depth else ''}{i.text}"
            + (f"  // {i.source}" if i.source else "") for i in shown]
    return "\n".join([ln for ln in head if ln] + ([note] if note else []) + body)


class ShowSass(LLMTool):
    """Show the SASS of the parent candidate's kernel(s) whose name contains ``kernel``."""

    name = "show_sass"
    description = ("Show the SASS (GPU machine code) of a kernel of the parent candidate, with "
                   "ptxas resource usage (registers, stack, spills) on top; loop bodies first "
                   "when trimmed.")
    input_schema = {
        "type": "object",
        "properties": {
            "kernel": {"type": "string", "description": "substring of the kernel name; empty for all"},
            "max_lines": {"type": "integer", "minimum": 10, "maximum": MAX_LINES_CAP,
                          "default": DEFAULT_MAX_LINES},
        },
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        needle = str(arguments.get("kernel", "") or "")
        try:
            max_lines = int(arguments.get("max_lines", DEFAULT_MAX_LINES))
        except (TypeError, ValueError):
            raise ToolError("max_lines must be an integer") from None
        max_lines = max(10, min(max_lines, MAX_LINES_CAP))
        if context.parent is None:
            raise ToolError("no parent candidate yet: show_sass reads the SASS of the candidate being refined")
        build_dir = parent_build_dir(context)
        if build_dir is None:
            raise ToolError("no build directory for the parent candidate (expected <run_dir>/builds/<parent id>)")
        try:
            profile = collect_build_dir(build_dir)
        except CollectorError as exc:
            raise ToolError(str(exc)) from None
        payload = sass_payload(profile)
        if payload is None or not payload.entries:
            return "The parent has no kernels of its own (" + "; ".join(profile.notes) + ")"
        entries = payload.find(needle) if needle else list(payload.entries)
        if not entries:
            names = ", ".join(e.kernel.name for e in payload.entries[:20])
            raise ToolError(f"no kernel matches {needle!r}; kernels: {names}")
        shown = entries[:MAX_KERNELS_SHOWN]
        per_kernel = max(10, max_lines // len(shown))
        parts = [format_kernel(e, per_kernel) for e in shown]
        if len(entries) > len(shown):
            parts.append(f"// {len(entries) - len(shown)} more matching kernel(s) not shown: "
                         + ", ".join(e.kernel.name for e in entries[len(shown):]))
        return "\n\n".join(parts)
