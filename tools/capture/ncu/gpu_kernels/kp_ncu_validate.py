"""Evaluate captured validation reports: which micro-profiler fires on which case.

Used by ``tests/ncu/test_ncu_fixtures.py`` and ``benchmarks/ncu_validation.py``. Input is a
capture folder as written by ``gpu_capture.py`` (or the committed fixture folder with the
same layout): ``suite/ncu_stage{1,2}.ncu-rep`` (or ``.raw.csv``), ``cases_io.json``,
``calibration.json``, ``env.json``, ``bench.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kp_ncu_cases as C  # noqa: E402

from kernelpro.api import ProfileContext  # noqa: E402
from kernelpro.records import Bottleneck, Finding, GpuSpec, KernelProfile  # noqa: E402

from kernelpro_plugins_ncu import report as R  # noqa: E402
from kernelpro_plugins_ncu.calibrate import calibrated_spec, table_spec  # noqa: E402
from kernelpro_plugins_ncu.classifier import RooflineClassifier  # noqa: E402
from kernelpro_plugins_ncu.micro import ALL_MICRO_PROFILERS  # noqa: E402


@attrs.frozen
class CaseResult:
    case: str
    good: bool
    expect: tuple[str, ...]
    bottleneck: Bottleneck | None
    gated: tuple[Finding, ...]  # findings of the micro-profilers the bottleneck gates in
    ungated_tools: tuple[str, ...]  # tools that fire when every micro-profiler runs
    kernels: tuple[str, ...]

    @property
    def fired(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.tool for f in self.gated))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def load_stage(folder: Path, stage: int) -> tuple[list[KernelProfile], dict[str, Any]]:
    """A stage's kernels from the .ncu-rep when it is there, else from its raw CSV export
    plus the source hot spots saved beside it (``ncu_stage<N>.hotspots.json``)."""
    rep = folder / f"ncu_stage{stage}.ncu-rep"
    if rep.exists():
        return R.read_report(rep)
    csv_path = folder / f"ncu_stage{stage}.raw.csv"
    if not csv_path.exists():
        raise FileNotFoundError(f"no stage-{stage} report in {folder}")
    kernels, payload = R.read_report(csv_path)
    spots = read_json(folder / f"ncu_stage{stage}.hotspots.json")
    if spots is not None:
        payload["source_hotspots"] = [{k: [tuple(x) for x in v] for k, v in d.items()} for d in spots]
    return kernels, payload


def export_hotspots(report: Path, out: Path) -> None:
    """Save the per-kernel source hot spots of a .ncu-rep as JSON (CSV exports lack them)."""
    _, payload = R.read_report(report)
    out.write_text(json.dumps(payload.get("source_hotspots") or [], indent=1))


def gpu_spec(capture: Path, calibrated: bool = True) -> GpuSpec | None:
    env = read_json(capture / "env.json") or {}
    name = env.get("gpu") or ""
    base = table_spec(name)
    cal = read_json(capture / "calibration.json")
    if calibrated and cal:
        return calibrated_spec(name, cal.get("arch", ""), cal, base)
    return base


def split_by_case(kernels: list[KernelProfile], payload: dict[str, Any]) -> dict[str, tuple[list, dict]]:
    """Suite kernels grouped by validation case, with the matching per-kernel payload rows."""
    groups: dict[str, tuple[list, dict]] = {}
    spots = payload.get("source_hotspots") or []
    for i, k in enumerate(kernels):
        case = C.case_of_kernel(k.name)
        if case is None:
            continue
        ks, pl = groups.setdefault(case, ([], {"source_hotspots": [], "device_name": payload.get("device_name")}))
        ks.append(k)
        pl["source_hotspots"].append(spots[i] if i < len(spots) else {})
    return groups


def evaluate(capture: Path, calibrated: bool = True) -> list[CaseResult]:
    """Classify each case from its stage-1 counters, then run the micro-profilers on the
    merged stage-1+2 counters, gated as the pipeline gates them (and ungated, for the table)."""
    suite = capture / "suite"
    s1, p1 = load_stage(suite, 1)
    s2, p2 = load_stage(suite, 2)
    merged = R.merge_kernels(s1, s2)
    io_all = read_json(capture / "cases_io.json") or {}
    spec = gpu_spec(capture, calibrated)
    ctx = ProfileContext(gpu=spec, device="cuda")
    stage1 = split_by_case(s1, p1)
    stage2 = split_by_case(merged, {**p2, "device_name": p2.get("device_name") or p1.get("device_name")})
    classifier = RooflineClassifier()
    results = []
    for name, case in C.CASES.items():
        if name not in stage1 or name not in stage2:
            continue
        io = {k: v for k, v in (io_all.get(name) or {}).items() if k in ("input_bytes", "output_bytes", "param_bytes")}
        k1, pl1 = stage1[name]
        k2, pl2 = stage2[name]
        prof1 = R.profile_data(k1, {**pl1, "io": io})
        prof2 = R.profile_data(k2, {**pl2, "io": io})
        bottleneck = classifier.classify({"kernel": prof1}, ctx)
        gated: list[Finding] = []
        ungated: list[str] = []
        for cls in ALL_MICRO_PROFILERS:
            tool = cls()
            findings = tool.analyze(prof2, bottleneck, ctx)
            if findings:
                ungated.append(cls.name)
                if tool.applies(bottleneck):
                    gated.extend(findings)
        gated.sort(key=lambda f: -(f.estimated_gain or 0.0))
        results.append(CaseResult(case=name, good=case.good, expect=case.expect, bottleneck=bottleneck,
                                  gated=tuple(gated), ungated_tools=tuple(ungated),
                                  kernels=tuple(k.name for k in k1)))
    return results


def markdown_table(results: list[CaseResult]) -> str:
    """One row per case: bottleneck, tools designed to fire, tools fired through the gate
    (missing designed ones in brackets), tools that fire only when every profiler runs."""
    lines = ["| case | kind | bottleneck | roofline | designed to fire | fired (gated) | fires only ungated |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        b = r.bottleneck
        kind = (b.kind + (f" ({b.pipe})" if b.pipe else "")) if b else "-"
        frac = f"{b.roofline_fraction:.2f}" if b and b.roofline_fraction is not None else "-"
        fired = [f"**{t}**" if t in r.expect else t for t in r.fired]
        missing = [f"[{t} missing]" for t in r.expect if t not in r.fired]
        only_ungated = [t for t in r.ungated_tools if t not in r.fired]
        lines.append(f"| {r.case} | {'good' if r.good else 'flawed'} | {kind} | {frac} | "
                     f"{', '.join(r.expect) or '-'} | {', '.join(fired + missing) or '-'} | "
                     f"{', '.join(only_ungated) or '-'} |")
    return "\n".join(lines)
