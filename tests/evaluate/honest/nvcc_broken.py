"""A compile error in raw CUDA (undeclared identifier): the compile stage reports it."""
import torch.nn as nn

from kernelpro.evaluate.nvcc import load_cu

SRC = r'''
__global__ void k(float* out) {
    out[threadIdx.x] = undeclared_value;
}
'''

lib = load_cu("broken", SRC)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()

    def forward(self, x):
        return x
