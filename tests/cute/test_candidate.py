"""The CuTe evidence problem and candidates: static checks here, and the kernels'
translation units compiled standalone with nvcc and ``build_flags()`` for sm_90a (the
part of a load_inline build that can fail on CuTe code), with HGMMA counted in the SASS
when cuobjdump is available. Running them needs the H200 (tools/capture/cute/gpu_capture.py)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kernelpro.problem import check_candidate, detect_language, load_problem

import kernelpro_cute

from .conftest import real_corpus_or_skip

EXAMPLES = Path(__file__).resolve().parents[2] / "tools" / "capture" / "cute" / "examples"
PROBLEM = EXAMPLES / "gemm_bf16_problem.py"
CANDIDATES = [EXAMPLES / "gemm_bf16_wgmma.py", EXAMPLES / "gemm_bf16_wgmma_ws.py"]


def _cuda_source(path: Path) -> str:
    """The candidate's CUDA_SRC string, read without importing it (importing builds the
    extension, which needs a CUDA build of torch)."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CUDA_SRC" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.name} defines no CUDA_SRC")


@pytest.mark.parametrize("candidate", CANDIDATES, ids=lambda p: p.stem)
def test_problem_and_candidate_pass_the_static_contract(candidate):
    problem = load_problem(PROBLEM)
    assert problem.forward_args == ("A", "B")
    source = candidate.read_text()
    check_candidate(source, problem, where=str(candidate))
    assert detect_language(source) == "cute"
    cuda = _cuda_source(candidate)
    assert "SM90_TMA_LOAD" in cuda and "BF16BF16_SS" in cuda
    assert re.search(r"^_extension\(\)$", source, re.M)  # built at import, for the compile stage


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:  # the nvidia-cuda-cuobjdump wheel
        import nvidia

        for base in nvidia.__path__:
            for exe in Path(base).glob("*/bin/cuobjdump"):
                return str(exe)
    except ImportError:
        pass
    return None


@pytest.mark.slow
def test_kernel_translation_units_compile_for_sm90a_with_hgmma(tmp_path):
    """Both candidates' kernels, compiled concurrently (about 50 s each on 2 cores)."""
    real_corpus_or_skip()
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    flags = kernelpro_cute.build_flags()
    # load_inline's nvcc call defines these; build_flags() must undo them for CUTLASS
    torch_defines = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                     "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]
    jobs = []
    for candidate in CANDIDATES:
        src = tmp_path / f"{candidate.stem}.cu"
        # load_inline prepends these to every CUDA source; torch's own header is left out
        # so the test runs without a CUDA build of torch
        src.write_text("#include <cuda.h>\n#include <cuda_runtime.h>\n" + _cuda_source(candidate))
        obj = tmp_path / f"{candidate.stem}.o"
        cmd = [nvcc, "-c", str(src), "-o", str(obj), "-Xcompiler", "-fPIC", "-Xptxas", "-v",
               *torch_defines, *(f"-I{p}" for p in flags["extra_include_paths"]),
               *flags["extra_cuda_cflags"]]
        jobs.append((candidate, obj, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                      stderr=subprocess.PIPE, text=True)))
    dump = _cuobjdump()
    for candidate, obj, proc in jobs:
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{candidate.name}: {err[-4000:]}"
        assert "0 bytes spill stores" in err, candidate.name
        if dump is None:
            continue
        sass = subprocess.run([dump, "-sass", str(obj)], capture_output=True, text=True,
                              timeout=120).stdout
        assert re.search(r"\bHGMMA\.64x\d+x16\.F32\.BF16", sass), candidate.name
        assert "UTMALDG" in sass, candidate.name
