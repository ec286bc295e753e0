# CPU plumbing-test candidate (PyTorch only, written for the test, not by a model):
# the reference's two passes plus an extra copy.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.where(x > 0, x, torch.zeros_like(x)).clone()
        return y * self.scale
