"""ptxas logs for load_inline builds, recovered by re-running build.ninja's nvcc command."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernelpro.api import CollectorError, ProfileTarget

from kernelpro_plugins_sass.collector import PTXAS_LOG_METRIC, SassCollector
from kernelpro_plugins_sass.ninja_rebuild import CACHE_NAME, cuda_compiles, parse_build_ninja, rebuild_ptxas_log
from kernelpro_plugins_sass.toolchain import find_tool

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

KERNELS = Path(__file__).parent / "kernels"

# the shape torch.utils.cpp_extension._write_ninja_file writes (torch 2.x), with the
# torch include flags left out so that it compiles without CUDA torch headers
NINJA = """ninja_required_version = 1.3
cxx = c++
nvcc = {nvcc}

cflags = -DTORCH_EXTENSION_NAME=sass_ext -fPIC -std=c++17
post_cflags =
cuda_cflags = -DTORCH_EXTENSION_NAME=sass_ext -gencode=arch=compute_90,code=sm_90 --compiler-options '-fPIC' -std=c++17
cuda_post_cflags =
cuda_dlink_post_cflags =
sycl_dlink_post_cflags =
ldflags = -shared

rule compile
  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out $post_cflags
  depfile = $out.d
  deps = gcc

rule cuda_compile
  depfile = $out.d
  deps = gcc
  command = $nvcc --generate-dependencies-with-compile --dependency-output $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags

rule link
  command = $cxx $in $ldflags -o $out

build main.o: compile {ext}/main.cpp
build cuda.cuda.o: cuda_compile {ext}/cuda.cu

build sass_ext.so: link main.o cuda.cuda.o

default sass_ext.so
"""


@pytest.fixture(scope="module")
def ninja_build(toolchain, tmp_path_factory):
    root = tmp_path_factory.mktemp("ninja_build")
    ext = root / "torch_extensions" / "sass_ext"
    ext.mkdir(parents=True)
    (ext / "cuda.cu").write_text((KERNELS / "local_array.cu").read_text())
    (ext / "main.cpp").write_text("int host_only() { return 1; }\n")
    nvcc = str(find_tool("nvcc"))
    (ext / "build.ninja").write_text(NINJA.format(nvcc=nvcc, ext=ext))
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90", "-o", str(ext / "sass_ext.so"),
                    str(ext / "cuda.cu")], check=True, capture_output=True)
    return root


def test_parse_and_expand(ninja_build, tmp_path):
    ninja = ninja_build / "torch_extensions" / "sass_ext" / "build.ninja"
    variables, rules, builds = parse_build_ninja(ninja.read_text())
    assert variables["cuda_post_cflags"] == "" and "cuda_compile" in rules
    assert [b[1] for b in builds] == ["compile", "cuda_compile", "link"]
    (c,) = cuda_compiles(ninja, tmp_path)
    assert c.source.name == "cuda.cu"
    assert c.command.endswith("-Xptxas -v") and "$" not in c.command
    assert str(tmp_path) in c.command and "-gencode=arch=compute_90,code=sm_90" in c.command


def test_rebuild_gets_spills(ninja_build):
    log = rebuild_ptxas_log(ninja_build / "torch_extensions" / "sass_ext")
    assert "spill stores" in log and "_Z11spill_heavyPKfPfii" in log


def spills(profile):
    return {k.name.split("(")[0]: k.metrics.get("sass.spill_store_bytes") for k in profile.kernels}


def test_rebuild_modes(ninja_build):
    """The extension's SASS has LDL/STL, so "when_useful" (the default) rebuilds; "never"
    does not; the rebuilt log is cached next to build.ninja and reused."""
    target = ProfileTarget(problem_path=Path("p"), candidate_path=Path("c"), device="cuda",
                           workdir=ninja_build, build_dir=ninja_build)
    ext = ninja_build / "torch_extensions" / "sass_ext"
    (ext / CACHE_NAME).unlink(missing_ok=True)
    never = SassCollector(SassCollector.Settings(rebuild_extension_logs="never")).collect(target, stage=1)
    assert spills(never)["spill_heavy"] is None
    assert any("no ptxas log" in n for n in never.notes)
    assert not (ext / CACHE_NAME).exists()
    useful = SassCollector().collect(target, stage=1)
    assert spills(useful)["spill_heavy"] > 0
    assert (ext / CACHE_NAME).is_file()
    (ext / CACHE_NAME).write_text((ext / CACHE_NAME).read_text().replace(
        "884 bytes spill stores", "885 bytes spill stores"))
    cached = SassCollector().collect(target, stage=2, metrics=(PTXAS_LOG_METRIC,))
    assert spills(cached)["spill_heavy"] == 885  # read from the cache, not recompiled


def test_no_rebuild_without_a_reason(tmp_path, toolchain):
    """An extension without warpgroup MMA or local memory is not recompiled by default."""
    ext = tmp_path / "torch_extensions" / "plain"
    ext.mkdir(parents=True)
    (ext / "cuda.cu").write_text((KERNELS / "vec_copy_float4.cu").read_text())
    nvcc = str(find_tool("nvcc"))
    (ext / "build.ninja").write_text(NINJA.format(nvcc=nvcc, ext=ext))
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90", "-o", str(ext / "plain.so"),
                    str(ext / "cuda.cu")], check=True, capture_output=True)
    target = ProfileTarget(problem_path=Path("p"), candidate_path=Path("c"), device="cuda",
                           workdir=tmp_path, build_dir=tmp_path)
    SassCollector().collect(target, stage=1)
    assert not (ext / CACHE_NAME).exists()
    SassCollector(SassCollector.Settings(rebuild_extension_logs="always")).collect(target, stage=1)
    assert (ext / CACHE_NAME).exists()


def test_rebuild_failure_is_one_line(tmp_path):
    with pytest.raises(CollectorError) as info:
        rebuild_ptxas_log(tmp_path)
    assert "\n" not in str(info.value)
    (tmp_path / "build.ninja").write_text(NINJA.format(nvcc="nvcc-does-not-exist", ext=tmp_path))
    with pytest.raises(CollectorError) as info:
        rebuild_ptxas_log(tmp_path)
    assert "\n" not in str(info.value) and "failed" in str(info.value)
