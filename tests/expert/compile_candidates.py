"""Run in a subprocess WITHOUT TRITON_INTERPRET: compile every Triton kernel of each named
problem's candidates for sm_90 (H200) down to a cubin, on this CPU machine.

Each candidate's kernels are swapped (``kernelpro_plugins_expert.offline``): the wrapper
runs on CPU tensors up to the launch, which compiles for sm_90 at the launch's argument
types instead of running. Prints one JSON line per compiled kernel."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from expert_problems import PROBLEMS  # noqa: E402

from kernelpro.evaluate.loader import load_module  # noqa: E402
from kernelpro_plugins_expert import moves  # noqa: E402
from kernelpro_plugins_expert.offline import compile_instead_of_launch  # noqa: E402
from kernelpro_plugins_expert.recognize import recognize  # noqa: E402
from kernelpro_plugins_expert.render import vec_eligible, vec_tile, default_params, gemm_params, render_candidate  # noqa: E402

RESULTS: list[dict] = []


def check(name: str, workdir: Path) -> None:
    source = PROBLEMS[name]
    rec = recognize(source)
    base = default_params(rec)
    variants = [base] + moves.apply("wider", None, base)[:1] + moves.apply("fewer_warps", None, base)[:1] \
        + moves.apply("persistent", None, base)[:1] + moves.apply("precision", None, base)[:1] \
        if base["lower"] else []  # precision: fast logs, where a region computes any
    gemm = gemm_params(rec)
    if gemm is not None:
        variants += [gemm] + ([gemm_params(rec, "tf32x3")] if "precision" in str(gemm["tiles"]) else []) + \
            moves.apply("more_stages", None, gemm)[:1]
    vectored = [r for r in base["lower"] if vec_eligible(rec.regions[int(r[1:])])] if base["lower"] else []
    if vectored:  # the vector windowed form (stride 1 along W): 512 outputs at 4 warps, 128 at 1
        variants += [{**base, "tiles": {**base["tiles"], **{r: tile for r in vectored}}}
                     for tile in (vec_tile(), {**vec_tile(1), "BLOCK": 128})]
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

        def record(kernel: str, compiled, num_warps: int, _constexprs, k=k, params=params) -> None:
            RESULTS.append({"kernel": f"{name}/{k}/{kernel}", "cubin_bytes": len(compiled.asm["cubin"]),
                            "num_warps": num_warps, "ptx_mma": "mma" in compiled.asm["ptx"],
                            "ptx_v4_loads": "ld.global.v4" in compiled.asm["ptx"],
                            "vec": any(t.get("VEC") for t in params.get("tiles", {}).values()),
                            "fast_log": any(t.get("FASTLOG") for t in params.get("tiles", {}).values()),
                            "ptx_lg2": "lg2.approx.f32" in compiled.asm["ptx"],
                            "shared_bytes": compiled.metadata.shared})

        compile_instead_of_launch(mod, record)
        torch.manual_seed(0)
        model = mod.ModelNew(*mod.get_init_inputs())
        with torch.no_grad():
            model(*mod.get_inputs())
            if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
                model.eval()  # eval mode (the evaluator's) launches the batch norm's affine kernel
                model(*mod.get_inputs())


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[1:]:
            before = len(RESULTS)
            check(name, Path(tmp))
            for row in RESULTS[before:]:
                print(json.dumps({"name": name, **row}), flush=True)
