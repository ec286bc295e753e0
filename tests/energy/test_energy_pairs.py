"""The same-speed pair candidates (tools/capture/energy/pairs/) against their problem's
reference, run by Triton's CPU interpreter on small shapes (tests/energy/pairs_interpret.py,
in a fresh process: both the unmasked path, where the shape is a multiple of the block, and
the masked one), and the capture's PLAN against the candidate files. The H200 sizes and the
energies are the GPU capture's business (tools/capture/energy/gpu_capture.py)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

pytest.importorskip("torch")
pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tools" / "capture" / "energy"
PAIRS = CAPTURE / "pairs"


@pytest.fixture(scope="module")
def capture():
    spec = importlib.util.spec_from_file_location(
        "energy_gpu_capture_pairs", CAPTURE / "gpu_capture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def interpreted():
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("pairs_interpret.py"))],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _variant_names(problem: str) -> set[str]:
    """Keys of the candidates file's VARIANTS dict, read from its source (no Triton needed)."""
    tree = ast.parse((PAIRS / f"{problem}_candidates.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "VARIANTS" for t in node.targets):
            return {k.value for k in node.value.keys}
    raise AssertionError(f"{problem}_candidates.py has no VARIANTS")


def test_plan_names_existing_candidates(capture):
    assert [name for name, _, _ in capture.PROBLEMS] == list(capture.PLAN)
    for problem, names in capture.PLAN.items():
        assert (PAIRS / f"{problem}_problem.py").is_file()
        missing = [n for n in names if n != "reference" and n not in _variant_names(problem)]
        assert not missing, f"{problem}: PLAN names unknown candidates {missing}"
        assert len(names) == len(set(names))


@pytest.mark.parametrize("problem", ["affine", "rowsum", "gemv", "softmax"])
def test_every_candidate_matches_its_reference(capture, interpreted, problem):
    rtol, atol = capture.TOLERANCES[problem]
    variants = interpreted[problem]["variants"]
    assert set(variants) == _variant_names(problem)
    assert set(capture.PLAN.get(problem, ())) - {"reference"} <= set(variants)
    for name, shapes in variants.items():
        assert len(shapes) == 2, name  # both shapes ran
        for shape, r in shapes.items():
            assert r["dtype_ok"], f"{problem}/{name} {shape}: wrong dtype or shape"
            # allclose's bound at the largest |expected| (the check the capture makes, elementwise)
            assert r["max_abs_err"] <= atol + rtol * r["max_abs_expected"], (
                f"{problem}/{name} {shape}: max abs err {r['max_abs_err']:.3g}")


@pytest.mark.parametrize("problem", ["affine", "rowsum", "gemv", "softmax"])
def test_redundant_fmas_add_exactly_zero(interpreted, problem):
    """Each fma<k> variant equals the plain kernel of the same grid bit for bit."""
    same = interpreted[problem]["bitwise_equal_to_fma0"]
    assert same, problem
    for name, results in same.items():
        assert results == [True, True], f"{problem}/{name} differs from its fma0 kernel"


def test_rowsum_rejects_an_unknown_grid():
    env = dict(os.environ, TRITON_INTERPRET="1")
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('c', {str(PAIRS / 'rowsum_candidates.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "try:\n    m.ModelNew(grid='quarter')\nexcept ValueError as e:\n    print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert "unknown rowsum grid 'quarter'" in proc.stdout, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def compiled():
    """One row per candidate kernel compiled for sm_90 (tests/energy/compile_pairs.py)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("compile_pairs.py")), "rowsum", "gemv", "affine",
                           "softmax"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {(r["problem"], r["variant"]): r for r in rows}


@pytest.mark.parametrize("problem", ["rowsum", "gemv", "affine", "softmax"])
def test_every_candidate_compiles_for_sm90(compiled, problem):
    assert {v for p, v in compiled if p == problem} == _variant_names(problem)


@pytest.mark.parametrize("family", ["rowsum/triton_b4096_fma", "rowsum/half_fma", "gemv/triton_fma",
                                    "softmax/triton_fma"])
def test_fma_variants_add_k_fmas_per_element_and_nothing_else(compiled, family):
    """fma<k> has k more fp32 FMAs per element a thread holds than fma0, and the same loads."""
    problem, prefix = family.split("/")
    members = {int(v[len(prefix):]): r for (p, v), r in compiled.items() if p == problem and v.startswith(prefix)}
    assert 0 in members and len(members) >= 2
    base = members[0]["ptx"]
    per_element = set()
    for k, row in members.items():
        if k:
            per_element.add((row["ptx"]["fma_f32"] - base["fma_f32"]) / k)
        loads = {key: n for key, n in row["ptx"].items() if key != "fma_f32"}
        assert loads == {key: n for key, n in base.items() if key != "fma_f32"}, (family, k)
    # one FMA per element: the elements each thread holds per block (16 or 32 here)
    assert len(per_element) == 1 and per_element.pop() in (16.0, 32.0), (family, members)


def test_half_grid_keeps_copies_in_flight(compiled):
    """The persistent rowsum reads through asynchronous copies (Triton's pipeliner), not
    plain loads whose issue order ptxas picks per variant."""
    for v in ("half_fma0", "half_fma2"):
        ptx = compiled[("rowsum", v)]["ptx"]
        assert ptx["cp_async"] > 0 and ptx["ld_global_v4"] == 0 and ptx["ld_global_scalar"] == 0, ptx


@pytest.mark.parametrize("problem,plain,scalar,ratio", [
    ("rowsum", "triton_b4096_fma0", "triton_b4096_scalar", 4),  # fp32: 16-byte vs 4-byte loads
    ("gemv", "triton_fma0", "triton_scalar", 8),  # fp16: 16-byte vs 2-byte loads
    ("affine", "triton_fma0", "triton_scalar", 4),
    ("softmax", "triton_fma0", "triton_scalar", 4),
])
def test_scalar_variants_load_the_same_bytes_in_narrower_loads(compiled, problem, plain, scalar, ratio):
    vec, narrow = compiled[(problem, plain)]["ptx"], compiled[(problem, scalar)]["ptx"]
    assert vec["ld_global_v4"] > 0 and vec["ld_global_scalar"] == 0
    assert narrow["ld_global_v4"] == 0
    assert narrow["ld_global_scalar"] == ratio * vec["ld_global_v4"]
    assert narrow["fma_f32"] == vec["fma_f32"]
