"""Retrieval presets, the Hopper heuristic, build flags and plugin registration."""

from __future__ import annotations

import pluggy
import pytest
from kernelpro import hookspecs
from kernelpro.api import ArchHeuristic, LLMTool, ProfileContext
from kernelpro.records import Bottleneck, GpuSpec

import kernelpro_cute
from kernelpro_cute import plugin
from kernelpro_cute.heuristics import CutePresetHeuristic, CutePresetSettings
from kernelpro_cute.presets import presets_for

from .conftest import real_corpus_or_skip

H200 = GpuSpec(name="H200 SXM", match=("h200",), arch="sm_90", sm_count=132,
               dram_bandwidth_gbs=4800.0, l2_bytes=50 * 2**20, smem_per_sm_bytes=228 * 1024,
               fp32_tflops=67.0, fp64_tflops=34.0, tf32_tflops=495.0, bf16_tflops=989.0,
               fp16_tflops=989.0)


def test_presets_by_bottleneck_and_arch():
    compute90 = [p for p, _ in presets_for("compute", "sm_90")]
    assert compute90[0] == "examples/cute/tutorial/hopper/wgmma_tma_sm90.cu"
    assert "include/cute/atom/mma_traits_sm90_gmma.hpp" in compute90
    assert [p for p, _ in presets_for("compute", "sm_90a")] == compute90
    memory = [p for p, _ in presets_for("memory", "sm_90")]
    assert memory[0] == "examples/cute/tutorial/tiled_copy.cu"
    assert "include/cute/arch/copy_sm90_tma.hpp" in memory  # TMA is an option on Hopper
    assert "include/cute/arch/copy_sm90_tma.hpp" not in [p for p, _ in presets_for("memory", "sm_80")]
    assert presets_for("compute", "sm_80")[0][0] == "examples/cute/tutorial/sgemm_sm80.cu"
    assert presets_for("compute", "sm_100a")[0][0].startswith("examples/cute/tutorial/blackwell/")
    assert presets_for(None, None)[0][0] == "examples/cute/tutorial/sgemm_1.cu"
    for kind in ("compute", "memory", "latency", "too_little_work", "unknown"):
        refs = presets_for(kind, "sm_90")
        assert refs and len({p for p, _ in refs}) == len(refs)
        assert all(why for _, why in refs)


def test_every_preset_exists_in_the_installed_corpus():
    corpus = real_corpus_or_skip()
    for kind in ("compute", "memory", "latency", "unknown"):
        for arch in ("sm_80", "sm_90", "sm_100"):
            for path, _ in presets_for(kind, arch):
                assert (corpus.root / path).is_file(), path
    assert presets_for("compute", "sm_90", corpus) == presets_for("compute", "sm_90")


def test_presets_drop_files_absent_from_a_corpus(mini_corpus):
    assert presets_for("memory", "sm_90", mini_corpus) == [
        (p, why) for p, why in presets_for("memory", "sm_90")
        if p in ("examples/cute/tutorial/tiled_copy.cu", "include/cute/atom/copy_atom.hpp",
                 "include/cute/swizzle.hpp", "include/cute/arch/copy_sm90_tma.hpp")]


def test_heuristic_is_silent_unless_cute_output_is_on(monkeypatch):
    monkeypatch.delenv("KERNELPRO_CUTE_OUTPUT", raising=False)
    h = CutePresetHeuristic()
    assert h.applies(H200) and not h.applies(None)
    assert h.prompt_notes(H200) == []
    monkeypatch.setenv("KERNELPRO_CUTE_OUTPUT", "1")
    assert CutePresetHeuristic().settings.cute_output is True


def test_heuristic_notes_and_advice(mini_corpus):
    h = CutePresetHeuristic(CutePresetSettings(cute_output=True, cutlass_path=str(mini_corpus.root)))
    notes = h.prompt_notes(H200)
    assert "build_flags()" in notes[0] and "cute_search" in notes[0]
    memory_note = [n for n in notes if n.startswith("For memory-bound tiles on sm_90")]
    assert memory_note and "examples/cute/tutorial/tiled_copy.cu" in memory_note[0]
    # the fixture corpus has no Hopper tutorial: absent files are not offered
    assert not any("wgmma_tma_sm90.cu" in n for n in notes)
    ctx = ProfileContext(gpu=H200, device="cuda")
    findings = h.advise(Bottleneck(kind="memory", summary="DRAM bound"), {}, ctx)
    assert len(findings) == 1 and findings[0].severity == "info"
    assert "tiled_copy.cu" in findings[0].action
    assert h.advise(None, {}, ctx) == []


def test_heuristic_notes_on_the_real_corpus():
    corpus = real_corpus_or_skip()
    h = CutePresetHeuristic(CutePresetSettings(cute_output=True, cutlass_path=str(corpus.root)))
    notes = h.prompt_notes(H200)
    compute = [n for n in notes if n.startswith("For compute-bound matrix work on sm_90")]
    assert compute and "examples/cute/tutorial/hopper/wgmma_tma_sm90.cu" in compute[0]


def test_plugin_registers_tools_heuristic_and_commands():
    pm = pluggy.PluginManager("kernelpro")
    pm.add_hookspecs(hookspecs)
    pm.register(plugin)
    tools, heuristics = [], []
    pm.hook.kernelpro_register_llm_tools(register=tools.append)
    pm.hook.kernelpro_register_heuristics(register=heuristics.append)
    assert [t.name for t in tools] == ["cute_search", "cute_read", "cute_list"]
    assert all(issubclass(t, LLMTool) for t in tools)
    assert heuristics == [CutePresetHeuristic] and issubclass(CutePresetHeuristic, ArchHeuristic)
    assert CutePresetHeuristic.archs == ("sm_90",)
    import click

    @click.group()
    def cli():
        pass

    pm.hook.kernelpro_register_commands(cli=cli)
    assert set(cli.commands["cute"].commands) == {"search", "show", "index"}


def test_build_flags(mini_corpus):
    flags = kernelpro_cute.build_flags(cutlass_path=mini_corpus.root)
    assert flags["extra_include_paths"] == [str(mini_corpus.root / "include"),
                                            str(mini_corpus.root / "tools/util/include")]
    cuda = flags["extra_cuda_cflags"]
    assert "-std=c++17" in cuda and "--expt-relaxed-constexpr" in cuda
    assert "-gencode=arch=compute_90a,code=sm_90a" in cuda
    assert "-U__CUDA_NO_HALF_OPERATORS__" in cuda and "-U__CUDA_NO_BFLOAT16_CONVERSIONS__" in cuda
    assert not any(f.startswith("-std") for f in flags["extra_cflags"])  # torch picks the host standard
    assert "-gencode=arch=compute_100a,code=sm_100a" in kernelpro_cute.nvcc_flags("sm_100a")
    with pytest.raises(ValueError, match="sm_90a"):
        kernelpro_cute.nvcc_flags("hopper")


def test_build_flags_on_the_installed_package():
    corpus = real_corpus_or_skip()
    inc = kernelpro_cute.build_flags()["extra_include_paths"]
    assert inc[0] == str(corpus.root / "include")
    from pathlib import Path

    assert (Path(inc[0]) / "cute" / "tensor.hpp").is_file()
    assert (Path(inc[0]) / "cute" / "atom" / "mma_traits_sm90_gmma.hpp").is_file()
