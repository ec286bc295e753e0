"""Validation cases: one deliberately flawed or deliberately good kernel per case.

Each case has inputs (created on the GPU, sized to fill an H200 except the tiny-grid case),
a run function (the kernel under test), a PyTorch reference, the micro-profilers designed
to fire on it (``expect``), and whether it is a good kernel on which the finding tools must
stay quiet. :func:`write_pair` writes a KernelBench-format problem and candidate for a
case; the ``suite`` pseudo-case runs every case in one forward.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import attrs

HERE = Path(__file__).resolve().parent
M64 = 64 * 1024 * 1024
M4 = 4 * 1024 * 1024
TRANSPOSE_N = 8192
SGEMM_N = 2048
MATMUL_N = 4096
TAIL_BLOCKS = 2 * 132 + 8  # one full wave at 2 blocks/SM on 132 SMs, plus 8 blocks
TAIL_ITERS = 8000
CHASE_THREADS = 132 * 128  # 4 warps per SM: too few loads in flight to fill DRAM
CHASE_STEPS = 128


def _cuda():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _randn(*shape, dtype=None):
    import torch

    return torch.randn(*shape, device=_cuda(), dtype=dtype or torch.float32)


@attrs.frozen
class Case:
    name: str
    kernel_regex: str  # matches the demangled names of the case's kernels
    inputs: Callable[[], list]
    run: Callable[..., Any]  # (ext, *inputs) -> output
    reference: Callable[..., Any]  # (*inputs) -> output, in PyTorch
    expect: tuple[str, ...] = ()  # micro-profilers designed to fire
    good: bool = False
    note: str = ""


def _ext():
    import sys

    sys.path.insert(0, str(HERE))
    import kp_ncu_ext

    return kp_ncu_ext.load()


def _chase_inputs():
    import torch

    return [torch.randperm(M64, device=_cuda(), dtype=torch.int32)]


def _chase_reference(nxt):
    import torch

    p = torch.arange(CHASE_THREADS, device=nxt.device, dtype=torch.long)
    table = nxt.long()
    for _ in range(CHASE_STEPS):
        p = table[p]
    return p.int()


CASES: dict[str, Case] = {c.name: c for c in (
    Case("copy_vec4", r"kp_copy_vec4", lambda: [_randn(M64)],
         lambda e, x: e.copy_vec4(x), lambda x: x.clone(), expect=("at_roofline",), good=True,
         note="float4 grid-stride copy, 256 MiB"),
    Case("transpose_naive", r"kp_transpose_naive", lambda: [_randn(TRANSPOSE_N, TRANSPOSE_N)],
         lambda e, x: e.transpose_naive(x), lambda x: x.t().contiguous(),
         expect=("uncoalesced_global",), note="loads walk down columns, 8192x8192 fp32"),
    Case("transpose_conflict", r"kp_transpose_tiled<(\(int\))?0>", lambda: [_randn(TRANSPOSE_N, TRANSPOSE_N)],
         lambda e, x: e.transpose_conflict(x), lambda x: x.t().contiguous(),
         expect=("shared_bank_conflicts",), note="32x32 shared tile without padding"),
    Case("transpose_padded", r"kp_transpose_tiled<(\(int\))?1>", lambda: [_randn(TRANSPOSE_N, TRANSPOSE_N)],
         lambda e, x: e.transpose_padded(x), lambda x: x.t().contiguous(), good=True,
         note="32x33 shared tile: coalesced, conflict-free"),
    Case("spill", r"kp_spill", lambda: [_randn(1024 * 1024)], lambda e, x: e.spill(x), None,
         expect=("local_memory",), note="run-time-indexed array and a 32-register cap"),
    Case("tiny_grid", r"kp_tiny_grid", lambda: [_randn(1024 * 1024)],
         lambda e, x: e.tiny_grid(x), lambda x: 2 * x + 1, expect=("small_grid",),
         note="4 blocks of 128 threads for 1 Mi elements"),
    Case("tail_grid", r"kp_tail_grid", lambda: [_randn(TAIL_BLOCKS * 1024)],
         lambda e, x: e.tail_grid(x, TAIL_BLOCKS, TAIL_ITERS), None, expect=("tail_effect",),
         note="272 blocks of 1024 threads at 2 blocks/SM: one wave plus 8 blocks"),
    Case("sgemm_fp32", r"kp_sgemm_fp32", lambda: [_randn(SGEMM_N, SGEMM_N), _randn(SGEMM_N, SGEMM_N)],
         lambda e, a, b: e.sgemm_fp32(a, b), lambda a, b: a @ b, expect=("tensor_cores_idle",),
         note="scalar FFMA GEMM 2048^3, 64x64 tiles"),
    Case("unfused_fp32", r"kp_unfused_fp32", lambda: [_randn(M4)],
         lambda e, x: e.unfused_fp32(x, 256), None, expect=("unfused_fp32",),
         note="__fmul_rn then __fadd_rn: no FFMA"),
    Case("fused_fp32", r"kp_fused_fp32", lambda: [_randn(M4)],
         lambda e, x: e.fused_fp32(x, 256), None, good=True, note="the same work with fmaf"),
    Case("divergent", r"kp_divergent", lambda: [_randn(M4)],
         lambda e, x: e.divergent(x, 1024), None, expect=("thread_divergence",),
         note="lane 0 loops 1024 times, the others 32"),
    Case("smem_hog", r"kp_smem_hog", lambda: [_randn(16 * 1024 * 1024)],
         lambda e, x: e.smem_hog(x), lambda x: 2 * x, expect=("occupancy_limiter",),
         note="200 KiB dynamic shared memory per 128-thread block"),
    Case("occupancy_gap", r"kp_occupancy_gap", lambda: [_randn(M4)],
         lambda e, x: e.occupancy_gap(x, 512), None, expect=("occupancy_gap",),
         note="only warp 0 of each 256-thread block works"),
    Case("chain_unfused", r"kp_chain_(scale|add|relu)", lambda: [_randn(M64)],
         lambda e, x: e.chain_unfused(x), lambda x: (x * 1.5 + 0.25).clamp_min(0),
         expect=("dram_excess",), note="three element-wise kernels through DRAM"),
    Case("chain_fused", r"kp_chain_fused", lambda: [_randn(M64)],
         lambda e, x: e.chain_fused(x), lambda x: (x * 1.5 + 0.25).clamp_min(0),
         expect=("warp_stalls",),
         note="the same chain in one kernel; one scalar load per thread keeps too few bytes in flight "
              "(designed as a good kernel; the calibration pair bytes_in_flight, the same kernel, ran "
              "34 % faster with float4 loads)"),
    Case("strided_reuse", r"kp_strided_reuse", lambda: [_randn(M64)],
         lambda e, x: e.strided_reuse(x), None, expect=("cache_hit_rate", "dram_excess"),
         note="every element read 8 times, 32 MiB apart in time"),
    Case("pointer_chase", r"kp_pointer_chase", _chase_inputs,
         lambda e, nxt: e.pointer_chase(nxt, CHASE_THREADS, CHASE_STEPS), _chase_reference,
         expect=("warp_stalls", "issue_slots"), note="128 dependent loads per thread, 4 warps per SM, 256 MiB table"),
    Case("matmul_bf16", r"^(?!kp_)", lambda: [_randn(MATMUL_N, MATMUL_N, dtype=_bf16()),
                                            _randn(MATMUL_N, MATMUL_N, dtype=_bf16())],
         lambda e, a, b: a @ b, lambda a, b: a @ b, expect=("at_roofline",), good=True,
         note="cuBLAS bf16 GEMM 4096^3 through torch.matmul"),
)}


def _bf16():
    import torch

    return torch.bfloat16


def case_of_kernel(kernel_name: str) -> str | None:
    """The case a profiled kernel belongs to; kernels not of kernels.cu (cuBLAS, PyTorch)
    belong to matmul_bf16."""
    import re

    for case in CASES.values():
        if case.name != "matmul_bf16" and re.search(case.kernel_regex, kernel_name):
            return case.name
    return None if "kp_" in kernel_name else "matmul_bf16"


# --- KernelBench-format files ------------------------------------------------------------------

_PROBLEM = '''"""Validation case {name} for the ncu micro-profilers: {note}."""
import sys
import torch
import torch.nn as nn

sys.path.insert(0, {here!r})
import kp_ncu_cases as _cases

CASE = {name!r}


class Model(nn.Module):
    def forward(self, *xs):
        return _cases.reference(CASE, *xs)


def get_inputs():
    return _cases.inputs(CASE)


def get_init_inputs():
    return []
'''

_CANDIDATE = '''"""Candidate for validation case {name}: runs the kernel under test."""
import sys
import torch.nn as nn

sys.path.insert(0, {here!r})
import kp_ncu_cases as _cases

CASE = {name!r}


class ModelNew(nn.Module):
    def forward(self, *xs):
        return _cases.run(CASE, *xs)
'''


def inputs(name: str) -> list:
    if name == "suite":
        return [x for case in CASES.values() for x in case.inputs()]
    return CASES[name].inputs()


def _arity(case: Case) -> int:
    return case.run.__code__.co_argcount - 1


def run(name: str, *xs):
    ext = _ext()
    if name != "suite":
        return CASES[name].run(ext, *xs)
    outs, k = [], 0
    for case in CASES.values():
        n = _arity(case)
        outs.append(case.run(ext, *xs[k:k + n]))
        k += n
    return outs


def reference(name: str, *xs):
    if name == "suite":
        outs, k = [], 0
        for case in CASES.values():
            n = _arity(case)
            outs.append(reference(case.name, *xs[k:k + n]))
            k += n
        return outs
    case = CASES[name]
    if case.reference is None:  # arithmetic-only cases: the kernel is its own definition
        return case.run(_ext(), *xs)
    return case.reference(*xs)


def write_pair(name: str, folder: Path) -> tuple[Path, Path]:
    """Write problem_<name>.py and candidate_<name>.py into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    note = "every case in one forward" if name == "suite" else CASES[name].note
    problem = folder / f"problem_{name}.py"
    candidate = folder / f"candidate_{name}.py"
    problem.write_text(_PROBLEM.format(name=name, note=note, here=str(HERE)))
    candidate.write_text(_CANDIDATE.format(name=name, here=str(HERE)))
    return problem, candidate
