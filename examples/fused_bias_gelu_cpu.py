"""Bias, GELU and scaling of an activation: three elementwise passes in eager PyTorch
that a fused kernel does in one. A KernelPro example problem (KernelBench format).

The same problem as fused_bias_gelu.py at a size for a machine without a GPU, where the
Triton candidates run under Triton's interpreter (NumPy, one program after another):
`bash scripts/demo.sh` uses this file when torch sees no CUDA device, so that the run
ends in minutes. Its timings show what the loop does, not a kernel's speed."""

import torch
import torch.nn as nn

ROWS = 64
COLS = 512


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.bias
        y = torch.nn.functional.gelu(y)
        return y * self.scale


def get_inputs():
    return [torch.rand(ROWS, COLS)]


def get_init_inputs():
    return [COLS]
