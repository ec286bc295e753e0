"""Compile the Triton kernels of every same-speed pair candidate
(tools/capture/energy/pairs/) for sm_90 (H200) on this CPU machine and print, per
candidate, one JSON line counting the instructions that make the pairs what they are:
global loads by width, asynchronous copies, fp32 FMAs (PTX and SASS).

Run WITHOUT TRITON_INTERPRET (test_energy_pairs.py runs it in a subprocess). Each
candidate's forward runs on small CPU tensors up to its launch, where the kernel is
swapped for a recorder: it specialises the arguments as Triton's launcher does on the
GPU (16-byte aligned pointers, integers divisible by 16 unless the kernel lists them in
``do_not_specialize``) and calls ``triton.compile`` for ``GPUTarget("cuda", 90, 32)``.

    python tests/energy/compile_pairs.py rowsum gemv affine softmax
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

PAIRS = Path(__file__).resolve().parents[2] / "tools" / "capture" / "energy" / "pairs"
TARGET = GPUTarget("cuda", 90, 32)
DTYPES = {torch.float32: "*fp32", torch.float16: "*fp16"}
NVDISASM = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"

# small inputs whose shapes divide like the H200 problems' (16384 columns)
INPUTS = {
    "rowsum": lambda: [torch.randn(64, 16384)],
    "gemv": lambda: [torch.randn(64, 16384).half(), torch.randn(16384).half()],
    "affine": lambda: [torch.randn(1 << 16)],
    "softmax": lambda: [torch.randn(64, 8192)],
}


def _sass_counts(cubin: bytes) -> dict[str, int]:
    if not NVDISASM.is_file():
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([str(NVDISASM), "-c", f.name], capture_output=True, text=True).stdout
    ops = Counter(m.group(1) for m in re.finditer(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", text))
    return {op: n for op, n in ops.items() if op.startswith(("LDG", "FFMA"))}


def _ptx_counts(ptx: str) -> dict[str, int]:
    return {
        "cp_async": len(re.findall(r"\bcp\.async\.c[ag]\.shared\.global", ptx)),
        "ld_global_v4": len(re.findall(r"\bld\.global(?:\.\w+)*\.v4\.", ptx)),
        "ld_global_scalar": len(re.findall(r"\bld\.global(?:\.(?!v[248]\b)\w+)*\.b(?:16|32)\s", ptx)),
        "fma_f32": len(re.findall(r"\bfma\.rn\.f32\b", ptx)),
    }


class Recorder:
    """Stands in for a JITFunction: ``kernel[grid](...)`` compiles instead of launching."""

    def __init__(self, fn, out: list) -> None:
        self.fn, self.out = fn, out

    def __getitem__(self, grid):
        def launch(*args, num_warps=4, num_stages=3, **constexprs):
            signature, values, attrs = {}, dict(constexprs), {}
            for i, (p, a) in enumerate(zip(self.fn.params, args)):
                if p.is_constexpr:
                    values[p.name] = a
                elif isinstance(a, torch.Tensor):
                    signature[p.name] = DTYPES[a.dtype]
                    if a.data_ptr() % 16 == 0:
                        attrs[(i,)] = [["tt.divisibility", 16]]
                elif isinstance(a, int):
                    signature[p.name] = "i32"
                    if a % 16 == 0 and not p.do_not_specialize:
                        attrs[(i,)] = [["tt.divisibility", 16]]
                else:
                    raise TypeError(f"{p.name}: {type(a).__name__}")
            for p in self.fn.params:
                if p.is_constexpr:
                    signature[p.name] = "constexpr"
            src = ASTSource(fn=self.fn, signature=signature, constexprs=values, attrs=attrs)
            kernel = triton.compile(src, target=TARGET, options={"num_warps": num_warps, "num_stages": num_stages})
            self.out.append({"kernel": self.fn.__name__, "num_warps": num_warps,
                             "ptx": _ptx_counts(kernel.asm["ptx"]), "sass": _sass_counts(kernel.asm["cubin"])})

        return launch


def compile_problem(problem: str) -> list[dict]:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"compile_{problem}_candidates", PAIRS / f"{problem}_candidates.py")
    cands = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cands)
    kernels = {name: fn for name, fn in vars(cands).items() if isinstance(fn, triton.runtime.jit.JITFunction)}
    rows = []
    for variant, factory in cands.VARIANTS.items():
        launched: list = []
        for name, fn in kernels.items():
            setattr(cands, name, Recorder(fn, launched))
        try:
            with torch.no_grad():
                factory()(*INPUTS[problem]())
        finally:
            for name, fn in kernels.items():
                setattr(cands, name, fn)
        for rec in launched:
            rows.append({"problem": problem, "variant": variant, **rec})
    return rows


def main(argv: list[str]) -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("unset TRITON_INTERPRET: this compiles for sm_90", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    for problem in argv or list(INPUTS):
        for row in compile_problem(problem):
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
