"""Problem: C = A @ B in fp16, 8192 x 8192 x 8192 (compute-bound, about 1.5 ms on an H200)."""

import torch
import torch.nn as nn

SIZE = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # scaled so that outputs are O(1) and an fp16 tolerance of 1e-2 is meaningful
    a = torch.randn(SIZE, SIZE, device=device).mul_(0.1).to(torch.float16)
    b = torch.randn(SIZE, SIZE, device=device).mul_(0.1).to(torch.float16)
    return [a, b]


def get_init_inputs():
    return []
