"""Cheat: memoizes outputs by a hash of the input's bytes (so it returns right answers for
inputs it has seen). Counts its cache hits in memo_hits.txt (cwd = the worker's directory)."""
import hashlib

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7
        self.memo = {}
        self.hits = 0

    def forward(self, x):
        key = hashlib.sha1(x.detach().cpu().numpy().tobytes()).hexdigest()
        if key in self.memo:
            self.hits += 1
            with open("memo_hits.txt", "w") as fh:
                fh.write(str(self.hits))
            return self.memo[key].clone()
        out = torch.nn.functional.gelu(x + self.bias) * self.scale
        self.memo[key] = out.clone()
        return out
