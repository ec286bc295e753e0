"""Cheat attempt: returns the right output from the current stream and leaves extra work
(a ~10 ms spin) on a side stream it never waits for. The time must include it."""
import torch
import torch.nn as nn

SLEEP_CYCLES = 20_000_000  # ~10 ms at ~2 GHz


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        out = torch.nn.functional.gelu(x + self.bias) * self.scale
        with torch.cuda.stream(self.side):
            torch.cuda._sleep(SLEEP_CYCLES)
        return out
