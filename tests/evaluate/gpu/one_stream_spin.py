"""Honest: the right output, then ~3 ms of spinning on the current stream only. Nothing is
left on another stream, so the timing must not charge side-stream work (the host's wake-up
from a long synchronization is not the candidate's)."""
import torch
import torch.nn as nn

SPIN_CYCLES = 6_000_000  # ~3 ms at ~2 GHz


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        out = torch.nn.functional.gelu(x + self.bias) * self.scale
        torch.cuda._sleep(SPIN_CYCLES)
        return out
