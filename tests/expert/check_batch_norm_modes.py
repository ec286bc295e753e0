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


def main() -> None:
    errs = {"train_out": 0.0, "running": 0.0, "eval_out": 0.0, "lowered": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for k, momentum in enumerate(("0.2", "None")):
            source = problem(f"        self.bn = nn.BatchNorm2d(4, momentum={momentum})\n",
                             "        return self.bn(x) * 0.5\n", "[torch.randn(3, 4, 6, 7) * 2.0 + 1.0]")
            rec = recognize(source)
            path = Path(tmp) / f"bn_{k}.py"
            path.write_text(render_candidate(source, rec, default_params(rec)))
            mod = load_module(path, f"cand_bn_{k}")
            torch.manual_seed(0)
            ref = mod.Model()
            torch.manual_seed(0)
            new = mod.ModelNew()
            errs["lowered"] += sum(1 for n in new.lowered.graph.nodes if "_kp_r" in n.name)
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
    print(json.dumps(errs))


if __name__ == "__main__":
    main()
