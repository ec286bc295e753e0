"""Run with TRITON_INTERPRET=1: a batch-norm candidate follows its module's mode like
PyTorch. Three training-mode calls (batch statistics; the running statistics updated with
the module's momentum, and cumulatively with momentum None), then eval mode (the running
statistics). Prints one JSON line: the largest output and running-statistics differences."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from expert_problems import problem  # noqa: E402

from kernelpro.evaluate.loader import load_module  # noqa: E402
from kernelpro_plugins_expert.recognize import recognize  # noqa: E402
from kernelpro_plugins_expert.render import default_params, render_candidate  # noqa: E402


def _pair(source: str, path: Path, seed: int) -> tuple[torch.nn.Module, torch.nn.Module, int]:
    """The problem's Model and the expert's ModelNew for it, built from the same seed, and
    how many of ModelNew's graph nodes are lowered kernels."""
    rec = recognize(source)
    path.write_text(render_candidate(source, rec, default_params(rec)))
    mod = load_module(path, f"cand_{path.stem}")
    torch.manual_seed(seed)
    ref = mod.Model()
    torch.manual_seed(seed)
    new = mod.ModelNew()
    return ref, new, sum(1 for n in new.lowered.graph.nodes if "_kp_r" in n.name)


def main() -> None:
    errs = {"train_out": 0.0, "running": 0.0, "eval_out": 0.0, "lowered": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for k, momentum in enumerate(("0.2", "None")):
            source = problem(f"        self.bn = nn.BatchNorm2d(4, momentum={momentum})\n",
                             "        return self.bn(x) * 0.5\n", "[torch.randn(3, 4, 6, 7) * 2.0 + 1.0]")
            ref, new, lowered = _pair(source, Path(tmp) / f"bn_{k}.py", 0)
            errs["lowered"] += lowered
            with torch.no_grad():
                for step in range(3):
                    x = torch.randn(3, 4, 6, 7) * (step + 1.0) + step
                    errs["train_out"] = max(errs["train_out"], float((ref(x) - new(x)).abs().max()))
                for name in ("running_mean", "running_var"):
                    diff = (getattr(ref.bn, name) - getattr(new.ref.bn, name)).abs().max()
                    errs["running"] = max(errs["running"], float(diff))
                ref.eval()
                new.eval()
                x = torch.randn(3, 4, 6, 7)
                errs["eval_out"] = max(errs["eval_out"], float((ref(x) - new(x)).abs().max()))
        # eval mode alone, the evaluator's: a per-channel affine map over every element, by
        # planes of one (n, c) (S >= 256, the last block partial) or over the flattened input
        # (S < 256: S = 1 and S = 50 here), with a pointwise prologue and epilogue fused;
        # the running statistics and affine parameters made non-trivial first
        cases = {"planes": ("nn.BatchNorm2d(3)", "[torch.randn(2, 3, 20, 33)]", (2, 3, 20, 33)),
                 "flat": ("nn.BatchNorm1d(5, affine=False)", "[torch.randn(9, 5)]", (9, 5)),
                 "flat_3d": ("nn.BatchNorm1d(4)", "[torch.randn(3, 4, 50)]", (3, 4, 50))}
        errs["eval_paths"] = {}
        for name, (module, inputs, shape) in cases.items():
            source = problem(f"        self.bn = {module}\n",
                             "        return torch.relu(self.bn(x * 1.5 - 0.25)) + 0.5\n", inputs)
            ref, new, lowered = _pair(source, Path(tmp) / f"bn_eval_{name}.py", 1)
            errs["lowered"] += lowered
            with torch.no_grad():
                for bn in (ref.bn, new.ref.bn):
                    g = torch.Generator().manual_seed(2)
                    c = bn.num_features
                    bn.running_mean.copy_(torch.randn(c, generator=g))
                    bn.running_var.copy_(torch.rand(c, generator=g) * 3.0 + 0.1)
                    if bn.weight is not None:
                        bn.weight.copy_(torch.randn(c, generator=g))
                        bn.bias.copy_(torch.randn(c, generator=g))
                ref.eval()
                new.eval()
                x = torch.randn(*shape) * 2.0
                errs["eval_paths"][name] = float((ref(x) - new(x)).abs().max())
    print(json.dumps(errs))


if __name__ == "__main__":
    main()
