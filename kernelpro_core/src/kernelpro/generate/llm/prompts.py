"""Prompts of the LLM generator: jinja2 templates and the one function that fills them.

Templates live in ``kernelpro/templates/`` and are rendered by a single
``Environment(undefined=StrictUndefined, ...)``: a template that names a variable
:func:`prompt_variables` does not provide fails instead of rendering it as empty.

- ``system.j2``: role, target GPU and its ceilings, kernel language, output format, the
  evaluator's integrity rules, the tools. The same for every call of a run (cached).
- ``problem.j2``: the reference program (cached: the static problem block).
- ``first.j2``: first generation from the reference.
- ``refine.j2``: refine a correct parent with its evaluation, bottleneck and findings
  (``_analysis.j2``, also the text of the run_micro_profiler tool).
- ``repair.j2``: fix a parent that failed to compile, verify or run.
- ``contract_repair.j2``: the reply broke the answer contract; ask again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import jinja2

from kernelpro.api import GenerationRequest, ParentInfo
from kernelpro.records import Analysis, Bottleneck, EvalResult, Finding, GpuSpec

TEMPLATES_DIR = Path(__file__).resolve().parent.parent.parent / "templates"

#: longest compile log or error text quoted in a prompt, in characters (the useful part of
#: an nvcc log is its first errors; the rest repeats them)
MAX_LOG_CHARS = 6000

_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}

_environment: jinja2.Environment | None = None


def environment() -> jinja2.Environment:
    global _environment
    if _environment is None:
        _environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            autoescape=False,
        )
    return _environment


def render(template: str, variables: dict[str, Any]) -> str:
    """Render ``templates/<template>``; a missing variable raises jinja2.UndefinedError."""
    return environment().get_template(template).render(**variables)


def prompt_mode(parent: ParentInfo | None) -> str:
    """"first" without a parent, "repair" when the parent failed, else "refine"."""
    if parent is None:
        return "first"
    if parent.result is not None and not parent.result.correct:
        return "repair"
    return "refine"


def prompt_variables(
    request: GenerationRequest,
    *,
    language: str,
    language_required: bool,
    tools: Sequence[dict[str, Any]] = (),
    max_tool_rounds: int = 0,
    siblings: Sequence[str] = (),
    contract_error: str | None = None,
) -> dict[str, Any]:
    """Every variable any template uses, from the request and the generator's settings.

    ``tools`` are the tool definitions offered to the model (name, description);
    ``siblings`` the descriptions of drafts already written in this expansion;
    ``contract_error`` why the previous reply was refused (contract repair only).
    """
    parent = request.parent
    result = parent.result if parent else None
    analysis = parent.analysis if parent else None
    problem = request.problem
    return {
        "mode": prompt_mode(parent),
        "language": language,
        "language_required": language_required,
        "device": request.device,
        "gpu": _gpu(request.gpu),
        "problem": {
            "name": problem.name,
            "source": problem.source.rstrip("\n"),
            "init_args": ", ".join(problem.init_args),
            "forward_args": ", ".join(problem.forward_args),
        },
        "parent": (
            {"id": parent.id, "source": parent.source.rstrip("\n"), "description": parent.description}
            if parent
            else None
        ),
        "evaluation": _evaluation(result) if result else None,
        **analysis_variables(analysis),
        "memory": [m for m in request.memory if m.strip()],
        "heuristic_notes": [h for h in request.heuristic_notes if h.strip()],
        "siblings": [s for s in siblings if s],
        "tools": [{"name": t["name"], "description": t.get("description", "")} for t in tools],
        "max_tool_rounds": max_tool_rounds,
        "contract_error": contract_error,
    }


def analysis_variables(analysis: Analysis | None) -> dict[str, Any]:
    """The variables of ``_analysis.j2``: the bottleneck, the findings (most severe and
    then largest estimated gain first) and the profilers' notes."""
    return {
        "bottleneck": _bottleneck(analysis.bottleneck) if analysis and analysis.bottleneck else None,
        "findings": [_finding(f) for f in _sorted_findings(analysis.findings if analysis else ())],
        "analysis_notes": list(analysis.notes) if analysis else [],
    }


def _num(x: float | None, digits: int = 4) -> str | None:
    return None if x is None else f"{x:.{digits}g}"


def _gpu(gpu: GpuSpec | None) -> dict[str, Any] | None:
    if gpu is None:
        return None
    return {
        "name": gpu.name,
        "arch": gpu.arch,
        "sm_count": gpu.sm_count,
        "dram_bandwidth_gbs": _num(gpu.dram_bandwidth_gbs),
        "l2_mib": _num(gpu.l2_bytes / 2**20),
        "smem_per_sm_kib": _num(gpu.smem_per_sm_bytes / 2**10),
        "fp32_tflops": _num(gpu.fp32_tflops),
        "tf32_tflops": _num(gpu.tf32_tflops),
        "bf16_tflops": _num(gpu.bf16_tflops),
        "fp16_tflops": _num(gpu.fp16_tflops),
        "fp8_tflops": _num(gpu.fp8_tflops),
        "max_threads_per_sm": gpu.max_threads_per_sm,
        "registers_per_sm": gpu.registers_per_sm,
        "source": gpu.source,
    }


def _trim(text: str, limit: int = MAX_LOG_CHARS) -> str:
    text = text.strip("\n")
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


def _evaluation(result: EvalResult) -> dict[str, Any]:
    speedup = result.speedup
    compiled = result.baseline_compiled.median_ms if result.baseline_compiled else None
    correctness = result.correctness
    return {
        "verdict": result.verdict.value,
        "reason": _trim(result.reason) if result.reason else "",
        "runtime_ms": _num(result.runtime_ms),
        "runtime_cv": _num(result.timing.cv, 2) if result.timing else None,
        "baseline_ms": _num(result.baseline_ms),
        "compiled_baseline_ms": _num(compiled),
        "speedup": _num(speedup, 3),
        "speedup_vs_compiled": (
            _num(compiled / result.runtime_ms, 3) if compiled and result.runtime_ms and result.correct else None
        ),
        "compile_log": _trim(result.compile.log) if result.compile and result.compile.log else "",
        "correctness": (
            {
                "passed": correctness.passed,
                "trials": correctness.trials,
                "max_abs_err": _num(correctness.max_abs_err, 3),
                "max_rel_err": _num(correctness.max_rel_err, 3),
                "message": _trim(correctness.message, 1500),
            }
            if correctness
            else None
        ),
        "flags": list(result.flags),
        "measurements": [
            f"{name}: " + ", ".join(f"{k} = {_num(v)}" for k, v in values.items())
            for name, values in result.measurements.items()
        ],
        "gpu_name": result.gpu_name,
    }


def _bottleneck(b: Bottleneck) -> dict[str, Any]:
    return {
        "kind": b.kind,
        "pipe": b.pipe,
        "summary": b.summary,
        "roofline_percent": _num(100 * b.roofline_fraction, 3) if b.roofline_fraction is not None else None,
        "evidence": [f"{k} = {_num(v)}" for k, v in b.evidence.items()],
    }


def _sorted_findings(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(
        findings,
        key=lambda f: (_SEVERITY_ORDER.get(f.severity, 9), -(f.estimated_gain or 0.0)),
    )


def _finding(f: Finding) -> dict[str, Any]:
    return {
        "tool": f.tool,
        "severity": f.severity,
        "level": f.level,
        "title": f.title,
        "message": f.message,
        "action": f.action,
        "estimated_gain_percent": _num(100 * f.estimated_gain, 2) if f.estimated_gain is not None else None,
        "kernel": f.kernel,
        "evidence": [f"{k} = {_num(v)}" for k, v in f.evidence.items()],
        "source_lines": list(f.source_lines),
    }
