"""y = relu(x) * scale on a 4096 x 4096 fp32 matrix: two elementwise passes in eager
PyTorch (relu, then the multiply) that one kernel does in a single pass. The problem of
the anthropic generator's end-to-end check (tests/llm/gpu_e2e.py)."""

import torch
import torch.nn as nn

ROWS = 4096
COLS = 4096


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [1.5]
