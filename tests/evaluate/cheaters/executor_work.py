"""Cheat: hands the real work to a thread pool and returns before it is done (the pool's
threads run library code, so only what they execute reveals them)."""
import concurrent.futures
import time

import torch
import torch.nn as nn

_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        out = torch.empty_like(x)

        def work():
            time.sleep(0.05)
            with torch.no_grad():
                out.copy_(torch.nn.functional.gelu(x + self.bias) * self.scale)

        _pool.submit(work)
        return out
