"""Honest: the fused kernel in CUDA C++ through load_inline (built by the compile stage)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
__global__ void fused_bias_gelu_kernel(const float* x, const float* b, float* out, long n, long cols, float scale) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        float y = x[i] + b[i % cols];
        out[i] = 0.5f * y * (1.0f + erff(y * 0.70710678118654752f)) * scale;
    }
}
torch::Tensor fused_bias_gelu(torch::Tensor x, torch::Tensor b, double scale) {
    auto out = torch::empty_like(x);
    long n = x.numel();
    fused_bias_gelu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n, x.size(-1), (float)scale);
    return out;
}
'''
CPP_SRC = "torch::Tensor fused_bias_gelu(torch::Tensor x, torch::Tensor b, double scale);"

ext = load_inline(name="fused_bias_gelu_ext", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                  functions=["fused_bias_gelu"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        return ext.fused_bias_gelu(x.contiguous(), self.bias, self.scale)
