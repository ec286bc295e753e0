"""Session fixtures: every kernel in kernels/*.cu compiled once (one nvcc call per file,
two files at a time) into a session temp dir, then disassembled."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelpro_plugins_sass.binaries import disassemble
from kernelpro_plugins_sass.collector import source_arch
from kernelpro_plugins_sass.compile import CompiledSource, compile_cu, default_arch
from kernelpro_plugins_sass.payload import build_profile
from kernelpro_plugins_sass.toolchain import find_tool

KERNELS = Path(__file__).parent / "kernels"
FIXTURES = Path(__file__).parent / "fixtures"


def kernel_sources() -> list[Path]:
    return sorted(KERNELS.glob("*.cu"))


@pytest.fixture(scope="session")
def toolchain() -> None:
    missing = [t for t in ("nvcc", "cuobjdump") if find_tool(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


@pytest.fixture(scope="session")
def compiled(toolchain, tmp_path_factory) -> dict[str, CompiledSource]:
    out = tmp_path_factory.mktemp("sass_cubins")

    def build(src: Path) -> tuple[str, CompiledSource]:
        arch = source_arch(src.read_text()) or default_arch()
        return src.stem, compile_cu(src, out / src.stem, arch)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(build, kernel_sources()))


@pytest.fixture(scope="session")
def profiles(compiled):
    """stem -> ProfileData (level "instruction") with the compile log attached."""
    result = {}
    for stem, c in compiled.items():
        result[stem] = build_profile([disassemble(c.cubin, c.arch, extra_log=c.log, origin="source")], [])
    return result


@pytest.fixture(scope="session")
def build_dir(compiled, tmp_path_factory) -> Path:
    """A candidate build directory laid out like the evaluator's: a load_inline-style
    extension (.so with device code and its .cuda.o), a host-only object, and a Triton cache
    entry (<hash>/<kernel>.cubin + .ptx + .json), built with the real nvcc/ptxas."""
    import json
    import subprocess

    from kernelpro_plugins_sass.compile import compile_ptx

    nvcc = str(find_tool("nvcc"))
    root = tmp_path_factory.mktemp("candidate_build")
    ext = root / "torch_extensions" / "sass_ext"
    ext.mkdir(parents=True)
    src = KERNELS / "local_array.cu"
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90", "-o",
                    str(ext / "sass_ext.so"), str(src)], check=True, capture_output=True)
    subprocess.run([nvcc, "-c", "-Xcompiler", "-fPIC", "-arch=sm_90", "-o",
                    str(ext / "cuda.cuda.o"), str(src)], check=True, capture_output=True)
    (ext / "main.cpp").write_text("int host_only() { return 1; }\n")
    subprocess.run(["g++", "-c", "-o", str(ext / "main.o"), str(ext / "main.cpp")], check=True)
    # the compile log an evaluator keeps: ptxas -v output of the extension's kernels
    (root / "build.log").write_text(compiled["local_array"].log)

    cache = root / "triton" / "A1B2C3D4"
    cache.mkdir(parents=True)
    ptx = cache / "scale4_scalar.ptx"
    subprocess.run([nvcc, "-ptx", "-arch=sm_90", "-o", str(ptx), str(KERNELS / "narrow_loads.cu")],
                   check=True, capture_output=True)
    compile_ptx(ptx, cache)
    (cache / "scale4_scalar.json").write_text(json.dumps({"name": "scale4_scalar", "num_warps": 4,
                                                          "shared": 0, "target": {"arch": 90}}))
    return root
