"""Honest: builds a raw CUDA source with nvcc at import (the compile stage does this in its
own process); forward uses the CUDA kernel on a GPU and torch ops on a CPU."""
import ctypes

import torch
import torch.nn as nn

from kernelpro.evaluate.nvcc import load_cu

SRC = r'''
#include <cuda_runtime.h>
#include <math.h>
__global__ void bias_gelu_kernel(const float* x, const float* b, float* out, int rows, int cols, float scale) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        float y = x[i] + b[i % cols];
        out[i] = 0.5f * y * (1.0f + erff(y * 0.70710678118654752f)) * scale;
    }
}
extern "C" int launch_bias_gelu(const float* x, const float* b, float* out, int rows, int cols, float scale,
                                void* stream) {
    int n = rows * cols;
    bias_gelu_kernel<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>(x, b, out, rows, cols, scale);
    return (int)cudaGetLastError();
}
'''

lib = load_cu("bias_gelu", SRC)
lib.launch_bias_gelu.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p]


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        if not x.is_cuda:
            return torch.nn.functional.gelu(x + self.bias) * self.scale
        x = x.contiguous()
        out = torch.empty_like(x)
        err = lib.launch_bias_gelu(x.data_ptr(), self.bias.data_ptr(), out.data_ptr(), x.shape[0], x.shape[1],
                                   self.scale, torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"CUDA error {err}")
        return out
