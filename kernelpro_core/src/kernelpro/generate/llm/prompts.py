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

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from kernelpro.api import Attempt, GenerationRequest, ParentInfo
from kernelpro.records import Analysis, Bottleneck, EvalResult, Finding, GpuSpec

TEMPLATES_DIR = Path(__file__).resolve().parent.parent.parent / "templates"

#: longest compile log or error text quoted in a prompt, in characters (the useful part of
#: an nvcc log is its first errors; the rest repeats them)
MAX_LOG_CHARS = 6000

_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}

#: measurement groups that are the evaluator's own bookkeeping (stage timings, sandbox and
#: recheck notes), not measurements of the candidate: never shown to the model
INTERNAL_MEASUREMENTS = frozenset({"evaluator"})

#: lines of a candidate's source that say what it does (kernels, launches, tiling, the
#: operators forward calls), for the summary of an earlier attempt
_SUMMARY_LINE = re.compile(
    r"__global__|<<<|@triton\.(jit|autotune)|^\s*def (?!__init__)\w+\(|BLOCK\w*\s*[:=]|tl\.dot|"
    r"__shared__|wmma|mma\.|cp\.async|float4|__launch_bounds__|torch\.(ops|nn\.functional|\w+)\("
)
MAX_SUMMARY_LINES = 10

if TYPE_CHECKING:
    import jinja2

_environment: jinja2.Environment | None = None


def environment() -> jinja2.Environment:
    import jinja2  # here, not at import: the command line starts faster

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
    on_gpu = request.device.startswith("cuda")
    return {
        "mode": prompt_mode(parent),
        "language": language,
        # a CPU run cannot run GPU kernels: the language is not asked for there
        "language_required": language_required and on_gpu,
        "on_gpu": on_gpu,
        "versions": toolchain_versions(),
        "skeleton": SKELETONS.get(language, "") if on_gpu else SKELETONS["cpu"],
        "reference": _reference(request),
        "inputs": list(request.inputs),
        "tolerances": [f"{dtype}: atol {atol:g}, rtol {rtol:g}" for dtype, (atol, rtol) in request.tolerances.items()],
        "attempts": [_attempt(a) for a in request.attempts],
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
        "goal": request.goal.strip(),
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
            if name not in INTERNAL_MEASUREMENTS and values
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


# --- what an expert needs besides the code -----------------------------------------------


@functools.lru_cache(maxsize=1)
def toolchain_versions() -> str:
    """"torch 2.x, CUDA 12.x, Triton 3.x" as installed here (Triton without importing it)."""
    from importlib import metadata

    import torch

    parts = [f"torch {torch.__version__.split('+')[0]}"]
    cuda = getattr(torch.version, "cuda", None)
    parts.append(f"CUDA {cuda}" if cuda else "no CUDA build of torch")
    try:
        parts.append(f"Triton {metadata.version('triton')}")
    except metadata.PackageNotFoundError:
        parts.append("no Triton")
    return ", ".join(parts)


def _reference(request: GenerationRequest) -> dict[str, Any] | None:
    """The reference's runtime and the problem's lower bounds from the baseline job."""
    base = request.baseline
    if base is None or base.runtime_ms is None and base.baseline_ms is None:
        return None
    ev = (base.measurements or {}).get("evaluator", {})
    compiled = base.baseline_compiled.median_ms if base.baseline_compiled else None
    flops, bytes_min, lower = ev.get("flops"), ev.get("bytes_min"), ev.get("lower_bound_ms")
    return {
        "runtime_ms": _num(base.baseline_ms or base.runtime_ms),
        "compiled_ms": _num(compiled),
        "flops": _num(flops) if flops else None,
        "bytes_min": _num(bytes_min) if bytes_min else None,
        "lower_bound_ms": _num(lower) if lower else None,
    }


def code_summary(source: str) -> list[str]:
    """The lines of a candidate that say what it does (kernel signatures, launches, tiling
    constants, and the body of ``forward``), at most :data:`MAX_SUMMARY_LINES`."""
    out: list[str] = []
    forward_indent: int | None = None
    forward_lines = 0
    for line in source.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        in_forward = forward_indent is not None and stripped and indent > forward_indent and forward_lines < 4
        if forward_indent is not None and stripped and indent <= forward_indent:
            forward_indent = None
        if re.match(r"\s*def forward\(", line):
            forward_indent, forward_lines = indent, 0
        if in_forward:
            forward_lines += 1
        if (in_forward or _SUMMARY_LINE.search(line)) and stripped and stripped not in out:
            out.append(stripped[:160])
            if len(out) >= MAX_SUMMARY_LINES:
                break
    return out


def _attempt(a: Attempt) -> dict[str, Any]:
    if a.verdict == "correct":
        outcome = f"correct, {_num(a.speedup, 3)}x the reference" if a.speedup else "correct"
        if a.runtime_ms is not None:
            outcome += f" ({_num(a.runtime_ms)} ms)"
    else:
        outcome = a.verdict + (f": {_trim(a.reason, 300)}" if a.reason else "")
    return {"id": a.id, "description": a.description, "outcome": outcome,
            "summary": code_summary(a.source) if a.verdict != "contract_violation" else []}


#: the smallest complete answer in each language: the shape of a file that loads and runs
SKELETONS: dict[str, str] = {
    "cuda": """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r\"\"\"
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
torch::Tensor run(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32);
    auto y = torch::empty_like(x);
    long n = x.numel();
    kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
\"\"\"
ext = load_inline(name="my_ext", cpp_sources="torch::Tensor run(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["run"])


class ModelNew(nn.Module):
    def __init__(self, *init_args):  # the reference's constructor arguments
        super().__init__()

    def forward(self, x):
        return ext.run(x.contiguous())""",
    "triton": """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *init_args):  # the reference's constructor arguments
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y""",
    "cute": """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r\"\"\"
#include <torch/extension.h>
#include <cute/tensor.hpp>
using namespace cute;
__global__ void kernel(const float* x, float* y, int n) {
    Tensor gx = make_tensor(make_gmem_ptr(x), make_shape(n));
    Tensor gy = make_tensor(make_gmem_ptr(y), make_shape(n));
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) gy(i) = gx(i);
}
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
\"\"\"
ext = load_inline(name="my_cute_ext", cpp_sources="torch::Tensor run(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["run"], extra_cuda_cflags=["-std=c++17"])


class ModelNew(nn.Module):
    def __init__(self, *init_args):  # the reference's constructor arguments
        super().__init__()

    def forward(self, x):
        return ext.run(x.contiguous())""",
    "cpu": """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *init_args):  # the reference's constructor arguments
        super().__init__()

    def forward(self, x):
        return x  # the same result as Model.forward, computed faster""",
}
