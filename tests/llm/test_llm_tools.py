"""The ToolBox and the built-in LLM tools."""

from __future__ import annotations

import attrs

import shutil

import pluggy
import pytest
from llm_helpers import CUDA_KERNEL

from kernelpro import hookspecs, llm_tools
from kernelpro.api import ANY, LLMTool, MicroProfiler, ParentInfo, ToolContext, ToolError
from kernelpro.generate import anthropic_gen
from kernelpro.records import Analysis, Bottleneck, Finding

KERNEL = """
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, float s, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    if (i < n) y[i] = tile[threadIdx.x] * s;
}
"""

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def context(problem, parent=None, profile_parent=None, tmp_path=None):
    return ToolContext(problem=problem, parent=parent, device="cuda", gpu=None, run_dir=None,
                       profile_parent=profile_parent, workdir=tmp_path)


def parent_with(bottleneck_kind="memory"):
    return ParentInfo(id="c0001", source=CUDA_KERNEL, result=None, analysis=Analysis(
        bottleneck=Bottleneck(kind=bottleneck_kind, summary="DRAM-bound", roofline_fraction=0.4)))


class Echo(LLMTool):
    name = "echo"
    description = "Say it back."
    input_schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    def run(self, arguments, context):
        if arguments["text"] == "bad":
            raise ToolError("cannot echo 'bad'")
        if arguments["text"] == "bug":
            raise RuntimeError("boom")
        return arguments["text"] * 2


def test_toolbox_definitions_and_calls(problem):
    box = llm_tools.ToolBox([Echo()], context(problem))
    assert box.definitions() == [{"name": "echo", "description": "Say it back.",
                                  "input_schema": Echo.input_schema}]
    assert box.call("echo", {"text": "hi"}) == ("hihi", False)
    assert box.call("echo", {"text": "bad"}) == ("echo: cannot echo 'bad'", True)
    assert box.call("echo", {"text": "bug"}) == ("echo failed: RuntimeError: boom", True)
    assert box.call("echo", {}) == ("echo: missing required input 'text'", True)
    assert box.call("echo", {"text": 3}) == ("echo: input 'text' must be of type string", True)
    assert box.call("nope", {}) == ("unknown tool 'nope'; available: echo", True)
    assert box.call("echo", ["hi"]) == ("echo: the input must be a JSON object", True)
    assert box.call("echo", {"text": "x" * 15000})[0].endswith("[... 10000 more characters cut]")
    with pytest.raises(ValueError, match="two LLM tools are named 'echo'"):
        llm_tools.ToolBox([Echo(), Echo()], context(problem))


def test_run_micro_profiler(problem):
    asked = []

    def profile_parent(names):
        asked.append(names)
        if "missing" in names:
            raise ValueError("unknown micro-profiler 'missing'; available: coalescing")
        return Analysis(bottleneck=Bottleneck(kind="memory", summary="DRAM-bound", roofline_fraction=0.4),
                        findings=(Finding(tool="coalescing", severity="high", title="Uncoalesced loads",
                                          message="8 sectors per request.", action="Coalesce.",
                                          estimated_gain=0.3, evidence={"sectors": 8.0}),),
                        notes=("sass: cuobjdump not found",))

    box = llm_tools.ToolBox([llm_tools.RunMicroProfiler()], context(problem, parent_with(), profile_parent))
    text, is_error = box.call("run_micro_profiler", {"names": ["coalescing", "coalescing"]})
    assert not is_error and asked == [["coalescing"]]
    assert text.splitlines() == [
        "Micro-profilers coalescing on c0001:",
        "# Bottleneck",
        "memory: DRAM-bound",
        "It reaches 40% of the roofline at its arithmetic intensity.",
        "",
        "# Profiler findings",
        "1. [high] Uncoalesced loads (coalescing)",
        "   8 sectors per request.",
        "   Action: Coalesce.",
        "   Estimated gain: about 30% of the runtime.",
        "   Numbers: sectors = 8",
        "(Profiling note: sass: cuobjdump not found)",
    ]
    assert box.call("run_micro_profiler", {"names": ["missing"]}) == (
        "run_micro_profiler: unknown micro-profiler 'missing'; available: coalescing", True)
    first = llm_tools.ToolBox([llm_tools.RunMicroProfiler()], context(problem, None, profile_parent))
    assert first.call("run_micro_profiler", {"names": ["x"]})[0].endswith("this is a first generation)")


class Coalescing(MicroProfiler):
    name = "coalescing"
    description = "Finds global accesses that touch more sectors than needed."
    applies_to = frozenset({"memory"})

    def analyze(self, profile, bottleneck, context):
        return []


class Occupancy(MicroProfiler):
    name = "occupancy"
    level = "kernel"
    applies_to = frozenset({"latency", "compute"})

    def analyze(self, profile, bottleneck, context):
        return []


class Everywhere(MicroProfiler):
    name = "launch_overhead"
    level = "system"
    applies_to = frozenset({ANY})

    def analyze(self, profile, bottleneck, context):
        return []


def test_list_micro_profilers_shows_the_gate(problem):
    tool = llm_tools.ListMicroProfilers(catalog=lambda: [Occupancy, Coalescing, Everywhere])
    text = tool.run({}, context(problem, parent_with("memory")))
    assert text.splitlines() == [
        "Parent bottleneck: memory.",
        "- coalescing (kernel level; applies to: memory); gate: runs: "
        "Finds global accesses that touch more sectors than needed.",
        "- launch_overhead (system level; applies to: any); gate: runs",
        "- occupancy (kernel level; applies to: compute, latency); gate: skipped",
    ]
    assert llm_tools.ListMicroProfilers(catalog=list).run({}, context(problem)) == "No micro-profilers are installed."


def test_list_micro_profilers_uses_the_runs_own_list(problem):
    """The loop passes the micro-profilers the run may use (its block list applied)."""
    tool = llm_tools.ListMicroProfilers(catalog=lambda: [Occupancy, Coalescing, Everywhere])
    ctx = attrs.evolve(context(problem), micro_profilers=lambda: [Coalescing])
    assert [line.split(" ")[1] for line in tool.run({}, ctx).splitlines()] == ["coalescing"]


@needs_nvcc
def test_compile_check_reports_resources(problem, tmp_path):
    box = llm_tools.ToolBox([llm_tools.CompileCheck()], context(problem, tmp_path=tmp_path))
    text, is_error = box.call("compile_check", {"source": KERNEL, "arch": "sm_90", "flags": ["-O3"]})
    assert not is_error
    assert text.startswith("compiled OK for sm_90")
    assert "registers" in text and "smem" in text


@needs_nvcc
def test_compile_check_returns_the_errors(problem, tmp_path):
    box = llm_tools.ToolBox([llm_tools.CompileCheck()], context(problem, tmp_path=tmp_path))
    text, is_error = box.call("compile_check", {"source": KERNEL.replace("tile[threadIdx.x] * s", "tile[threadIdx.x] * q")})
    assert not is_error  # a failed compile is a result, not a bad call
    assert text.startswith("compile failed for sm_90")
    assert 'snippet.cu(7): error: identifier "q" is undefined' in text


def test_compile_check_refuses_unsafe_flags_and_bad_arch(problem, tmp_path, monkeypatch):
    monkeypatch.setattr(llm_tools.shutil, "which", lambda name: "/usr/bin/true")
    box = llm_tools.ToolBox([llm_tools.CompileCheck()], context(problem, tmp_path=tmp_path))
    text, is_error = box.call("compile_check", {"source": KERNEL, "flags": ["-o", "/tmp/x"]})
    assert is_error and "flag '-o' is not allowed" in text
    text, is_error = box.call("compile_check", {"source": KERNEL, "arch": "compute_90; rm -rf /"})
    assert is_error and "arch must look like sm_90" in text


def test_compile_check_without_nvcc(problem, monkeypatch):
    monkeypatch.setattr(llm_tools.shutil, "which", lambda name: None)
    box = llm_tools.ToolBox([llm_tools.CompileCheck()], context(problem))
    assert box.call("compile_check", {"source": KERNEL}) == (
        "compile_check: nvcc is not on PATH on this machine: compile checks are unavailable", True)


def test_modules_register_through_the_hooks():
    pm = pluggy.PluginManager("kernelpro")
    pm.add_hookspecs(hookspecs)
    pm.register(llm_tools, name="core_llm_tools")
    pm.register(anthropic_gen, name="core_anthropic")
    pm.check_pending()
    tools, generators = [], []
    pm.hook.kernelpro_register_llm_tools(register=tools.append)
    pm.hook.kernelpro_register_generators(register=generators.append)
    assert {t.name for t in tools} == {"run_micro_profiler", "list_micro_profilers", "compile_check"}
    assert generators == [anthropic_gen.AnthropicGenerator]


def test_tools_are_offered_only_when_they_can_run():
    from kernelpro.api import ParentInfo, ToolContext
    from kernelpro.llm_tools import ListMicroProfilers, RunMicroProfiler
    from kernelpro.problem import parse_problem
    from kernelpro.records import EvalResult, Verdict

    problem = parse_problem(
        "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return x\ndef get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n")
    ok = ParentInfo(id="c1", source="", result=EvalResult(verdict=Verdict.CORRECT), analysis=None)
    bad = ParentInfo(id="c2", source="", result=EvalResult(verdict=Verdict.COMPILE_ERROR), analysis=None)

    def ctx(parent, device="cuda", profiler=True):
        return ToolContext(problem=problem, parent=parent, device=device, gpu=None, run_dir=None,
                           profile_parent=(lambda names: None) if profiler else None)

    for tool in (RunMicroProfiler(), ListMicroProfilers()):
        assert tool.available(ctx(ok))
        assert not tool.available(ctx(None))  # a first generation has no parent to profile
        assert not tool.available(ctx(bad))  # a failed parent cannot be profiled
        assert not tool.available(ctx(ok, device="cpu"))
        assert not tool.available(ctx(ok, profiler=False))
