"""Every kernel the templates render compiles for sm_90 (H200) down to a cubin.

Triton compiles for a GPU target without a GPU; this catches what the interpreter
accepts but the compiler rejects. Runs in a subprocess without TRITON_INTERPRET."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="triton is not installed: kernels cannot be compiled here")

from test_kernels import CASES as INTERPRETED  # noqa: E402

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

# bf16 GEMMs compile only: Triton's interpreter computes tl.dot of bf16 tiles wrongly
# (3.5.1: a NumPy product of the raw 16-bit values), so they cannot be checked there
# (and a batch norm whose eval-mode form works by planes: its eval mode is checked in the
# interpreter by test_batch_norm_candidate_follows_the_module_mode)
CASES = INTERPRETED + ["gemm_bf16_relu", "batch_norm2d_planes"]
TENSOR_CORE_GEMMS = ("gemm_fp16_tanh", "gemm_bf16_relu")


@pytest.fixture(scope="module")
def compiled():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(Path(__file__).parent / "compile_candidates.py"), *CASES],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("name", CASES)
def test_kernels_compile_for_sm90(compiled, name):
    rows = [r for r in compiled if r["name"] == name]
    assert len(rows) >= 2, f"{name}: expected kernels of at least two tile variants, got {rows}"
    assert all(r["cubin_bytes"] > 0 for r in rows)


@pytest.mark.parametrize("name", ["batch_norm2d", "batch_norm1d_relu", "batch_norm2d_planes"])
def test_batch_norm_compiles_in_both_modes(compiled, name):
    """Training mode: the per-channel statistics kernel; eval mode: the affine kernel."""
    kernels = {r["kernel"].rsplit("/", 1)[1] for r in compiled if r["name"] == name}
    assert {"_kp_r0_kernel", "_kp_r0_affine_kernel"} <= kernels, kernels


@pytest.mark.parametrize("name", TENSOR_CORE_GEMMS)
def test_half_precision_gemms_use_tensor_cores(compiled, name):
    gemm = [r for r in compiled if r["name"] == name and r["kernel"].endswith("_r1_kernel")]
    assert gemm and all(r["ptx_mma"] for r in gemm), gemm


def test_fp32_gemm_precisions(compiled):
    """ieee: FMA products (no MMA instruction); tf32x3: tensor-core MMAs (variants: ieee,
    tf32x3, ieee with one more stage)."""
    rows = [r for r in compiled if r["name"] == "linear_relu_odd" and r["kernel"].endswith("_r1_kernel")]
    assert [r["ptx_mma"] for r in rows] == [False, True, False], rows


@pytest.mark.parametrize("name", ["avg_pool1d_long_rows", "max_pool1d_long_rows", "dwconv2d_valid_wide_rows"])
def test_vector_windows_load_16_bytes_at_a_time(compiled, name):
    """The vector windowed form reads its inputs with 128-bit loads, as a real launch
    specializes aligned pointers (compile_launch does the same)."""
    rows = [r for r in compiled if r["name"] == name and r["vec"]]
    assert len(rows) == 2 and all(r["ptx_v4_loads"] for r in rows), rows


@pytest.mark.parametrize("name", ["kl_div_log", "log_softplus_chain"])
def test_fast_logs_come_from_the_special_function_unit(compiled, name):
    """FASTLOG 1: the kernel's logs are lg2.approx.f32 (no libdevice polynomial); the
    exact variants have none. The interpreter runs the exact log in its place, so this
    compile is the test's only view of the fast form."""
    rows = [r for r in compiled if r["name"] == name]
    fast = [r for r in rows if r["fast_log"]]
    assert fast and all(r["ptx_lg2"] for r in fast), rows
    assert all(not r["ptx_lg2"] for r in rows if not r["fast_log"]), rows
