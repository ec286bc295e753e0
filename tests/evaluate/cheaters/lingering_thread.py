"""Cheat: after computing its output, leaves a thread working on (here: burning CPU, as a
thread that prepares the next call would) when forward returns; and blinds the harness's
own thread check first, so only the judge's view from outside can see it."""
import sys
import threading
import time

import torch
import torch.nn as nn

for _mod in list(sys.modules.values()):  # the harness runs as __main__: find it by what it defines
    if "candidate" + "_threads" in getattr(_mod, "__dict__", {}):
        setattr(_mod, "candidate" + "_threads", lambda: [])


def _busy(seconds):
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        out = torch.nn.functional.gelu(x + self.bias) * self.scale
        worker = threading.Thread(target=_busy, args=(0.3,), daemon=True)
        worker.start()
        worker.join(timeout=0.0001)  # joined with a timeout: still running when forward returns
        return out
