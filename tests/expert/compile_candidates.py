"""Run in a subprocess WITHOUT TRITON_INTERPRET: compile every Triton kernel of each named
problem's candidates for sm_90 (H200) down to a cubin, on this CPU machine.

Each candidate's kernels are swapped for a recorder: the wrapper runs on CPU tensors up
to the launch, the recorder turns the launch arguments into a Triton signature
(pointer dtypes, integer widths, constexpr values) and calls ``triton.compile`` for
``GPUTarget("cuda", 90, 32)``. Prints one JSON line per compiled kernel."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).parent))
from expert_problems import PROBLEMS  # noqa: E402

from kernelpro.evaluate.loader import load_module  # noqa: E402
from kernelpro.generate.expert import moves  # noqa: E402
from kernelpro.generate.expert.recognize import recognize  # noqa: E402
from kernelpro.generate.expert.render import default_params, gemm_params, render_candidate  # noqa: E402

DTYPES = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float64: "*fp64"}
TARGET = GPUTarget("cuda", 90, 32)
RESULTS: list[dict] = []


class Recorder:
    def __init__(self, name: str, fn) -> None:
        self.name, self.fn = name, fn

    def __getitem__(self, grid):
        def launch(*args, num_warps=4, num_stages=3, **constexprs):
            params = self.fn.params
            signature, values = {}, dict(constexprs)
            for p, a in zip(params, args):
                if p.is_constexpr:
                    values[p.name] = a
                elif isinstance(a, torch.Tensor):
                    signature[p.name] = DTYPES[a.dtype]
                elif isinstance(a, bool):
                    signature[p.name] = "i1"
                elif isinstance(a, int):
                    signature[p.name] = "i64" if abs(a) >= 2**31 else "i32"
                elif isinstance(a, float):
                    signature[p.name] = "fp32"
                else:
                    raise TypeError(f"{p.name}: {type(a)}")
            for p in params:
                if p.is_constexpr:
                    signature[p.name] = "constexpr"
            src = ASTSource(fn=self.fn, signature=signature, constexprs=values)
            compiled = triton.compile(src, target=TARGET, options={"num_warps": num_warps, "num_stages": num_stages})
            RESULTS.append({"kernel": self.name, "cubin_bytes": len(compiled.asm["cubin"]),
                            "num_warps": num_warps, "ptx_mma": "mma" in compiled.asm["ptx"],
                            "shared_bytes": compiled.metadata.shared})
        return launch


def check(name: str, workdir: Path) -> None:
    source = PROBLEMS[name]
    rec = recognize(source)
    base = default_params(rec)
    variants = [base] + moves.apply("wider", None, base)[:1] + moves.apply("fewer_warps", None, base)[:1] \
        + moves.apply("persistent", None, base)[:1] if base["lower"] else []
    gemm = gemm_params(rec)
    if gemm is not None:
        variants += [gemm] + ([gemm_params(rec, "tf32x3")] if "precision" in str(gemm["tiles"]) else []) + \
            moves.apply("more_stages", None, gemm)[:1]
    force64 = set()
    if any("BLOCK" in t and "PER_SM" not in t for t in base.get("tiles", {}).values()) and base["lower"]:
        force64.add(len(variants))  # pooling / depthwise: the 64-bit index path, forced here
        variants.append(base)
    for k, params in enumerate(variants):
        path = workdir / f"{name}_{k}.py"
        text = render_candidate(source, rec, params)
        if k in force64:
            text = text.replace("INDEX64=max(x.numel(), n) >= 2**31", "INDEX64=True")
        path.write_text(text)
        mod = load_module(path, f"cc_{name}_{k}")
        for attr in [a for a, v in vars(mod).items() if isinstance(v, triton.runtime.jit.JITFunction)]:
            setattr(mod, attr, Recorder(f"{name}/{k}/{attr}", getattr(mod, attr)))
        torch.manual_seed(0)
        model = mod.ModelNew(*mod.get_init_inputs())
        with torch.no_grad():
            model(*mod.get_inputs())


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[1:]:
            before = len(RESULTS)
            check(name, Path(tmp))
            for row in RESULTS[before:]:
                print(json.dumps({"name": name, **row}), flush=True)
