"""CUTLASS/CuTe headers are found without CUTLASS_PATH when kernelpro_cute is installed:
by the evaluator's include paths and by the compile_check LLM tool."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("kernelpro_cute")


def test_include_paths_fall_back_to_the_installed_cutlass(monkeypatch):
    from kernelpro.evaluate.toolchain import include_paths

    monkeypatch.delenv("CUTLASS_PATH", raising=False)
    paths = include_paths(["/opt/mine"])
    assert paths[0] == "/opt/mine"
    assert any(p.endswith("/include") and "cutlass" in p for p in paths[1:]), paths


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.slow
def test_compile_check_compiles_a_cute_snippet(monkeypatch):
    from kernelpro.api import ToolContext
    from kernelpro.llm_tools import CompileCheck

    monkeypatch.delenv("CUTLASS_PATH", raising=False)
    src = ("#include <cute/tensor.hpp>\n"
           "__global__ void k(float* x) { using namespace cute;\n"
           "  auto l = make_layout(make_shape(Int<4>{}, Int<8>{})); x[threadIdx.x] = size(l); }\n")
    ctx = ToolContext(problem=None, parent=None, device="cpu", gpu=None, run_dir=None)
    out = CompileCheck().run({"source": src, "arch": "sm_90"}, ctx)
    assert out.startswith("compiled OK for sm_90"), out
    assert "Used" in out and "registers" in out
