"""``fetch_metrics``: an LLM tool returning raw Nsight Compute metric values of the parent
candidate's kernel-level profile.

Where the profile is looked for (first found wins), under ``<run_dir>/profiles/<parent id>/``:
``ncu_stage2.ncu-rep`` and ``ncu_stage1.ncu-rep`` (merged), ``ncu.ncu-rep``, any other
``*.ncu-rep``, ``*.csv`` exports, or ``kernel.json`` / ``profile.json`` holding a
:class:`kernelpro.api.ProfileData` as :func:`kernelpro.api.to_json` writes it.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
from pathlib import Path
from typing import Any, ClassVar

from kernelpro.api import (
    CollectorError,
    KernelProfile,
    LLMTool,
    ProfileData,
    ToolContext,
    ToolError,
    from_json,
)

from kernelpro_plugins_ncu import report as R

MAX_METRICS = 40
MAX_KERNELS = 16


def profile_dir(context: ToolContext) -> Path:
    if context.run_dir is None or context.parent is None:
        raise ToolError("fetch_metrics needs a parent candidate that was profiled in this run")
    return Path(context.run_dir) / "profiles" / context.parent.id


def load_parent_kernels(folder: Path) -> list[KernelProfile]:
    """Kernel profiles stored for a candidate (see module doc for the places looked at)."""
    if not folder.is_dir():
        raise ToolError(f"no profile stored for this parent (looked in {folder})")
    s1, s2 = folder / "ncu_stage1.ncu-rep", folder / "ncu_stage2.ncu-rep"
    try:
        if s2.exists() or s1.exists():
            first = R.read_report(s1)[0] if s1.exists() else []
            second = R.read_report(s2)[0] if s2.exists() else []
            return R.merge_kernels(first, second) if first and second else (second or first)
        for pattern in ("ncu.ncu-rep", "*.ncu-rep", "*.raw.csv", "*.csv"):
            for path in sorted(folder.glob(pattern)):
                return R.read_report(path)[0]
    except CollectorError as exc:
        raise ToolError(str(exc))
    for name in ("kernel.json", "profile.json"):
        path = folder / name
        if path.exists():
            try:
                data = json.loads(path.read_text())
                if isinstance(data, dict) and "kernel" in data and "level" not in data:
                    data = data["kernel"]
                return list(from_json(data, ProfileData).kernels)
            except Exception as exc:  # malformed dump: one line for the model
                raise ToolError(f"cannot read {path.name}: {type(exc).__name__}")
    raise ToolError(f"no Nsight Compute profile stored for this parent in {folder}")


def _format(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value)}"
    return f"{value:.4g}"


class FetchMetrics(LLMTool):
    name = "fetch_metrics"
    description = ("Raw Nsight Compute metric values of the parent candidate's kernels (its last "
                   "kernel-level profile). Give exact metric names (e.g. dram__bytes_read.sum, "
                   "sm__throughput.avg.pct_of_peak_sustained_elapsed) or shell-style patterns "
                   "(smsp__average_warps_issue_stalled_*); optionally a substring of the kernel name.")
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "metrics": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                        "description": "metric names or patterns with * and ?"},
            "kernel": {"type": "string", "description": "only kernels whose name contains this"},
        },
        "required": ["metrics"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        wanted = arguments.get("metrics")
        if not isinstance(wanted, list) or not wanted or not all(isinstance(m, str) for m in wanted):
            raise ToolError("'metrics' must be a non-empty list of metric names")
        if len(wanted) > MAX_METRICS:
            raise ToolError(f"ask for at most {MAX_METRICS} metrics at a time")
        sub = arguments.get("kernel")
        if sub is not None and not isinstance(sub, str):
            raise ToolError("'kernel' must be a string")
        kernels = load_parent_kernels(profile_dir(context))
        return render(kernels, wanted, sub)


def render(kernels: list[KernelProfile], wanted: list[str], kernel_substring: str | None = None) -> str:
    """Text table of the requested metrics per kernel, with suggestions for unknown names."""
    chosen = [k for k in kernels if not kernel_substring or kernel_substring.lower() in k.name.lower()]
    if not chosen:
        names = ", ".join(sorted({k.name.split("(")[0] for k in kernels})[:10])
        raise ToolError(f"no kernel name contains {kernel_substring!r}; kernels: {names}")
    available = sorted({name for k in kernels for name in k.metrics})
    lines = []
    missing = []
    total_ns = sum(k.duration_ns or 0.0 for k in kernels)  # share of the whole forward
    for k in chosen[:MAX_KERNELS]:
        share = f", {100 * (k.duration_ns or 0) / total_ns:.0f}% of time" if total_ns else ""
        dur = f"{(k.duration_ns or 0) / 1e3:.1f} us" if k.duration_ns else "duration unknown"
        lines.append(f"kernel {k.name.split('(')[0]} ({dur}{share})")
        for pattern in wanted:
            matched = [n for n in available if fnmatch.fnmatchcase(n, pattern)] if any(
                c in pattern for c in "*?[") else [pattern]
            for name in matched:
                if name in k.metrics:
                    lines.append(f"  {name} = {_format(float(k.metrics[name]))}")
                elif pattern not in missing:
                    missing.append(pattern)
    if len(chosen) > MAX_KERNELS:
        lines.append(f"({len(chosen) - MAX_KERNELS} more kernels not shown; narrow with 'kernel')")
    for pattern in missing:
        close = difflib.get_close_matches(pattern, available, n=3, cutoff=0.6)
        hint = f" (close: {', '.join(close)})" if close else ""
        lines.append(f"not in the profile: {pattern}{hint}")
    return "\n".join(lines)
