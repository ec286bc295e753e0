"""False-positive check on a production-style Hopper GEMM: the CuTe TMA + wgmma kernel of
kernelpro_cute's example candidate (4-stage TMA ring, mbarrier waits, elect-one TMA issue,
SS WGMMA). Its spin-wait and elect loops are full of predicates and it stores its epilogue
with 32-bit accesses; none of that is a finding. On the H200 this same kernel was analysed
by `kernelpro analyze` (docs/validation/cute_h200) before these rules were tightened."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelpro.api import ProfileContext

from kernelpro_plugins_sass.binaries import disassemble
from kernelpro_plugins_sass.compile import compile_cu
from kernelpro_plugins_sass.payload import build_profile
from kernelpro_plugins_sass.profilers import ALL

EXAMPLE = Path(__file__).resolve().parents[2] / "tools" / "capture" / "cute" / "examples" / "gemm_bf16_wgmma.py"


def cuda_source() -> str:
    tree = ast.parse(EXAMPLE.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CUDA_SRC" for t in node.targets):
            return node.value.value
    raise LookupError("CUDA_SRC not found")


@pytest.fixture(scope="module")
def cute_profile(toolchain, tmp_path_factory):
    try:
        import cutlass_library
    except ImportError:
        pytest.skip("nvidia-cutlass (CUTLASS/CuTe headers) is not installed")
    if not EXAMPLE.exists():
        pytest.skip("kernelpro_cute example not in this checkout")
    root = Path(cutlass_library.__file__).parent / "source"
    out = tmp_path_factory.mktemp("cute_gemm")
    src = out / "gemm_bf16_wgmma.cu"
    src.write_text(cuda_source())
    flags = ("-std=c++17", "--expt-relaxed-constexpr", "-O3", "-DNDEBUG",
             f"-I{root / 'include'}", f"-I{root / 'tools' / 'util' / 'include'}")
    compiled = compile_cu(src, out, "sm_90a", extra_flags=flags, timeout_s=300)
    return build_profile([disassemble(compiled.cubin, "sm_90a", extra_log=compiled.log)], [])


def test_cute_wgmma_gemm_has_no_findings(cute_profile):
    (entry,) = cute_profile.payload.entries
    f = entry.features
    assert f.warpgroup_mma > 0 and f.async_copies > 0  # HGMMA + UTMALDG
    assert f.loops > 50  # mbarrier waits and elect-one issue loops
    findings = [x for cls in ALL for x in cls().analyze(cute_profile, None, ProfileContext(gpu=None, device="cuda"))
                if x.severity != "info"]
    assert findings == []


def test_instruction_mix_names_the_hgmma_instructions(cute_profile):
    """The SASS plugin's own report shows the warpgroup MMA (HGMMA) forms of the CuTe kernel."""
    (entry,) = cute_profile.payload.entries
    assert any(m.startswith("HGMMA.") for m in entry.features.tensor_mnemonics), entry.features.tensor_mnemonics
    mix = [x for cls in ALL for x in cls().analyze(cute_profile, None, ProfileContext(gpu=None, device="cuda"))
           if x.tool == "sass_instruction_mix"]
    assert len(mix) == 1 and "Tensor-core instructions:" in mix[0].message, mix
    assert "HGMMA.64x128x16.F32.BF16 x" in mix[0].message, mix[0].message
    print(mix[0].message)
