"""Which SASS micro-profiler fires on which kernel: a markdown table for docs/validation.

    python -m kernelpro_plugins_sass.validate tests/sass/kernels [--out docs/validation/sass_tools.md]

Compiles every ``.cu`` in the directory through the ``sass`` analyzer (``nvcc -cubin
-Xptxas -v``, arch sm_90 unless the file says ``// kernelpro-arch: ...``), runs every SASS
micro-profiler on it without the bottleneck gate, and writes the table (severity of each
finding per kernel), the fixture's stated intent (its first comment line), the kernels'
resource usage and the findings' messages.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import subprocess
import sys
from pathlib import Path

from kernelpro.api import BUILTIN_GPU_SPECS as SPECS, CollectorError, ProfileContext

from kernelpro_plugins_sass.collector import SassAnalyzer
from kernelpro_plugins_sass.profilers import ALL
from kernelpro_plugins_sass.toolchain import find_tool

SHORT = {cls.name: cls.name.removeprefix("sass_") for cls in ALL}


def intent(source: Path) -> str:
    for line in source.read_text().splitlines():
        line = line.strip()
        if line.startswith("//") and "kernelpro-arch" not in line:
            return line.lstrip("/ ").split(":")[0]
    return ""


def tool_version(tool: str) -> str:
    path = find_tool(tool)
    if path is None:
        return f"{tool}: missing"
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True).stdout
    release = [ln for ln in out.splitlines() if "release" in ln]
    return f"{tool} {release[0].split('release')[-1].strip() if release else '?'} ({path})"


def build_report(kernel_dir: Path, command: str) -> str:
    gpu = next(s for s in SPECS if s.name.startswith("H200"))
    context = ProfileContext(gpu=gpu, device="cuda")
    analyzer = SassAnalyzer()
    tools = [cls.name for cls in ALL if cls.name != "sass_instruction_mix"]
    rows, details, resources, errors = [], [], [], []
    for source in sorted(kernel_dir.glob("*.cu")):
        try:
            profile = analyzer.load(source)
        except CollectorError as exc:
            errors.append(f"- {source.name}: {exc}")
            continue
        findings = [f for cls in ALL for f in cls().analyze(profile, None, context)]
        for entry in profile.payload.entries:
            kname = entry.kernel.name.split("(")[0]
            mine = [f for f in findings if f.kernel == entry.kernel.name]
            cells = []
            for tool in tools:
                hit = [f for f in mine if f.tool == tool]
                cells.append(f"**{hit[0].severity}**" if hit else "·")
            rows.append(f"| {source.name} | {kname} | {intent(source)} | " + " | ".join(cells) + " |")
            res = entry.kernel.resources
            f = entry.features
            resources.append(f"| {kname} | {entry.kernel.arch} | {res.registers if res else '?'} | "
                             f"{res.stack_bytes if res else '?'} | {res.spill_store_bytes if res else '?'}/"
                             f"{res.spill_load_bytes if res else '?'} | {f.instructions} | "
                             f"{f.instructions_in_loops} | {f.loops} |")
            for fd in mine:
                if fd.severity != "info":
                    gain = "" if fd.estimated_gain is None else f" (gain ≈ {fd.estimated_gain:.2f})"
                    details.append(f"- `{kname}` · {SHORT[fd.tool]} · {fd.severity}{gain}: {fd.message}")
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = "| file | kernel | fixture intent | " + " | ".join(SHORT[t] for t in tools) + " |"
    sep = "|" + "---|" * (3 + len(tools))
    parts = [
        "# SASS micro-profilers: which tool fired on which kernel",
        "",
        f"Generated {now} on the CPU machine (no GPU: compile + disassemble only) with",
        "",
        f"    {command}",
        "",
        f"Toolchain: {tool_version('nvcc')}; {tool_version('cuobjdump')}.",
        "Micro-profilers run without the bottleneck gate; GPU ceilings from the H200 SXM "
        "datasheet entry. Cells give the finding's severity, `·` = no finding. "
        "The instruction-mix summary (info) fires on every kernel and is left out of the table.",
        "",
        head, sep, *rows, "",
        "## Resource usage (cuobjdump -res-usage + ptxas -v)",
        "",
        "| kernel | arch | registers | stack B | spill st/ld B | instructions | in loops | loops |",
        "|---|---|---|---|---|---|---|---|", *resources, "",
        "## Findings",
        "", *details, "",
    ]
    if errors:
        parts += ["## Files that did not compile", "", *errors, ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelpro_plugins_sass.validate")
    ap.add_argument("kernel_dir", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if not args.kernel_dir.is_dir():
        print(f"not a directory: {args.kernel_dir}", file=sys.stderr)
        return 2
    command = "python -m kernelpro_plugins_sass.validate " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    try:
        report = build_report(args.kernel_dir, command)
    except CollectorError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
        print(f"wrote {args.out}")
    else:
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
