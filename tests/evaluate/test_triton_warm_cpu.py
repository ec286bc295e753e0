"""Triton kernels compiled in the compile stage, off the GPU (kernelpro.evaluate.triton_warm):
a candidate's kernels land in its entry's Triton cache as cubins for the configured
target, without a GPU; a forward that needs the device stops the warm-up and is not a
failure; no warm-up without the problem, without a target, for plain PyTorch, or when
switched off; done once per entry and problem."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from kernelpro.evaluate import compile as build
from kernelpro.evaluate import triton_warm

pytest.importorskip("triton")

PROBLEM = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return x + y


def get_inputs():
    return [torch.randn(512, 257), torch.randn(512, 257)]


def get_init_inputs():
    return []
"""

CANDIDATE = """\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 512})], key=["n"])
@triton.jit
def _scale_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * 2.0, mask=m)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        twice = torch.empty_like(x)
        _scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](out, twice, n)
        STOP
        return twice / 2
"""


@pytest.fixture
def files(tmp_path):
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    cand = tmp_path / "cand.py"
    cand.write_text(CANDIDATE.replace("        STOP\n", ""))
    return problem, cand


def _config(fast_config, tmp_path, **kw):
    return attrs.evolve(fast_config, build_cache_dir=str(tmp_path / "cache"), cuda_arch="9.0",
                        precompile_triton=True, **kw)


def test_kernels_compile_for_the_target_without_a_gpu(tmp_path, fast_config, files):
    problem, cand = files
    out = build.compile_candidate(cand, config=_config(fast_config, tmp_path), problem_path=problem)
    assert out.status == "skipped" and out.ok  # nothing built at import: the verdict is unchanged
    res = triton_warm.done_for(out.build_dir, build.hashlib.sha256(problem.read_bytes()).hexdigest())
    assert res is not None and res["stopped"] is None, res
    # the plain kernel once, the autotuned one in each of its two configs
    assert sorted(res["kernels"]) == ["_add_kernel", "_scale_kernel", "_scale_kernel"]
    cubins = sorted(p.name for p in (out.build_dir / "triton").rglob("*.cubin"))
    assert cubins == ["_add_kernel.cubin", "_scale_kernel.cubin", "_scale_kernel.cubin"]
    ptx = next((out.build_dir / "triton").rglob("_add_kernel.ptx")).read_text()
    assert ".target sm_90" in ptx
    # a second call for the same problem finds it done
    again = build.compile_candidate(cand, config=_config(fast_config, tmp_path), problem_path=problem)
    assert again.build_dir == out.build_dir
    assert triton_warm.done_for(out.build_dir, res["problem_sha256"])["wall_s"] == res["wall_s"]


def test_a_forward_that_fails_off_the_gpu_stops_the_warm_up_only(tmp_path, fast_config, files):
    problem, _ = files
    cand = tmp_path / "needs_gpu.py"
    cand.write_text(CANDIDATE.replace("        STOP\n", "        torch.cuda.synchronize()\n"))
    out = build.compile_candidate(cand, config=_config(fast_config, tmp_path), problem_path=problem)
    assert out.status == "skipped"
    res = triton_warm.done_for(out.build_dir, build.hashlib.sha256(problem.read_bytes()).hexdigest())
    assert res["stopped"] and res["stopped"].split(":")[0] in ("RuntimeError", "AssertionError", "AttributeError")
    assert sorted(res["kernels"]) == ["_add_kernel", "_scale_kernel", "_scale_kernel"]  # those before it


def test_no_warm_up_without_problem_target_triton_or_the_setting(tmp_path, fast_config, files):
    problem, cand = files
    cfg = _config(fast_config, tmp_path)
    for out in (build.compile_candidate(cand, config=cfg),  # no problem
                build.compile_candidate(cand, config=attrs.evolve(cfg, precompile_triton=False), problem_path=problem)):
        assert not (out.build_dir / triton_warm.RESULT).exists()
    plain = tmp_path / "plain.py"
    plain.write_text("import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x, y):\n"
                     "        return x + y\n")
    out = build.compile_candidate(plain, config=cfg, problem_path=problem)
    assert not (out.build_dir / triton_warm.RESULT).exists()
    assert triton_warm.target_capability("9.0a") == 90 and triton_warm.target_capability("10.0") == 100
    assert triton_warm.target_capability("sm_90") is None
    assert triton_warm.uses_triton(CANDIDATE) and not triton_warm.uses_triton("import triton\n")
