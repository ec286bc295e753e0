import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x + self.bias) * self.scale
