"""show_sass returns the parent's SASS for a kernel, resource usage first."""

from __future__ import annotations

import shutil

import pytest

from kernelpro.api import ParentInfo, ToolContext, ToolError

from kernelpro_plugins_sass.llm_tool import ShowSass


@pytest.fixture
def run_dir(tmp_path, compiled):
    builds = tmp_path / "builds" / "n7"
    builds.mkdir(parents=True)
    shutil.copy(compiled["gemm_fp32_smem"].cubin, builds / "gemm.cubin")
    shutil.copy(compiled["local_array"].cubin, builds / "local.cubin")
    return tmp_path


def context(run_dir):
    parent = ParentInfo(id="n7", source="", result=None, analysis=None)
    return ToolContext(problem=None, parent=parent, device="cuda", gpu=None, run_dir=run_dir)


def test_show_sass_for_one_kernel(run_dir):
    text = ShowSass().run({"kernel": "sgemm", "max_lines": 500}, context(run_dir))
    lines = text.splitlines()
    assert lines[0].startswith("// kernel sgemm_tiled(")
    assert any(ln.startswith("// arch sm_90; registers") for ln in lines[:4])
    assert any("[L1] FFMA" in ln for ln in lines)
    assert "spill_heavy" not in text


def test_show_sass_trims_to_loop_bodies(run_dir):
    text = ShowSass().run({"kernel": "spill_heavy", "max_lines": 40}, context(run_dir))
    body = [ln for ln in text.splitlines() if ln.startswith("/*")]
    assert len(body) == 40 and all("[L" in ln for ln in body)
    assert "trimmed: 40 of" in text
    header = [ln for ln in text.splitlines() if ln.startswith("// arch")][0]
    assert "registers 32" in header and "stack 440 B" in header  # cuobjdump -res-usage


def test_show_sass_unknown_kernel(run_dir):
    with pytest.raises(ToolError) as info:
        ShowSass().run({"kernel": "nope"}, context(run_dir))
    assert "sgemm_tiled" in str(info.value) and "\n" not in str(info.value)


def test_show_sass_without_build(tmp_path):
    with pytest.raises(ToolError):
        ShowSass().run({"kernel": "x"}, context(tmp_path))


def test_show_sass_without_parent(run_dir):
    ctx = ToolContext(problem=None, parent=None, device="cuda", gpu=None, run_dir=run_dir)
    with pytest.raises(ToolError) as info:
        ShowSass().run({"kernel": "sgemm"}, ctx)
    assert "no parent" in str(info.value)


def test_show_sass_quotes_source_lines(tmp_path, compiled):
    builds = tmp_path / "builds" / "n7"
    builds.mkdir(parents=True)
    shutil.copy(compiled["intdiv_loop"].cubin, builds / "k.cubin")  # built with -lineinfo
    text = ShowSass().run({"kernel": "gather_rows"}, context(tmp_path))
    assert "// intdiv_loop.cu:4" in text
