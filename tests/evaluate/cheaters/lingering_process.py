"""Cheat: starts a helper process at its first call and leaves it running (work the timed
calls never wait for would run there)."""
import subprocess
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7
        self.helper = None

    def forward(self, x):
        if self.helper is None:
            self.helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        return torch.nn.functional.gelu(x + self.bias) * self.scale
