import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return F.max_pool2d(x, 3, 2, 1)


def get_inputs():
    return [torch.randn(2, 16, 32, 32)]


def get_init_inputs():
    return []
