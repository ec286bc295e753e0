"""Run in a subprocess with TRITON_INTERPRET=1: render each named problem's candidates
(default tiles and moved tiles; for GEMMs also the Triton-GEMM alternative in both fp32
precisions and moved GEMM tiles), load them as the evaluator does and compare with the
reference under the same seed. Prints one JSON line per candidate."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.fx

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from expert_problems import PROBLEMS  # noqa: E402
from triton_interpreter_compat import allow_scalar_loop_bounds  # noqa: E402

from kernelpro.evaluate.loader import load_module  # noqa: E402
from kernelpro_plugins_expert import moves  # noqa: E402
from kernelpro_plugins_expert.generator import fold_recognition  # noqa: E402
from kernelpro_plugins_expert.recognize import recognize  # noqa: E402
from kernelpro_plugins_expert.render import vec_eligible, vec_tile, default_params, fold_layout_params, gemm_params, layout_params, render_candidate, rewrite_params  # noqa: E402,E501


def check(name: str, workdir: Path) -> list[dict]:
    source = PROBLEMS[name]
    rec = recognize(source)
    base = default_params(rec)
    variants = [base] + [c for c in moves.apply("smaller", None, base)][:1] + \
        [c for c in moves.apply("more_programs", None, base)][:1] + \
        [c for c in moves.apply("persistent", None, base)][:1] + \
        moves.apply("precision", None, base)[:1] if base["lower"] else []  # precision: fast logs, where any
    channels_last = layout_params(rec, base)
    tiled64 = set()
    if channels_last is not None:  # the library's convolutions channels-last, the kernels after them too
        variants.append(channels_last)
        tiled64.add(len(variants))  # and its tiled pointwise kernel's 64-bit index path, forced
        variants.append(channels_last)
    own = {}  # variant -> the recognition it indexes (the folded one for fold candidates)
    folded = fold_recognition(source, rec)
    if folded is not None:
        # the convolutions without their biases, the kernels after them adding them; and
        # the same with a moved tile
        fold = {**default_params(folded), "fold": True}
        fold_cl = fold_layout_params(rec, fold)  # and with the library's convolutions channels-last
        for params in [fold] + moves.apply("smaller", None, fold)[:1] + ([fold_cl] if fold_cl else []):
            own[len(variants)] = folded
            variants.append(params)
    rewrite = rewrite_params(rec)
    if rewrite is not None:  # the algebraic rewrite (library calls only)
        variants.append(rewrite)
    gemm = gemm_params(rec)
    if gemm is not None:  # the Triton-GEMM alternative, its other precision, a smaller and a deeper tile
        variants += [gemm] + [gemm_params(rec, "tf32x3")] * ("precision" in str(gemm["tiles"])) + \
            moves.apply("smaller", None, gemm)[:1] + moves.apply("deeper_k", None, gemm)[:1]
    vectored = [r for r in base["lower"] if vec_eligible(rec.regions[int(r[1:])])] if base["lower"] else []
    if vectored:  # the vector windowed form (stride 1 along W): 512 outputs at 4 warps, 128 at 1
        variants += [{**base, "tiles": {**base["tiles"], **{r: tile for r in vectored}}}
                     for tile in (vec_tile(), {**vec_tile(1), "BLOCK": 128})]
    force64 = set()
    windowed = [r for r in base["lower"] if "BLOCK" in base["tiles"][r] and "PER_SM" not in base["tiles"][r]]
    if windowed:
        # pooling / depthwise: a tile of many short rows (BLOCK 1024), and the 64-bit index
        # path, which the wrapper takes only past 2**31 elements, forced at these sizes
        variants.append({**base, "tiles": {**base["tiles"], **{r: {**base["tiles"][r], "BLOCK": 1024}
                                                               for r in windowed}}})
        force64.add(len(variants))
        variants.append(base)
    if vectored:  # the vector form's 64-bit path too
        force64.add(len(variants))
        variants.append({**base, "tiles": {**base["tiles"], **{r: vec_tile() for r in vectored}}})
    out = []
    for k, params in enumerate(variants):
        path = workdir / f"{name}_{k}.py"
        text = render_candidate(source, own.get(k, rec), params)
        if k in tiled64:
            forced = text.replace("for v in st], reach >= 2**31)", "for v in st], True)")
            assert forced != text or "_kernel_t" not in text
            text = forced
        if k in force64:
            assert "INDEX64=max(x.numel(), n) >= 2**31" in text
            text = text.replace("INDEX64=max(x.numel(), n) >= 2**31", "INDEX64=True")
        path.write_text(text)
        mod = load_module(path, f"cand_{name}_{k}")
        torch.manual_seed(0)
        ref = mod.Model(*mod.get_init_inputs())
        torch.manual_seed(0)
        new = mod.ModelNew(*mod.get_init_inputs())
        # reduction kernels that read a channels-last input in its own order (no copy)
        strided_reads = []
        for key in [k for k in vars(mod) if k.startswith("_kp_r") and k.endswith("_cl")]:
            def counted(*a, _f=getattr(mod, key)):
                out = _f(*a)
                strided_reads.append(out is not None)
                return out
            setattr(mod, key, counted)
        torch.manual_seed(1)
        inputs = mod.get_inputs()
        with torch.no_grad():
            want, got = ref(*inputs), new(*inputs)
        # the same values in another layout (last two dims stored transposed): a launch plan
        # cached for the first layout must not be reused for this one
        strided_err = None
        if len(inputs) == 1 and isinstance(inputs[0], torch.Tensor) and inputs[0].dim() >= 2:
            x2 = (inputs[0] + 0.5).transpose(-1, -2).contiguous().transpose(-1, -2)
            with torch.no_grad():
                want2, got2 = ref(x2), new(x2)
            strided_err = float((want2.float() - got2.float()).abs().max())
        plans = sum(len(v) for k, v in vars(mod).items() if k.startswith("_kp_") and k.endswith("_plans"))
        # pointwise launch plans of the tiled kernel (a channels-last input written in the default layout)
        tiled = sum(1 for k, v in vars(mod).items() if k.startswith("_kp_") and k.endswith("_plans")
                    for p in v.values() if isinstance(p, tuple) and len(p) == 7 and p[-1] is not None)
        # kernel calls in the lowered graph, or in each lowered submodule's (a model that
        # does not trace as a whole)
        lowered = sum(1 for m in new.lowered.modules() if isinstance(m, torch.fx.GraphModule)
                      for n in m.graph.nodes if n.op == "call_function" and "_kp_r" in n.name)
        out.append({"name": name, "variant": k, "regions": len(params["lower"]), "lowered": lowered,
                    "rewrite": params is rewrite, "layout": params.get("layout"),
                    # the output in the reference's layout (a channels-last candidate restores it)
                    "layout_ok": got.is_contiguous() == want.is_contiguous(),
                    # convolutions that ran channels-last (their wrappers in the lowered model)
                    "channels_last_convs": sum(type(m).__name__ == "_KpChannelsLast" for m in new.lowered.modules()) +
                    sum(1 for m in new.lowered.modules() if isinstance(m, torch.fx.GraphModule)
                        for n in m.graph.nodes if n.op == "call_function" and "conv" in getattr(n.target, "__name__", "")
                        and getattr(n.args[0], "target", None) == "contiguous" and "memory_format" in n.args[0].kwargs),
                    # reduction calls that read the channels-last tensor in place / fell back to a copy
                    "strided_reads": sum(strided_reads), "strided_fallbacks": len(strided_reads) - sum(strided_reads),
                    "fold": bool(params.get("fold")),
                    # a reduction kernel loading its prologue's per-channel tensor
                    "channel_prologue": "outer" if "cv = tl.load(c_ptr + (o // CSTRIDE)" in text else
                    "reduced" if "cv = tl.load(c_ptr + r," in text else
                    "flat" if "cv = tl.load(c_ptr + (offs // CSTRIDE)" in text else None,
                    # convolutions called without their bias in the lowered graph (fold)
                    "unbiased_convs": sum(1 for m in new.lowered.modules() if isinstance(m, torch.fx.GraphModule)
                                          for n in m.graph.nodes if n.op == "call_function"
                                          and "conv" in getattr(n.target, "__name__", "") and n.args[2] is None),
                    "dtype": str(want.dtype).replace("torch.", ""),
                    "shape_ok": tuple(want.shape) == tuple(got.shape),
                    "max_abs_err": float((want.float() - got.float()).abs().max()) if want.shape == got.shape
                    else None,
                    "max_abs_ref": float(want.float().abs().max()),
                    "strided_err": strided_err, "plans": plans, "tiled_plans": tiled,
                    "tiles": params["tiles"]})
    return out


if __name__ == "__main__":
    allow_scalar_loop_bounds()  # the persistent pointwise kernel loops up to a runtime n_elements
    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[1:]:
            for row in check(name, Path(tmp)):
                print(json.dumps(row), flush=True)
