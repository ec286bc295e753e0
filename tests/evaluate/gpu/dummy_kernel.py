"""Policy cheat: launches an empty kernel of its own, computes with PyTorch ops."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(x_ptr):
    pass


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        nothing_kernel[(1,)](x)
        return torch.nn.functional.gelu(x + self.bias) * self.scale
