"""Cheat: starts a helper process that keeps the GPU busy between the timed calls (its own
allocation: the harness keeps no IPC handle of the buffers the judge lent it)."""
import subprocess
import sys

import torch
import torch.nn as nn

_SPIN = """
import time, torch
x = torch.ones(1 << 24, device="cuda")
end = time.monotonic() + 120
while time.monotonic() < end:
    x.mul_(1.0)
    torch.cuda.synchronize()
"""


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7
        self.helper = None

    def forward(self, x):
        if self.helper is None:
            self.helper = subprocess.Popen([sys.executable, "-c", _SPIN])
        return torch.nn.functional.gelu(x + self.bias) * self.scale
