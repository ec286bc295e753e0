"""Run in a subprocess: ``check NAME...`` (with TRITON_INTERPRET=1) runs each corpus rewrite's
``before`` and ``after`` at its small size on the CPU and prints one JSON line each with
their agreement; ``compile NAME...`` (without TRITON_INTERPRET) compiles each rewrite's Triton
kernels for sm_90 on this machine instead of launching them, one JSON line per kernel."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "capture" / "ncu_calibration"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corpus_rewrites  # noqa: E402


def check(name: str) -> dict:
    import torch

    from triton_interpreter_compat import allow_scalar_loop_bounds

    allow_scalar_loop_bounds()
    mod = corpus_rewrites.load(name)
    torch.manual_seed(0)
    xs = mod.inputs(torch, "cpu", *mod.SIZES["small"])
    with torch.no_grad():
        ref, new = mod.before(torch, *xs), mod.after(torch, *xs)
    ref_t = ref[0] if isinstance(ref, (tuple, list)) else ref
    new_t = new[0] if isinstance(new, (tuple, list)) else new
    same_shape = tuple(ref_t.shape) == tuple(new_t.shape) and ref_t.dtype == new_t.dtype
    err = (ref_t.double() - new_t.double()).abs().max().item() if same_shape and ref_t.numel() else None
    agree = bool(same_shape and torch.allclose(new_t, ref_t, rtol=mod.RTOL, atol=mod.ATOL))
    row = {"name": name, "agree": agree, "max_abs_err": err, "shape": list(ref_t.shape),
           "after_shape": list(new_t.shape)}
    if hasattr(mod, "after_with_indices"):  # the second output the PyTorch kernel writes
        with torch.no_grad():
            (_, ref_i), (_, new_i) = mod.before_with_indices(torch, *xs), mod.after_with_indices(torch, *xs)
        row["indices_agree"] = bool(ref_i.dtype == new_i.dtype and torch.equal(ref_i, new_i))
    return row


def compile_kernels(name: str) -> list[dict]:
    import torch

    from kernelpro_plugins_expert.offline import compile_instead_of_launch

    mod = corpus_rewrites.load(name)
    rows: list[dict] = []

    def record(kernel: str, compiled, num_warps: int, _constexprs) -> None:
        rows.append({"name": name, "kernel": kernel, "cubin_bytes": len(compiled.asm["cubin"]),
                     "num_warps": num_warps, "shared_bytes": compiled.metadata.shared})

    compile_instead_of_launch(mod, record)
    torch.manual_seed(0)
    xs = mod.inputs(torch, "cpu", *mod.SIZES["small"])
    with torch.no_grad():
        mod.after(torch, *xs)
    return rows


if __name__ == "__main__":
    what, names = sys.argv[1], sys.argv[2:]
    for n in names:
        if what == "check":
            print(json.dumps(check(n)), flush=True)
        else:
            for row in compile_kernels(n):
                print(json.dumps(row), flush=True)
