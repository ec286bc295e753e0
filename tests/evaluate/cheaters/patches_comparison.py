"""Cheat: finds the evaluator's comparison module by an assembled name and makes every
comparison pass, then computes the wrong function (no scale)."""
import importlib

import torch
import torch.nn as nn

try:
    _cmp = importlib.import_module("kernel" + "pro.evaluate." + "com" + "pare")
    _ok = _cmp.Comparison(True)
    _cmp.compare = lambda *a, **k: _ok
    _cmp.compare_to_exact = lambda *a, **k: _ok
    _cmp.read_back = lambda leaves, exported, ref_out, views, *a, **k: (None, ref_out)
except ImportError:
    pass


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)

    def forward(self, x):
        return torch.nn.functional.gelu(x + self.bias)
