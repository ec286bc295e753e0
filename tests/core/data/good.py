import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)

    def forward(self, x):
        y = x + self.bias
        return 1.7 * (0.5 * y * (1.0 + torch.erf(y / 2.0 ** 0.5)))
