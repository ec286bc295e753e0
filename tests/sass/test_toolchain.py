"""Finding cuobjdump/nvdisasm, and the one-line error when they are missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpro.api import CollectorError, ProfileTarget

from kernelpro_plugins_sass import toolchain
from kernelpro_plugins_sass.collector import SassAnalyzer, SassCollector, collect_build_dir


@pytest.fixture
def no_tools(monkeypatch):
    monkeypatch.setattr(toolchain, "candidate_paths", lambda tool: [])


def test_missing_tool_error_is_one_line(no_tools):
    with pytest.raises(CollectorError) as info:
        toolchain.require_tool("cuobjdump")
    text = str(info.value)
    assert "\n" not in text
    assert "pip install nvidia-cuda-cuobjdump" in text


def test_collector_and_analyzer_report_missing_tools(no_tools, tmp_path, build_dir):
    reason = SassCollector().unavailable_reason(
        ProfileTarget(problem_path=Path("p"), candidate_path=Path("c"), device="cuda", workdir=tmp_path))
    assert reason and "\n" not in reason and "nvidia-cuda-cuobjdump" in reason
    with pytest.raises(CollectorError) as info:
        collect_build_dir(build_dir)
    assert "\n" not in str(info.value) and "nvidia-cuda-cuobjdump" in str(info.value)
    cubin = next(build_dir.rglob("*.cubin"))
    with pytest.raises(CollectorError) as info:
        SassAnalyzer().load(cubin)
    assert "\n" not in str(info.value)


def test_pypi_wheel_layout_is_searched(monkeypatch, tmp_path):
    """With nothing on PATH and no CUDA_HOME, the wheel's binary (nvidia/cu13/bin or
    nvidia/cuda_cuobjdump/bin under site-packages) is found."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if any(Path(p).is_file() for p in Path("/usr/local").glob("cuda*/bin/cuobjdump")):
        pytest.skip("a toolkit cuobjdump comes first on this machine")
    found = toolchain.find_tool("cuobjdump")
    if found is None:
        pytest.skip("nvidia-cuda-cuobjdump is not installed")
    assert "site-packages" in str(found) and found.parent.name == "bin"
    assert found.parent.parent.parent.name == "nvidia"


def test_fake_wheel_layouts(monkeypatch, tmp_path):
    sp = tmp_path / "site-packages"
    for rel in ("nvidia/cu13/bin/nvdisasm", "nvidia/cuda_cuobjdump/bin/cuobjdump"):
        p = sp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
    monkeypatch.setattr(toolchain, "_site_dirs", lambda: [sp])
    paths = [str(p) for p in toolchain.candidate_paths("nvdisasm")]
    assert str(sp / "nvidia/cu13/bin/nvdisasm") in paths
    paths = [str(p) for p in toolchain.candidate_paths("cuobjdump")]
    assert str(sp / "nvidia/cuda_cuobjdump/bin/cuobjdump") in paths


def test_demangle():
    names = toolchain.demangle(["_Z11gather_rowsPKfPfiii", "triton_add"])
    assert names["triton_add"] == "triton_add"
    if names["_Z11gather_rowsPKfPfiii"] == "_Z11gather_rowsPKfPfiii":
        pytest.skip("no c++filt here")
    assert names["_Z11gather_rowsPKfPfiii"].startswith("gather_rows(")


def test_nvdisasm_fallback_for_cubins(monkeypatch, compiled, build_dir):
    """Without cuobjdump, plain cubins are still disassembled with nvdisasm (no resource
    usage, and a note says so); host binaries need cuobjdump."""
    from kernelpro_plugins_sass import binaries

    real = binaries.find_tool
    if real("nvdisasm") is None:
        pytest.skip("no nvdisasm")
    monkeypatch.setattr(binaries, "find_tool", lambda tool: None if tool == "cuobjdump" else real(tool))
    result = binaries.disassemble(compiled["intdiv_loop"].cubin)
    (k,) = result.kernels
    assert k.mangled == "_Z11gather_rowsPKfPfiii" and k.loops and k.resources is None
    assert any("nvidia-cuda-cuobjdump" in n for n in result.notes)
    so = build_dir / "torch_extensions" / "sass_ext" / "sass_ext.so"
    with pytest.raises(CollectorError) as info:
        binaries.disassemble(so)
    assert "\n" not in str(info.value) and "nvidia-cuda-cuobjdump" in str(info.value)
