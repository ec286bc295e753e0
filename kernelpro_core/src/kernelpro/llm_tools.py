"""Tools an LLM generator may call while it writes, and the ToolBox that serves them.

Plugins register :class:`kernelpro.api.LLMTool` classes through
``kernelpro_register_llm_tools``; the loop instantiates them and builds a
:class:`ToolBox` for each generation request (``request.tools``) with a
:class:`kernelpro.api.ToolContext` for the parent being refined. A generator offers
:meth:`ToolBox.definitions` to the model and answers each call with :meth:`ToolBox.call`.

Built-in tools registered here:

- ``run_micro_profiler``: run named micro-profilers on the parent now, also ones the
  bottleneck gate skipped, and return their findings.
- ``list_micro_profilers``: the installed micro-profilers and what they detect.
- ``compile_check``: compile a CUDA C++ snippet with nvcc (``-Xptxas -v``) and return
  the errors or the per-kernel resource usage (registers, shared memory, spills).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence, cast

import attrs

from kernelpro.api import LLMTool, MicroProfiler, ToolContext, ToolError
from kernelpro.hookspecs import hookimpl
from kernelpro.records import Analysis

#: longest tool output handed to the model, in characters (about 5k tokens); a longer
#: output is cut and says so
MAX_OUTPUT_CHARS = 20000

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
}


class ToolBox:
    """The tools offered for one generation request, bound to its context."""

    def __init__(self, tools: Sequence[LLMTool], context: ToolContext) -> None:
        self.tools: dict[str, LLMTool] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"two LLM tools are named {tool.name!r}")
            self.tools[tool.name] = tool
        self.context = context

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def definitions(self) -> list[dict[str, Any]]:
        """The ``tools=`` parameter of the Messages API."""
        return [
            {
                "name": tool.name,
                "description": tool.description or tool.name,
                "input_schema": tool.input_schema,
            }
            for tool in self.tools.values()
        ]

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Run tool ``name``; returns ``(text, is_error)``. Never raises: a bad call, a
        :class:`ToolError` or a failing tool becomes an error text for the model."""
        tool = self.tools.get(name)
        if tool is None:
            text, is_error = f"unknown tool {name!r}; available: {', '.join(self.tools) or 'none'}", True
        elif not isinstance(arguments, dict):
            text, is_error = f"{name}: the input must be a JSON object", True
        else:
            problem = schema_problem(arguments, tool.input_schema)
            if problem:
                text, is_error = f"{name}: {problem}", True
            else:
                try:
                    text, is_error = tool.run(arguments, self.context), False
                except ToolError as exc:
                    text, is_error = f"{name}: {exc}", True
                except Exception as exc:  # a tool bug must not end the generation
                    text, is_error = f"{name} failed: {type(exc).__name__}: {exc}", True
        return clip(text), is_error


def schema_problem(arguments: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """The first way ``arguments`` breaks the top level of a JSON schema (required
    properties, property types, array item types, enums), or None."""
    properties = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in arguments:
            return f"missing required input {key!r}"
    if schema.get("additionalProperties") is False:
        extra = sorted(set(arguments) - set(properties))
        if extra:
            return f"unknown input {extra[0]!r}; expected {', '.join(properties)}"
    for key, value in arguments.items():
        spec = properties.get(key)
        if not spec:
            continue
        problem = _value_problem(value, spec)
        if problem:
            return f"input {key!r} {problem}"
    return None


def _value_problem(value: Any, spec: dict[str, Any]) -> str | None:
    kind = spec.get("type")
    if kind in _JSON_TYPES:
        if not isinstance(value, _JSON_TYPES[kind]) or (kind in ("integer", "number") and isinstance(value, bool)):
            return f"must be of type {kind}"
    if "enum" in spec and value not in spec["enum"]:
        return f"must be one of {', '.join(map(str, spec['enum']))}"
    if kind == "array":
        if len(value) < spec.get("minItems", 0):
            return f"needs at least {spec['minItems']} item(s)"
        items = spec.get("items")
        if items:
            for item in value:
                problem = _value_problem(item, items)
                if problem:
                    return f"has an item that {problem}"
    return None


def clip(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


def format_analysis(analysis: Analysis) -> str:
    """An analysis as text for the model, in the words of the refinement prompt
    (``templates/_analysis.j2``): the bottleneck, each finding with its numbers and
    action, and what could not be collected."""
    from kernelpro.generate.llm.prompts import analysis_variables, render

    return render("_analysis.j2", analysis_variables(analysis)).strip("\n")


# --- built-in tools ----------------------------------------------------------------------


class RunMicroProfiler(LLMTool):
    name = "run_micro_profiler"
    description = (
        "Profile the parent kernel now with the named micro-profilers (see "
        "list_micro_profilers), including ones the bottleneck gate did not run, and return "
        "their findings with the numbers behind them. Takes seconds to a minute."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "description": "micro-profiler names",
            }
        },
        "required": ["names"],
        "additionalProperties": False,
    }

    def available(self, context: ToolContext) -> bool:
        return _parent_profilable(context)

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        if context.parent is None:
            raise ToolError("there is no parent kernel yet (this is a first generation)")
        if context.profile_parent is None:
            raise ToolError("profiling is not available in this run")
        names = list(dict.fromkeys(arguments["names"]))
        try:
            analysis = context.profile_parent(names)
        except (ValueError, KeyError, LookupError) as exc:
            raise ToolError(str(exc).strip("'\"")) from None
        header = f"Micro-profilers {', '.join(names)} on {context.parent.id}:"
        return header + "\n" + format_analysis(analysis)


def _parent_profilable(context: ToolContext) -> bool:
    """A correct parent, a profiler and a GPU: what profiling the parent needs."""
    parent = context.parent
    return (parent is not None and parent.result is not None and parent.result.correct
            and context.profile_parent is not None and context.device.startswith("cuda"))


def _installed_micro_profilers() -> list[type]:
    from kernelpro.plugins import Plugins

    return Plugins().micro_profilers()


class ListMicroProfilers(LLMTool):
    name = "list_micro_profilers"
    description = (
        "List the installed micro-profilers: name, profiling level, the bottleneck kinds "
        "they apply to, what they detect, and whether the gate runs them for the parent's "
        "bottleneck."
    )
    input_schema = {"type": "object", "properties": {}, "additionalProperties": False}

    def __init__(self, settings: Any = None, catalog: Callable[[], list[type]] | None = None) -> None:
        super().__init__(settings)
        self._catalog = catalog or _installed_micro_profilers

    def available(self, context: ToolContext) -> bool:
        return _parent_profilable(context)  # the list is for choosing what to run on the parent

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        found = context.micro_profilers() if context.micro_profilers is not None else self._catalog()
        # the catalogs list what kernelpro_register_micro_profilers registered: MicroProfiler classes
        classes = cast(list[type[MicroProfiler]], found)
        if not classes:
            return "No micro-profilers are installed."
        bottleneck = None
        if context.parent is not None and context.parent.analysis is not None:
            bottleneck = context.parent.analysis.bottleneck
        lines = []
        if bottleneck is not None:
            lines.append(f"Parent bottleneck: {bottleneck.kind}.")
        for cls in sorted(classes, key=lambda c: c.name):
            applies = ", ".join(sorted(cls.applies_to))
            line = f"- {cls.name} ({cls.level} level; applies to: {applies})"
            if bottleneck is not None:
                try:
                    gated = cls().applies(bottleneck)
                except Exception:
                    gated = None
                if gated is not None:
                    line += "; gate: runs" if gated else "; gate: skipped"
            lines.append(line + (f": {cls.description}" if cls.description else ""))
        return "\n".join(lines)


@attrs.frozen
class CompileCheckSettings:
    nvcc: str = "nvcc"
    timeout_s: float = 180.0  # a snippet that includes torch/extension.h takes ~30-60 s
    max_error_lines: int = 40


#: nvcc flags a model may add: macros, optimisation level, language standard, fast math,
#: register caps, line info, ptxas options. Anything that writes files or runs programs
#: (-o, -run, --compiler-bindir, ...) is refused.
_ALLOWED_FLAG = re.compile(
    r"^(-D[A-Za-z_]\w*(=[\w.+-]*)?|-O[0-3]|-std=c\+\+(14|17|20)|-?-use_fast_math|-lineinfo"
    r"|-?-maxrregcount=\d+|--expt-relaxed-constexpr|--expt-extended-lambda|-Xptxas=[\w,=.-]+"
    r"|--extra-device-vectorization|-DNDEBUG|--ftz=(true|false)|--prec-div=(true|false)"
    r"|--prec-sqrt=(true|false)|--fmad=(true|false))$"
)
_ARCH = re.compile(r"^sm_\d{2,3}[af]?$")
_PTXAS_INFO = re.compile(r"ptxas info\s*:|bytes stack frame|spill")


class CompileCheck(LLMTool):
    name = "compile_check"
    description = (
        "Compile a CUDA C++ source (the contents of a .cu file) with nvcc -Xptxas -v and "
        "return the compiler errors, or on success the registers, shared memory and spills "
        "of every kernel. Does not run anything. Pass the kernels and plain C++ helpers: "
        "torch/extension.h includes are resolved but add about a minute."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "source": {"type": "string", "description": "CUDA C++ source"},
            "arch": {"type": "string", "description": "target, e.g. sm_90 (default: the run's GPU)"},
            "flags": {"type": "array", "items": {"type": "string"}, "description": "extra nvcc flags"},
        },
        "required": ["source"],
        "additionalProperties": False,
    }
    Settings = CompileCheckSettings

    def available(self, context: ToolContext) -> bool:
        return shutil.which(self.settings.nvcc) is not None

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        s: CompileCheckSettings = self.settings
        nvcc = shutil.which(s.nvcc)
        if nvcc is None:
            raise ToolError(f"{s.nvcc} is not on PATH on this machine: compile checks are unavailable")
        arch = arguments.get("arch") or (context.gpu.arch if context.gpu else "sm_90")
        if not _ARCH.match(arch):
            raise ToolError(f"arch must look like sm_90 or sm_90a, got {arch!r}")
        flags = list(arguments.get("flags", []))
        bad = [f for f in flags if not _ALLOWED_FLAG.match(f)]
        if bad:
            raise ToolError(
                f"flag {bad[0]!r} is not allowed; allowed: -D..., -O0..3, -std=c++17, "
                "--use_fast_math, -lineinfo, --maxrregcount=N, --expt-relaxed-constexpr, "
                "-Xptxas=..., --ftz/--prec-div/--prec-sqrt/--fmad=true|false"
            )
        source = arguments["source"]
        includes: list[str] = []
        if re.search(r"#include\s*[<\"](torch/|ATen/|c10/)", source):
            includes = _torch_includes()
        if re.search(r"#include\s*[<\"](cute/|cutlass/)", source):
            from kernelpro.evaluate.toolchain import include_paths

            includes += include_paths([])  # what plugins contribute (kernelpro_cute: CUTLASS/CuTe)
        base = context.workdir if context.workdir is not None else None
        if base is not None:
            Path(base).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="compile_check_", dir=base) as tmp:
            src = Path(tmp) / "snippet.cu"
            src.write_text(source)
            cmd = [nvcc, "-c", str(src), "-o", str(Path(tmp) / "snippet.o"), f"-arch={arch}",
                   "-std=c++17", "-Xptxas", "-v", "-DTORCH_EXTENSION_NAME=compile_check",
                   *(f"-I{p}" for p in includes), *flags]
            t0 = time.monotonic()
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=s.timeout_s, cwd=tmp)
            except subprocess.TimeoutExpired:
                raise ToolError(f"nvcc did not finish within {s.timeout_s:.0f} s") from None
            seconds = time.monotonic() - t0
            log = (proc.stdout + proc.stderr).replace(str(src), "snippet.cu").replace(tmp + "/", "")
        if proc.returncode != 0:
            return f"compile failed for {arch} (nvcc exit {proc.returncode}, {seconds:.1f} s):\n" + _errors(
                log, s.max_error_lines
            )
        info = [ln.strip() for ln in log.splitlines() if _PTXAS_INFO.search(ln)]
        return f"compiled OK for {arch} in {seconds:.1f} s\n" + ("\n".join(info) or "(no ptxas report)")


def _errors(log: str, max_lines: int) -> str:
    """The error lines of a compiler log, each with the two lines after it (the source
    line and caret), at most ``max_lines`` lines; the log's tail when nothing matches."""
    lines = log.splitlines()
    keep: list[int] = []
    for i, line in enumerate(lines):
        if re.search(r"\berror\b", line, re.I):
            keep.extend(range(i, min(i + 3, len(lines))))
    picked = [lines[i] for i in dict.fromkeys(keep)] or lines[-max_lines:]
    cut = len(picked) - max_lines
    picked = picked[:max_lines]
    if cut > 0:
        picked.append(f"[... {cut} more lines]")
    return "\n".join(picked)


def _torch_includes() -> list[str]:
    """Include directories for torch/extension.h: torch's and Python's."""
    try:
        from torch.utils.cpp_extension import include_paths
    except ImportError:
        raise ToolError("torch is not importable here, so torch/extension.h cannot be resolved") from None
    paths = list(include_paths())
    py_include = sysconfig.get_paths().get("include")
    if py_include and os.path.isdir(py_include):
        paths.append(py_include)
    return paths


@hookimpl
def kernelpro_register_llm_tools(register):
    register(RunMicroProfiler)
    register(ListMicroProfilers)
    register(CompileCheck)


__all__ = [
    "ToolBox",
    "RunMicroProfiler",
    "ListMicroProfilers",
    "CompileCheck",
    "format_analysis",
    "schema_problem",
]
