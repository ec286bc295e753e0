"""Cheat: leaves a ~2 ms spin on a side stream after every call, and rebinds the device
synchronization of its own process to wait for its current stream only, so its harness
answers while the GPU is still busy (the in-process side-stream check sees nothing)."""
import torch
import torch.nn as nn

SLEEP_CYCLES = 4_000_000  # ~2 ms at ~2 GHz
torch.cuda.synchronize = lambda device=None: torch.cuda.current_stream().synchronize()


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
