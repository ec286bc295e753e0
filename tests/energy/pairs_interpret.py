"""Run every same-speed pair candidate (tools/capture/energy/pairs/) under Triton's CPU
interpreter on small shapes and print, as JSON, each one's largest absolute error against
its problem's reference and whether its redundant-FMA variants equal the plain kernel bit
for bit. Run in a fresh process (test_energy_pairs.py does): TRITON_INTERPRET must be set
before Triton is first imported, or the kernels' calls into triton.language's own jitted
helpers (tl.zeros, tl.sum) fail.

    TRITON_INTERPRET=1 python tests/energy/pairs_interpret.py [PROBLEM ...]
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

PAIRS = Path(__file__).resolve().parents[2] / "tools" / "capture" / "energy" / "pairs"

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from triton_interpreter_compat import allow_scalar_loop_bounds  # noqa: E402


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inputs(problem: str, torch) -> list[list]:
    gen = torch.Generator().manual_seed(0)
    if problem == "rowsum":
        # a multiple of every block (unmasked loads), then a ragged last block (masked)
        return [[torch.randn(5, 8192, generator=gen)], [torch.randn(3, 5000, generator=gen)]]
    if problem == "gemv":
        def pair(rows, cols):
            a = torch.randn(rows, cols, generator=gen).to(torch.float16)
            x = (torch.randn(cols, generator=gen) * cols ** -0.5).to(torch.float16)
            return [a, x]
        return [pair(16, 2048), pair(10, 1500)]  # whole blocks, then ragged rows and columns
    if problem == "affine":
        return [[torch.randn(10000, generator=gen)], [torch.randn(8192, generator=gen)]]
    if problem == "softmax":
        # a power-of-two row (no masked lanes), then a ragged one; large values test the max
        return [[torch.randn(6, 4096, generator=gen) * 4], [torch.randn(5, 3000, generator=gen) * 4]]
    raise ValueError(f"no small inputs for problem {problem!r}")


def check(problems: list[str]) -> dict:
    import torch

    out: dict = {}
    for problem in problems:
        prob = _load(PAIRS / f"{problem}_problem.py", f"interp_{problem}_problem")
        cands = _load(PAIRS / f"{problem}_candidates.py", f"interp_{problem}_candidates")
        reference = prob.Model()
        rec: dict = {"variants": {}, "bitwise_equal_to_fma0": {}}
        out[problem] = rec
        for inputs in _inputs(problem, torch):
            shape = "x".join(str(d) for d in inputs[0].shape)
            expected = reference(*inputs)
            for name, factory in cands.VARIANTS.items():
                got = factory()(*inputs)
                entry = rec["variants"].setdefault(name, {})
                entry[shape] = {
                    "max_abs_err": float((got.float() - expected.float()).abs().max()),
                    "max_abs_expected": float(expected.float().abs().max()),
                    "dtype_ok": got.dtype == expected.dtype and got.shape == expected.shape,
                }
            # a redundant-FMA variant adds exactly 0 to the plain kernel of the same grid
            for name, factory in cands.VARIANTS.items():
                base = name.rsplit("fma", 1)[0] + "fma0" if "fma" in name else None
                if base and base != name and base in cands.VARIANTS:
                    same = torch.equal(factory()(*inputs), cands.VARIANTS[base]()(*inputs))
                    rec["bitwise_equal_to_fma0"].setdefault(name, []).append(same)
    return out


def main(argv: list[str]) -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("set TRITON_INTERPRET=1 (before Triton is imported)", file=sys.stderr)
        return 2
    allow_scalar_loop_bounds()
    print(json.dumps(check(argv or ["affine", "rowsum", "gemv", "softmax"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
