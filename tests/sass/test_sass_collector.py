"""The collector finds machine code in a candidate's build directory and the analyzer reads
files given to ``kernelpro analyze``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpro.api import CollectorError, ProfileTarget
from kernelpro.records import to_json

from kernelpro_plugins_sass.collector import NO_MACHINE_CODE, SassAnalyzer, SassCollector
from kernelpro_plugins_sass.binaries import find_machine_code

KERNELS = Path(__file__).parent / "kernels"


def target(build_dir):
    return ProfileTarget(problem_path=Path("p.py"), candidate_path=Path("c.py"), device="cuda",
                         workdir=Path("."), build_dir=build_dir)


def test_finds_extension_and_triton_code(build_dir):
    codes = find_machine_code(build_dir)
    names = {c.path.name: c.origin for c in codes}
    # the .so carries the extension's device code; its .cuda.o duplicate and the host-only
    # main.o are skipped
    assert names == {"sass_ext.so": "torch_extension", "scale4_scalar.cubin": "triton"}
    triton = next(c for c in codes if c.origin == "triton")
    assert triton.ptx is not None and triton.metadata["num_warps"] == 4


def test_collect_build_dir(build_dir):
    profile = SassCollector().collect(target(build_dir), stage=1)
    assert profile.level == "instruction" and profile.collector == "sass"
    by_name = {e.kernel.name.split("(")[0]: e for e in profile.payload.entries}
    assert set(by_name) == {"histogram_local", "spill_heavy", "scale4_scalar"}
    assert by_name["scale4_scalar"].origin == "triton"
    assert by_name["spill_heavy"].origin == "torch_extension"
    # build.log (ptxas -v) adds spill bytes to cuobjdump's registers/stack
    res = by_name["spill_heavy"].kernel.resources
    assert res.spill_store_bytes > 0 and res.registers is not None and "ptxas -v" in res.source
    # Triton's PTX re-assembled with ptxas -v
    assert "ptxas -v" in by_name["scale4_scalar"].kernel.resources.source
    kp = {k.name.split("(")[0]: k for k in profile.kernels}
    assert kp["spill_heavy"].metrics["sass.spill_store_bytes"] == res.spill_store_bytes
    assert kp["spill_heavy"].metrics["sass.local_loads"] > 0
    # stage 2 returns the same data
    again = SassCollector().collect(target(build_dir), stage=2, metrics=("sass.ptxas_log",))
    assert [k.name for k in again.kernels] == [k.name for k in profile.kernels]


def test_profile_serialises(build_dir):
    profile = SassCollector().collect(target(build_dir), stage=1)
    data = to_json(profile)
    assert data["level"] == "instruction" and len(data["kernels"]) == 3


def test_pure_pytorch_candidate_has_a_note(tmp_path):
    (tmp_path / "torch_extensions").mkdir()
    profile = SassCollector().collect(target(tmp_path), stage=1)
    assert profile.kernels == () and profile.notes == (NO_MACHINE_CODE,)
    profile = SassCollector().collect(target(None), stage=1)
    assert profile.kernels == () and "no build directory" in profile.notes[0]


def test_analyzer_accepts():
    an = SassAnalyzer()
    for name in ("k.cubin", "k.fatbin", "k.o", "k.so", "k.cu", "k.ptx", "libk.so.1"):
        assert an.accepts(Path(name)), name
    for name in ("k.ncu-rep", "k.nsys-rep", "k.py", "k.json"):
        assert not an.accepts(Path(name)), name


def test_analyzer_reads_binaries(build_dir, compiled):
    an = SassAnalyzer()
    so = an.load(build_dir / "torch_extensions" / "sass_ext" / "sass_ext.so")
    assert {k.name.split("(")[0] for k in so.kernels} == {"histogram_local", "spill_heavy"}
    obj = an.load(build_dir / "torch_extensions" / "sass_ext" / "cuda.cuda.o")
    assert len(obj.kernels) == 2
    cubin = an.load(compiled["gemm_fp32_smem"].cubin)
    assert cubin.kernels[0].name.startswith("sgemm_tiled")
    ptx = an.load(build_dir / "triton" / "A1B2C3D4" / "scale4_scalar.ptx")
    assert ptx.kernels[0].name.startswith("scale4_scalar")
    assert ptx.payload.entries[0].kernel.resources.registers is not None


def test_analyzer_compiles_cu_with_arch_directive():
    profile = SassAnalyzer().load(KERNELS / "wgmma_sm90a.cu")
    assert {e.kernel.arch for e in profile.payload.entries} == {"sm_90a"}
    assert all(e.features.warpgroup_mma > 0 for e in profile.payload.entries)


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text, repr(text)
    return text


def test_analyzer_compile_error_is_one_line(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* x) { x[0] = undefined_name; }\n")
    with pytest.raises(CollectorError) as info:
        SassAnalyzer().load(bad)
    text = one_line(info.value)
    assert text.startswith("nvcc on bad.cu failed:") and "undefined_name" in text


def test_analyzer_bad_inputs_are_one_line(tmp_path):
    not_elf = tmp_path / "fake.so"
    not_elf.write_text("not a binary")
    with pytest.raises(CollectorError) as info:
        SassAnalyzer().load(not_elf)
    assert "no CUDA device code" in one_line(info.value)
    with pytest.raises(CollectorError) as info:
        SassAnalyzer().load(tmp_path / "missing.cubin")
    assert "no such file" in one_line(info.value)


def test_fat_binary_picks_one_arch(tmp_path, toolchain):
    """A .so with sm_80 and sm_90 code (and PTX): the newest arch, or the one asked for."""
    import subprocess

    from kernelpro_plugins_sass.toolchain import find_tool

    so = tmp_path / "fat.so"
    subprocess.run([str(find_tool("nvcc")), "-shared", "-Xcompiler", "-fPIC",
                    "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
                    "-gencode=arch=compute_90,code=compute_90", "-o", str(so),
                    str(KERNELS / "vec_copy_float4.cu")], check=True, capture_output=True)
    newest = SassAnalyzer().load(so)
    assert [e.kernel.arch for e in newest.payload.entries] == ["sm_90"]
    older = SassAnalyzer(SassAnalyzer.Settings(arch="sm_80")).load(so)
    assert [e.kernel.arch for e in older.payload.entries] == ["sm_80"]


def test_triton_autotuning_variants_are_kept(tmp_path, build_dir):
    """Two cache entries of one Triton kernel (two configs): both kept, names tell them apart."""
    import json
    import shutil

    src = build_dir / "triton" / "A1B2C3D4"
    for name, warps in (("HASHONE0000", 4), ("HASHTWO0000", 8)):
        d = tmp_path / "triton" / name
        shutil.copytree(src, d)
        (d / "scale4_scalar.json").write_text(json.dumps({"name": "scale4_scalar", "num_warps": warps,
                                                           "num_stages": 3}))
    profile = SassCollector().collect(target(tmp_path), stage=1)
    names = sorted(k.name for k in profile.kernels)
    assert len(names) == 2 and all(n.startswith("scale4_scalar(") for n in names)
    assert names[0].endswith(" [HASHONE000, num_warps=4, num_stages=3]")
    assert names[1].endswith(" [HASHTWO000, num_warps=8, num_stages=3]")
