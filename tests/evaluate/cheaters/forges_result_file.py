"""Cheat: writes a 'correct, 1000x' result file where the old evaluator read it, then exits
before the real evaluation can report."""
import json
import os

import torch.nn as nn

fake = {"verdict": "correct", "reason": "", "timing": {"median_ms": 0.001, "iqr_ms": 0, "mean_ms": 0.001,
        "min_ms": 0.001, "max_ms": 0.001, "cv": 0, "n": 10, "method": "perf_counter"},
        "baseline": {"median_ms": 1.0, "iqr_ms": 0, "mean_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0, "cv": 0, "n": 10,
                     "method": "perf_counter"}}
with open("result.json", "w") as fh:
    json.dump(fake, fh)
os._exit(0)


class ModelNew(nn.Module):
    pass
